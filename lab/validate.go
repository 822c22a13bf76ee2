package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// ValidateConfig configures Validate: the throughput model checked against
// the runtime.
type ValidateConfig struct {
	// Setup is the deployment: two models, an algorithm whose routing
	// process is known up front (route.Predictable), and the max-wait
	// guard (Launch.MaxWait; 0 matches the model). Its launch tables and
	// Observer are set per point. It must run the models as Placement
	// says.
	Setup bench.Setup
	// Steps are the models' step-time curves the prediction uses (a
	// calibrated profile's, for real engines); nil takes them from the
	// Setup's simulated models (config.Model.Latency or Profile), and
	// Interference with them.
	Steps []steptime.Curve
	// Interference is each model's interference factor under partitioned
	// placement (nil: none).
	Interference []float64
	// Recalibrate, if set, calibrates the Setup's models as placed
	// (CalibratePlaced, with these options) before the first
	// concurrency and after each; each concurrency's points are predicted
	// from the mean of the calibrations before and after its rounds
	// (MergeCalibrations) instead of Steps and Interference, so that the
	// machine's drift between a calibration and the measurement stays out
	// of the prediction.
	Recalibrate *CalibrateOptions
	// RecalibrateRounds calibrates after every round of a concurrency, not
	// only after its last: the concurrency's points are then priced on
	// the pointwise median of every calibration taken while they were
	// measured and the one before (MergeCalibrations), which samples the
	// machine's speed over the same minutes as the slices.
	RecalibrateRounds bool
	// Placement is how the Setup's models share the machine.
	Placement perfmodel.Placement
	// Concurrency lists the N to validate; every feasible B = (1, B1) of
	// each is a point.
	Concurrency []int
	// Duration is the measuring time per point, split into Rounds
	// interleaved slices, each after its own Warmup.
	Duration, Warmup time.Duration
	// Rounds is the number of interleaved slices per point.
	Rounds int
	// Tolerance is the allowed relative gap between measured and
	// predicted.
	Tolerance float64
	// Retries bounds how often a slice the machine starved is measured
	// again; a slice is starved when its mean timer lateness exceeds
	// MaxLateness or its mean step time is off the profile by more than
	// MaxStepDev (relative).
	Retries int
	// MaxLateness and MaxStepDev: see Retries.
	MaxLateness time.Duration
	MaxStepDev  float64
	// Resolve is the extra measuring time per N spent telling the best B1
	// apart from its runner-up.
	Resolve time.Duration
	// MaxTokens and PromptLen size the requests; Seed seeds round 0
	// (round r uses Seed + r).
	MaxTokens, PromptLen int
	Seed                 uint64
	// Progress, if set, receives a line per slice.
	Progress io.Writer
}

// ValidatePoint is one (N, B) point of a validation.
type ValidatePoint struct {
	// Concurrency is N; Thresholds is B.
	Concurrency int   `json:"concurrency"`
	Thresholds  []int `json:"thresholds"`
	// TokensPerSecond is Tokens committed over Seconds measured in all
	// slices; RoutedFraction the share of them from model 1.
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	RoutedFraction  float64 `json:"routed_fraction"`
	// Predicted is the model's throughput, by Method ("exact" or
	// "simulation"); ErrorPercent the measured value's error against it.
	Predicted    float64 `json:"predicted_tokens_per_second"`
	Method       string  `json:"method"`
	ErrorPercent float64 `json:"error_percent"`
	// PredictedAtRouted is the model's prediction at the routed fraction
	// the measured windows actually had (the algorithm's parameter p set
	// to it: a finite run's draws stray from p by about ±1%, which moves
	// throughput by about as much), and ErrorAtRoutedPercent the measured
	// value's error against it. The acceptance check (Within) uses
	// Predicted.
	PredictedAtRouted    float64 `json:"predicted_at_routed_fraction"`
	ErrorAtRoutedPercent float64 `json:"error_at_routed_fraction_percent"`
	// Within says |ErrorPercent| is within the tolerance.
	Within bool `json:"within_tolerance"`
	// StepOverCurve holds, per model, the measured time of the point's
	// steps over what the curves give for the same steps (the engines'
	// speed during its slices against their calibration);
	// PredictedAtStepSpeed is the prediction with every curve scaled by
	// it, ErrorAtStepSpeedPercent the measured value's error against that
	// and WithinAtStepSpeed whether it is within the tolerance: the
	// throughput model's own error, with the machine's drift since the
	// calibration taken out.
	StepOverCurve           []float64 `json:"step_over_curve,omitempty"`
	PredictedAtStepSpeed    float64   `json:"predicted_at_step_speed,omitempty"`
	ErrorAtStepSpeedPercent float64   `json:"error_at_step_speed_percent"`
	WithinAtStepSpeed       bool      `json:"within_tolerance_at_step_speed"`
	// PredictedBest and MeasuredBest mark the best B1 of this N.
	PredictedBest bool `json:"predicted_best"`
	MeasuredBest  bool `json:"measured_best"`
	// Retries counts slices measured again because the machine starved;
	// Starved counts slices kept although it still was.
	Retries int `json:"retries"`
	Starved int `json:"starved"`
	// Slices is the number of slices measured (rounds, plus any the
	// resolve step added).
	Slices int `json:"slices"`

	routed  float64
	byRound map[int]float64  // tok/s of the slice measured in each round
	steps   *bench.StepTally // the steps of every slice
}

// ValidateN summarises one concurrency.
type ValidateN struct {
	// Concurrency is N.
	Concurrency int `json:"concurrency"`
	// PredictedBestB1 and MeasuredBestB1 are the best B1; Match says they
	// are equal.
	PredictedBestB1 int  `json:"predicted_best_b1"`
	MeasuredBestB1  int  `json:"measured_best_b1"`
	Match           bool `json:"match"`
	// MaxErrorPercent is the largest |error| of this N's points.
	MaxErrorPercent float64 `json:"max_abs_error_percent"`
	// RunnerUpB1 is the point closest to the measured best; Margin is the
	// best's mean lead over it in paired slices (same round, same seed),
	// MarginCI95 the half-width of its 95% confidence interval and Pairs
	// the number of pairs.
	RunnerUpB1 int     `json:"runner_up_b1,omitempty"`
	Margin     float64 `json:"margin_tokens_per_second"`
	MarginCI95 float64 `json:"margin_ci95"`
	Pairs      int     `json:"pairs"`
	// Resolved is true when the best leads every other point by more than
	// the confidence interval: the measurement tells the best apart.
	Resolved bool `json:"resolved"`
	// PredictedMargin is how far the model puts its best ahead of its
	// runner-up (tok/s): a measurement cannot tell apart points the
	// model itself puts closer than the slices' noise.
	PredictedMargin float64 `json:"predicted_margin_tokens_per_second"`
	// PredictedLead is the measured best's paired lead over the predicted
	// best and PredictedLeadCI95 its 95% half-width (0 and 0 when they are
	// the same point); Consistent says the measurement does not rank the
	// predicted best below the measured best (they are the same point, or
	// the lead is within its interval).
	PredictedLead     float64 `json:"predicted_best_behind_tokens_per_second"`
	PredictedLeadCI95 float64 `json:"predicted_best_behind_ci95"`
	Consistent        bool    `json:"consistent"`
	// ExtraSeconds is the measuring time the resolve step added.
	ExtraSeconds float64 `json:"extra_seconds"`
	// LatencyMS are the models' one-request decode step times on the
	// curves that priced this N's points with ValidateConfig.Recalibrate:
	// those fitted to the merge (MergeCalibrations) of Calibrations, the
	// calibrations taken before its rounds and after them (after each,
	// with RecalibrateRounds).
	LatencyMS    []float64    `json:"latency_ms,omitempty"`
	Calibrations []sim.Preset `json:"calibrations,omitempty"`
}

// ValidateReport is a validation's result.
type ValidateReport struct {
	// Algorithm and Params are the algorithm validated.
	Algorithm string            `json:"algorithm"`
	Params    map[string]string `json:"params"`
	// LatencyMS are the models' one-request decode step times (their
	// step time when it does not depend on the batch); Steps the step-time
	// curves; MaxWaitMS the guard.
	LatencyMS []float64        `json:"latency_ms"`
	Steps     []steptime.Curve `json:"steps,omitempty"`
	Placement string           `json:"placement"`
	MaxWaitMS float64          `json:"max_wait_ms"`
	// SecondsPerPoint, Rounds and TolerancePercent repeat the
	// configuration.
	SecondsPerPoint  float64 `json:"seconds_per_point"`
	Rounds           int     `json:"rounds"`
	TolerancePercent float64 `json:"tolerance_percent"`
	// Points are every (N, B); PerConcurrency summarises each N.
	Points         []ValidatePoint `json:"points"`
	PerConcurrency []ValidateN     `json:"per_concurrency"`
	// AllMatch says the measured best equals the predicted best at every
	// N; AllWithin that every point is within the tolerance.
	AllMatch  bool `json:"all_match"`
	AllWithin bool `json:"all_within_tolerance"`
	// AllWithinAtStepSpeed says every point is within the tolerance of
	// its prediction at the speed its engines stepped.
	AllWithinAtStepSpeed bool `json:"all_within_tolerance_at_step_speed"`
	// ResolveSeconds is the Resolve budget per concurrency; AllResolved
	// says every concurrency's best was told apart.
	ResolveSeconds float64 `json:"resolve_seconds"`
	AllResolved    bool    `json:"all_resolved"`
	// AllConsistent says no concurrency's measurement ranks its predicted
	// best below its measured best (ValidateN.Consistent).
	AllConsistent bool `json:"all_consistent"`
}

// Validate measures every point and compares it with the throughput
// model's prediction, one concurrency after another: its rounds (each
// measuring every point of that N once, in a shuffled order), then its
// resolve step. All points of a round share one seed, so two points'
// slices of a round form a pair; the measured best of an N is resolved
// when it leads every other point by more than the 95% Student-t interval
// of the paired differences.
func Validate(ctx context.Context, c ValidateConfig) (ValidateReport, error) {
	if c.Rounds < 1 || c.Duration <= 0 {
		return ValidateReport{}, errors.New("bench: validate: rounds and duration must be positive")
	}
	if len(c.Concurrency) == 0 {
		return ValidateReport{}, errors.New("bench: validate: no concurrency")
	}
	v := &validator{c: c, pl: perfmodel.NewPlanner(perfmodel.Options{})}
	var before sim.Preset
	if c.Recalibrate != nil {
		var err error
		if before, err = v.calibrate(ctx, "before N="+strconv.Itoa(c.Concurrency[0])); err != nil {
			return ValidateReport{}, err
		}
		v.c.Steps, v.c.Interference = before.Curves()
	}
	if err := v.model(); err != nil {
		return ValidateReport{}, err
	}
	v.announce()
	rep := v.newReport()
	for _, n := range c.Concurrency {
		s, ok, err := v.validateN(ctx, n, &before)
		if err != nil {
			return ValidateReport{}, err
		}
		if !ok {
			continue
		}
		rep.AllMatch = rep.AllMatch && s.Match
		rep.AllResolved = rep.AllResolved && s.Resolved
		rep.AllConsistent = rep.AllConsistent && s.Consistent
		rep.PerConcurrency = append(rep.PerConcurrency, s)
	}
	for _, pt := range v.pts {
		rep.AllWithin = rep.AllWithin && pt.Within
		if pt.Tokens > 0 {
			rep.AllWithinAtStepSpeed = rep.AllWithinAtStepSpeed && pt.WithinAtStepSpeed
		}
	}
	rep.Points = v.pts
	return rep, nil
}

// announce reports how many points the validation measures and roughly
// how long it takes.
func (v *validator) announce() {
	c := v.c
	points := 0
	for _, n := range c.Concurrency {
		for b1 := 1; b1 <= n; b1++ {
			if sched.Feasible([]int{1, b1}, n) {
				points++
			}
		}
	}
	v.progress("validate: %d points × %d rounds × (%v + %v warm-up) ≈ %v\n", points, c.Rounds, v.slice(), c.Warmup,
		(time.Duration(points*c.Rounds) * (v.slice() + c.Warmup)).Round(time.Second))
}

// newReport is the report before any point is measured: its settings, and
// every verdict true until a point contradicts it.
func (v *validator) newReport() ValidateReport {
	c := v.c
	return ValidateReport{Algorithm: c.Setup.Algorithm, Params: c.Setup.Params, LatencyMS: v.lat, Steps: v.md.Steps,
		Placement: string(v.md.Placement),
		MaxWaitMS: float64(c.Setup.Launch.MaxWait) / float64(time.Millisecond), SecondsPerPoint: c.Duration.Seconds(),
		Rounds: c.Rounds, TolerancePercent: 100 * c.Tolerance, ResolveSeconds: c.Resolve.Seconds(),
		AllMatch: true, AllWithin: true, AllWithinAtStepSpeed: true, AllResolved: true, AllConsistent: true}
}

// validateN predicts, measures and resolves the points of concurrency n;
// before is the latest calibration, updated when recalibrating. It returns
// false when n has no points to measure.
func (v *validator) validateN(ctx context.Context, n int, before *sim.Preset) (ValidateN, bool, error) {
	c := v.c
	idx, err := v.predict(ctx, n)
	if err != nil || len(idx) == 0 {
		return ValidateN{}, false, err
	}
	cals, err := v.rounds(ctx, n, idx, *before)
	if err != nil {
		return ValidateN{}, false, err
	}
	if c.Recalibrate != nil {
		if err := v.recalibrate(ctx, idx, cals); err != nil {
			return ValidateN{}, false, err
		}
		*before = cals[len(cals)-1]
	}
	v.next = c.Rounds
	s, err := v.resolve(ctx, n, idx)
	if err != nil {
		return ValidateN{}, false, err
	}
	if c.Recalibrate != nil {
		s.LatencyMS, s.Calibrations = v.lat, cals
	}
	if s.MaxErrorPercent, err = v.finish(ctx, idx); err != nil {
		return ValidateN{}, false, err
	}
	return s, true, nil
}

// rounds measures the points idx of concurrency n round by round and,
// when recalibrating, returns the calibrations: before, then those taken
// after the rounds.
func (v *validator) rounds(ctx context.Context, n int, idx []int, before sim.Preset) ([]sim.Preset, error) {
	c := v.c
	var cals []sim.Preset
	if c.Recalibrate != nil {
		cals = []sim.Preset{before}
	}
	for round := range c.Rounds {
		if err := v.run(ctx, round, idx); err != nil {
			return nil, err
		}
		if c.Recalibrate != nil && (c.RecalibrateRounds || round == c.Rounds-1) {
			after, err := v.calibrate(ctx, fmt.Sprintf("after N=%d round %d", n, round+1))
			if err != nil {
				return nil, err
			}
			cals = append(cals, after)
		}
	}
	return cals, nil
}

// recalibrate merges the calibrations into the model's curves and predicts
// the points idx again with them.
func (v *validator) recalibrate(ctx context.Context, idx []int, cals []sim.Preset) error {
	all, err := MergeCalibrations(*v.c.Recalibrate, cals...)
	if err != nil {
		return fmt.Errorf("bench: validate: %w", err)
	}
	if err := v.setCurves(all.Curves()); err != nil {
		return err
	}
	return v.repredict(ctx, idx)
}

// validator is one validation in progress.
type validator struct {
	c    ValidateConfig
	pl   *perfmodel.Planner
	md   perfmodel.Model
	lat  []float64
	pts  []ValidatePoint
	done int
	next int // the next round number the resolve step uses
}

func (v *validator) progress(format string, a ...any) {
	if v.c.Progress != nil {
		fmt.Fprintf(v.c.Progress, format, a...)
	}
}

func (v *validator) slice() time.Duration { return v.c.Duration / time.Duration(v.c.Rounds) }

// process returns the routing process of the algorithm with params.
func (v *validator) process(params map[string]string) (p, c [][]float64, err error) {
	s := v.c.Setup
	a, err := s.Registry.New(s.Algorithm, route.Spec{Model: -1, Models: s.Names(), Params: params})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: validate: %w", err)
	}
	pr, ok := a.(route.Predictable)
	if !ok {
		return nil, nil, fmt.Errorf("bench: validate: algorithm %s does not state its routing process (route.Predictable)", s.Algorithm)
	}
	if p, c, ok = pr.Process(); !ok {
		return nil, nil, fmt.Errorf("bench: validate: algorithm %s with %v: its routing process changes during the run", s.Algorithm, params)
	}
	return p, c, nil
}

// model builds the throughput model of the setup: its routing process
// and its models' step times.
func (v *validator) model() error {
	ms := v.c.Setup.Models
	if len(ms) != 2 {
		return fmt.Errorf("bench: validate: %d models; B0 = 1 and a sweep of B1 need 2", len(ms))
	}
	steps, inter := v.c.Steps, v.c.Interference
	if steps == nil {
		for i, m := range ms {
			if m.Engine != loader.KindSim {
				return fmt.Errorf("bench: validate: model %d (%s) runs on engine %s: give its step-time curve (a calibrated profile)", i, m.Name, m.Engine)
			}
			prof, err := loader.SimProfile(m)
			if err != nil {
				return fmt.Errorf("bench: validate: model %d (%s): %w", i, m.Name, err)
			}
			steps, inter = append(steps, prof.Curve), append(inter, prof.Interference)
		}
	}
	v.md = perfmodel.Model{Steps: steps, Interference: inter, Placement: v.c.Placement,
		Workload: perfmodel.Workload{PromptLen: v.c.PromptLen, OutputLen: v.c.MaxTokens}}
	if v.md.Placement == "" {
		v.md.Placement = perfmodel.Partitioned
	}
	var err error
	if v.md, err = v.withProcess(v.c.Setup.Params); err != nil {
		return err
	}
	return v.setCurves(steps, inter)
}

// setCurves gives the model the models' step-time curves and interference
// factors.
func (v *validator) setCurves(steps []steptime.Curve, inter []float64) error {
	if len(steps) != len(v.c.Setup.Models) {
		return fmt.Errorf("bench: validate: %d step-time curves for %d models", len(steps), len(v.c.Setup.Models))
	}
	v.md.Steps, v.md.Interference = steps, inter
	if err := v.md.Validate(); err != nil {
		return fmt.Errorf("bench: validate: %w", err)
	}
	v.md.Delta = perfmodel.AutoDelta(v.md)
	v.lat = make([]float64, len(steps))
	for i := range steps {
		v.lat[i] = v.md.Curve(i).At(1, 0, v.md.StepContext(i, nil))
	}
	return nil
}

// withProcess returns the throughput model with the routing process of
// the algorithm at params.
func (v *validator) withProcess(params map[string]string) (perfmodel.Model, error) {
	p, c, err := v.process(params)
	if err != nil {
		return perfmodel.Model{}, err
	}
	m := v.md
	m.P, m.C = p, c
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("bench: validate: %w", err)
	}
	return m, nil
}

// predict adds every feasible point of concurrency n with its prediction
// and returns their indices.
func (v *validator) predict(ctx context.Context, n int) ([]int, error) {
	var idx []int
	for b1 := 1; b1 <= n; b1++ {
		b := []int{1, b1}
		if !sched.Feasible(b, n) {
			continue
		}
		r, err := v.pl.Evaluate(ctx, v.md, n, b)
		if err != nil {
			return nil, fmt.Errorf("bench: validate: %w", err)
		}
		idx = append(idx, len(v.pts))
		v.pts = append(v.pts, ValidatePoint{Concurrency: n, Thresholds: b, Predicted: r.TokensPerSecond, Method: string(r.Method)})
	}
	return idx, nil
}

// calibrate calibrates the models for Recalibrate.
func (v *validator) calibrate(ctx context.Context, when string) (sim.Preset, error) {
	pl := string(v.c.Placement)
	if pl == "" {
		pl = sim.Partitioned
	}
	start := time.Now()
	p, err := CalibratePlaced(ctx, v.c.Setup.Kinds, v.c.Setup.Models, pl, *v.c.Recalibrate)
	if err != nil {
		return sim.Preset{}, fmt.Errorf("bench: validate: calibrating %s: %w", when, err)
	}
	v.progress("validate: calibrated %s in %v: %s\n", when, time.Since(start).Round(100*time.Millisecond), CurveSummary(p))
	return p, nil
}

// repredict predicts the points idx again from the model's curves.
func (v *validator) repredict(ctx context.Context, idx []int) error {
	for _, k := range idx {
		pt := &v.pts[k]
		r, err := v.pl.Evaluate(ctx, v.md, pt.Concurrency, pt.Thresholds)
		if err != nil {
			return fmt.Errorf("bench: validate: %w", err)
		}
		pt.Predicted, pt.Method = r.TokensPerSecond, string(r.Method)
	}
	return nil
}

// run measures the points idx in one round, in a shuffled order. Every
// point of a round uses the same seed (common random numbers).
func (v *validator) run(ctx context.Context, round int, idx []int) error {
	order := slices.Clone(idx)
	rng := rand.New(rand.NewPCG(v.c.Seed, uint64(round)))
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	for _, k := range order {
		pt := &v.pts[k]
		res, steps, err := v.measureHealthy(ctx, pt, v.c.Seed+uint64(round))
		if err != nil {
			return err
		}
		pt.Tokens += res.Tokens
		pt.Seconds += res.Seconds
		if pt.steps == nil {
			pt.steps = &bench.StepTally{}
		}
		pt.steps.Add(steps)
		pt.routed += res.RoutedFraction * float64(res.Tokens)
		if pt.byRound == nil {
			pt.byRound = map[int]float64{}
		}
		pt.byRound[round] = res.TokensPerSecond
		v.done++
		v.progress("validate [%d] round %d N=%d B=%s: %.1f tok/s (predicted %.2f)\n",
			v.done, round+1, pt.Concurrency, perfmodel.FormatB(pt.Thresholds), res.TokensPerSecond, pt.Predicted)
	}
	return nil
}

// measureHealthy measures one slice of pt, again while the machine
// starved it (up to Retries times).
func (v *validator) measureHealthy(ctx context.Context, pt *ValidatePoint, seed uint64) (bench.Result, *bench.StepTally, error) {
	tables := []sched.Table{sched.Static(pt.Thresholds[0]), sched.Static(pt.Thresholds[1])}
	for try := 0; ; try++ {
		sl, err := v.measure(ctx, tables, pt.Concurrency, seed)
		if err != nil {
			return bench.Result{}, nil, err
		}
		if sl.healthy(v.c) {
			return sl.res, sl.steps, nil
		}
		v.progress("validate: N=%d B=%s: machine starved (timer lateness %v, steps off their curves by %.3f), %s\n",
			pt.Concurrency, perfmodel.FormatB(pt.Thresholds), sl.lateness.Round(time.Microsecond), sl.stepDev,
			map[bool]string{true: "keeping the slice", false: "measuring again"}[try >= v.c.Retries])
		if try >= v.c.Retries {
			pt.Starved++
			return sl.res, sl.steps, nil
		}
		pt.Retries++
	}
}

// resolve decides concurrency n, whose points are idx: while the measured
// best is not ahead of every other point by a 95% paired confidence
// interval, it measures the best and the points it is not yet ahead of in
// further rounds, within the Resolve budget.
func (v *validator) resolve(ctx context.Context, n int, idx []int) (ValidateN, error) {
	var spent time.Duration
	var c contest
	for {
		c = decide(v.pts, idx)
		if len(c.open) == 0 || spent+time.Duration(1+len(c.open))*v.slice() > v.c.Resolve {
			break
		}
		v.progress("validate: N=%d: B1=%d leads B1=%d by %.2f ± %.2f tok/s; measuring again\n",
			n, v.pts[c.best].Thresholds[1], v.pts[c.runnerUp].Thresholds[1], c.margin, c.half)
		if err := v.run(ctx, v.next, append([]int{c.best}, c.open...)); err != nil {
			return ValidateN{}, err
		}
		v.next++
		spent += time.Duration(1+len(c.open)) * v.slice()
	}
	s := verdict(v.pts, idx, c)
	s.Concurrency, s.ExtraSeconds = n, spent.Seconds()
	return s, nil
}

// finish fills the totals, errors and predictions at the routed fraction
// and at the step speed of the points idx, and returns their largest
// |error|.
func (v *validator) finish(ctx context.Context, idx []int) (float64, error) {
	worst := 0.0
	for _, k := range idx {
		pt := &v.pts[k]
		pt.TokensPerSecond = float64(pt.Tokens) / pt.Seconds
		pt.ErrorPercent = 100 * (pt.TokensPerSecond - pt.Predicted) / pt.Predicted
		pt.Within = math.Abs(pt.ErrorPercent) <= 100*v.c.Tolerance
		pt.Slices = len(pt.byRound)
		worst = max(worst, math.Abs(pt.ErrorPercent))
		if pt.Tokens == 0 {
			continue
		}
		pt.RoutedFraction = pt.routed / float64(pt.Tokens)
		if err := v.atRouted(ctx, pt); err != nil {
			return 0, err
		}
		if err := v.predictAtStepSpeed(ctx, pt); err != nil {
			return 0, err
		}
	}
	return worst, nil
}

// atRouted predicts pt at its measured routed fraction: the algorithm's
// parameter p set to it. An algorithm without such a parameter leaves the
// prediction at 0.
func (v *validator) atRouted(ctx context.Context, pt *ValidatePoint) error {
	params := map[string]string{}
	for k, x := range v.c.Setup.Params {
		params[k] = x
	}
	if _, ok := params["p"]; !ok {
		return nil
	}
	params["p"] = strconv.FormatFloat(pt.RoutedFraction, 'g', -1, 64)
	m, err := v.withProcess(params)
	if err != nil {
		return err
	}
	r, err := v.pl.Evaluate(ctx, m, pt.Concurrency, pt.Thresholds)
	if err != nil {
		return fmt.Errorf("bench: validate: %w", err)
	}
	pt.PredictedAtRouted = r.TokensPerSecond
	pt.ErrorAtRoutedPercent = 100 * (pt.TokensPerSecond - r.TokensPerSecond) / r.TokensPerSecond
	return nil
}

// predictAtStepSpeed predicts pt with every model's curve scaled by how much
// slower or faster its steps ran during pt's slices than the curve says.
func (v *validator) predictAtStepSpeed(ctx context.Context, pt *ValidatePoint) error {
	if pt.steps == nil {
		return nil
	}
	ratio, err := pt.steps.OverCurve(v.md)
	if err != nil {
		return fmt.Errorf("bench: validate: %w", err)
	}
	r, err := v.pl.Evaluate(ctx, atStepSpeed(v.md, ratio), pt.Concurrency, pt.Thresholds)
	if err != nil {
		return fmt.Errorf("bench: validate: %w", err)
	}
	pt.StepOverCurve, pt.PredictedAtStepSpeed = ratio, r.TokensPerSecond
	pt.ErrorAtStepSpeedPercent = 100 * (pt.TokensPerSecond - r.TokensPerSecond) / r.TokensPerSecond
	pt.WithinAtStepSpeed = math.Abs(pt.ErrorAtStepSpeedPercent) <= 100*v.c.Tolerance
	return nil
}

// verdict compares the predicted best of the points idx with the measured
// best of contest c (decide's), marks both and returns the comparison.
func verdict(pts []ValidatePoint, idx []int, c contest) ValidateN {
	pb := slices.MaxFunc(idx, func(a, b int) int { return cmpFloat(pts[a].Predicted, pts[b].Predicted) })
	pts[pb].PredictedBest, pts[c.best].MeasuredBest = true, true
	s := ValidateN{PredictedBestB1: pts[pb].Thresholds[1], MeasuredBestB1: pts[c.best].Thresholds[1],
		Match: pb == c.best, Resolved: len(c.open) == 0, Consistent: pb == c.best}
	if c.runnerUp >= 0 {
		s.RunnerUpB1, s.Margin, s.MarginCI95, s.Pairs = pts[c.runnerUp].Thresholds[1], c.margin, c.half, c.pairs
	}
	first := true
	for _, k := range idx {
		if gap := pts[pb].Predicted - pts[k].Predicted; k != pb && (first || gap < s.PredictedMargin) {
			s.PredictedMargin, first = gap, false
		}
	}
	if pb != c.best {
		m, h, pairs := bench.PairedLead(pts[c.best].byRound, pts[pb].byRound)
		s.PredictedLead, s.PredictedLeadCI95, s.Consistent = m, h, pairs >= 2 && m-h <= 0
	}
	return s
}

// contest is where one concurrency's points stand: the measured best, the
// points it is not yet ahead of by a 95% paired confidence interval, and its
// lead over the closest point.
type contest struct {
	best, runnerUp int
	open           []int
	margin, half   float64
	pairs          int
}

// decide finds the measured best of the points idx (highest mean slice
// throughput) and compares every other point with it slice by slice.
func decide(pts []ValidatePoint, idx []int) contest {
	mean := func(k int) float64 {
		s := 0.0
		for _, v := range pts[k].byRound {
			s += v
		}
		return s / float64(max(len(pts[k].byRound), 1))
	}
	c := contest{best: slices.MaxFunc(idx, func(a, b int) int { return cmpFloat(mean(a), mean(b)) }), runnerUp: -1}
	for _, k := range idx {
		if k == c.best {
			continue
		}
		m, h, n := bench.PairedLead(pts[c.best].byRound, pts[k].byRound)
		if n < 2 || m-h <= 0 {
			c.open = append(c.open, k)
		}
		if c.runnerUp < 0 || m < c.margin {
			c.runnerUp, c.margin, c.half, c.pairs = k, m, h, n
		}
	}
	return c
}

// cmpFloat orders floats for slices.MaxFunc (the first maximum wins).
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sliceResult is one measured slice and the health of the machine during it.
type sliceResult struct {
	res      bench.Result
	lateness time.Duration    // mean wake-up lateness of a 1 ms sleep
	stepDev  []float64        // per model: its steps' time over their curves', less 1
	steps    *bench.StepTally // its steps
}

// healthy reports whether the slice ran at its curves' step times on a
// machine that was not starved.
func (s sliceResult) healthy(c ValidateConfig) bool {
	if s.lateness > c.MaxLateness {
		return false
	}
	for _, d := range s.stepDev {
		if math.Abs(d) > c.MaxStepDev {
			return false
		}
	}
	return true
}

// probeLateness sleeps 1 ms at a time until ctx ends and returns the mean
// lateness of the wake-ups.
func probeLateness(ctx context.Context) time.Duration {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var sum time.Duration
	n := 0
	for {
		start := time.Now()
		t.Reset(time.Millisecond)
		select {
		case <-ctx.Done():
			if n == 0 {
				return 0
			}
			return sum / time.Duration(n)
		case <-t.C:
			sum += time.Since(start) - time.Millisecond
			n++
		}
	}
}

// measure runs one closed-loop slice of the tokenrouter system with static
// tables, watching the step times and the machine's timer lateness.
func (v *validator) measure(ctx context.Context, tables []sched.Table, n int, seed uint64) (sliceResult, error) {
	tally := &bench.StepTally{}
	setup := v.c.Setup
	setup.Launch, setup.Observer = sched.Launch{Tables: tables, MaxWait: setup.Launch.MaxWait}, bench.Observers{setup.Observer, tally}
	sys, err := setup.Build(ctx, "tokenrouter")
	if err != nil {
		return sliceResult{}, err
	}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var late time.Duration
	wg.Go(func() { late = probeLateness(pctx) })
	res, err := bench.Run(ctx, sys, bench.Options{
		Concurrency: n, MaxTokens: v.c.MaxTokens, PromptLen: v.c.PromptLen, Warmup: v.c.Warmup, Duration: v.slice(), Seed: seed,
	})
	stop()
	wg.Wait()
	cerr := sys.Close()
	if err != nil {
		return sliceResult{}, err
	}
	if cerr != nil {
		return sliceResult{}, fmt.Errorf("bench: closing tokenrouter: %w", cerr)
	}
	ratio, err := tally.OverCurve(v.md)
	if err != nil {
		return sliceResult{}, fmt.Errorf("bench: validate: %w", err)
	}
	dev := make([]float64, len(ratio))
	for i, r := range ratio {
		if r > 0 {
			dev[i] = r - 1
		}
	}
	return sliceResult{res: res, lateness: late, stepDev: dev, steps: tally}, nil
}
