package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/autotune"
	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/route/r2rrandom"
	"github.com/tokenrouter/tokenrouter/router"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// benchFlags are the bench command's flags.
type benchFlags struct {
	engine, profile, algorithm, thresholds, system, format string
	p                                                      float64
	params                                                 []string
	concurrency                                            []int
	maxWait, duration, warmup                              time.Duration
	maxTokens, promptLen                                   int
	seed                                                   uint64
	validate                                               bool
	rounds                                                 int
	tolerance                                              float64
	retries                                                int
	maxLateness                                            time.Duration
	maxStepDev                                             float64
	resolve                                                time.Duration
	agree                                                  float64
	compare                                                benchCompareFlags
}

// benchRow is one measured configuration, as printed.
type benchRow struct {
	System          string  `json:"system"`
	Algorithm       string  `json:"algorithm"`
	Concurrency     int     `json:"concurrency"`
	Thresholds      []int   `json:"thresholds,omitempty"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	RoutedFraction  float64 `json:"routed_fraction"`
	// Auto marks automatic thresholds; Thresholds then holds the final
	// table's entries at this concurrency.
	Auto bool `json:"auto,omitempty"`
	// Plans counts the tables the tuner computed during the run.
	Plans int `json:"plans,omitempty"`
	// Tables is the final B*(n) table per model (auto only).
	Tables []sched.Table `json:"tables,omitempty"`
	// EstimatedP and EstimatedLatencyMS are the estimate behind the final
	// tables (auto only).
	EstimatedP         [][]float64 `json:"estimated_p,omitempty"`
	EstimatedLatencyMS []float64   `json:"estimated_latency_ms,omitempty"`
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure committed tokens/s under a closed loop of concurrent requests",
		Long: `bench keeps --concurrency requests in flight (a finished request is replaced at
once), warms up, then counts committed tokens over a measured window.

  tokenrouter bench --engine sim --profile paper-r2r --algorithm r2r-random --p 0.35 \
    --concurrency 4 --thresholds 1,3 --max-wait 0 --system tokenrouter --duration 15s --format json

--thresholds auto (the default) starts every model at B = 1 and lets the runtime
estimate the routing probabilities and step latencies and push the optimal
tables B*(n) (DESIGN §6); a comma-separated list fixes static thresholds.

--system lockstep runs the same engines and algorithm the way R2R's official
serving does (all requests advance in global steps).

Client w's k-th request carries the routing seed --seed ^ w<<32 ^ k, and
seeded draws depend only on the seed and the position (route.Request.Draw), so
runs with the same --seed and concurrency see the same routing draws (common
random numbers) whatever the goroutine schedule.

To change r2r-random's probability during a run (drift experiments):
  --param p-after=0.10 --param switch-at=20s
switches from --p to 0.10 20 s after the system starts (warm-up included).

--validate checks the throughput model against the runtime: sim engine,
batch-independent profile, r2r-random, max-wait 0 (unless set), for each
N in --concurrency (default 2..6) and every feasible B1 with B0 = 1, the
measured and the predicted (exact Markov chain) throughput side by side, and
whether the predicted best B1 is the measured best. The table also shows the
model's prediction at the routed fraction the windows actually had: a
finite run's routing draws stray from p, and throughput moves with them.
Each point is measured
for --duration (default 10s) in --rounds interleaved slices (the order of
points is shuffled per round), each slice after its own --warmup (default 1s).
The comparison assumes the runtime ran at the profile's step times on a
machine that was not starved: a slice whose mean step time is off the profile
by more than --max-step-dev, or during which a probe's 1 ms sleeps woke more
than --max-lateness late on average, is discarded and measured again (up to
--retries times; the table reports the retries). The criterion looks at the
machine, never at the throughput.

All points of a round share one seed, so two points' slices of a round form a
pair. The measured best is the point with the highest mean; it is told apart
(resolved) when it leads every other point by more than the 95% Student-t
confidence interval of the paired differences. Neighbouring B1 can differ by
less than the noise of a short run (the model puts N=5's B1=3 and B1=4 0.17%
apart), so --resolve gives each N a budget of further measuring: while the
best is not resolved, it and the points it does not yet clearly lead are
measured again in further rounds. The interval is checked after each round,
so its error rate is somewhat above 5%.

Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.compare.calibrate:
				return runCalibrate(cmd, f)
			case f.validate:
				return runValidate(cmd, f)
			case f.compare.systems != "":
				return runCompare(cmd, f)
			}
			return runBench(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.engine, "engine", "sim", "engine: sim")
	fl.StringVar(&f.profile, "profile", "paper-r2r", "sim latency profile")
	fl.StringVar(&f.algorithm, "algorithm", "r2r-random", "routing algorithm")
	fl.Float64Var(&f.p, "p", 0.35, "routing probability (r2r-random)")
	fl.StringArrayVar(&f.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.IntSliceVar(&f.concurrency, "concurrency", []int{4}, "requests in flight (a list runs each)")
	fl.StringVar(&f.thresholds, "thresholds", "auto", "batching thresholds: auto, or B per model (1,3)")
	fl.DurationVar(&f.maxWait, "max-wait", 50*time.Millisecond, "launch anyway after this wait (0 disables the guard)")
	fl.StringVar(&f.system, "system", "tokenrouter", "system: "+strings.Join(bench.Systems(), ", "))
	fl.DurationVar(&f.duration, "duration", 15*time.Second, "measured window (per point with --validate, default 10s there)")
	fl.DurationVar(&f.warmup, "warmup", 2*time.Second, "warm-up before the window (per slice with --validate, default 1s there)")
	fl.IntVar(&f.maxTokens, "max-tokens", 4096, "output tokens per request")
	fl.IntVar(&f.promptLen, "prompt-len", 16, "prompt tokens per request")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for prompts and routing decisions")
	fl.StringVar(&f.format, "format", "table", "output: table or json")
	fl.Float64Var(&f.agree, "agree", 0, "sim: probability that model 0 samples model 1's token (speculative acceptance)")
	addCompareFlags(fl, &f.compare)
	fl.BoolVar(&f.validate, "validate", false, "compare measured and predicted throughput for N = 2..6 and every B1 (B0 = 1)")
	fl.IntVar(&f.rounds, "rounds", 2, "with --validate or --systems: interleaved slices per point (round r uses seed --seed + r)")
	fl.Float64Var(&f.tolerance, "tolerance", 0.02, "with --validate: allowed relative gap between measured and predicted")
	fl.IntVar(&f.retries, "retries", 3, "with --validate: re-measure a slice the machine starved up to this many times")
	fl.DurationVar(&f.maxLateness, "max-lateness", time.Millisecond, "with --validate: a slice whose mean timer lateness exceeds this was starved")
	fl.Float64Var(&f.maxStepDev, "max-step-dev", 0.02, "with --validate: a slice whose mean step time is off the profile by more than this was starved")
	fl.DurationVar(&f.resolve, "resolve", 0, "with --validate: measuring time per N to spend telling the best B1 apart from its runner-up (0: none)")
	return cmd
}

// benchParams returns the algorithm parameters, with --p as p unless
// --param p=... is given.
func benchParams(f benchFlags) (map[string]string, error) {
	params, err := parseParams(f.params)
	if err != nil {
		return nil, err
	}
	if _, ok := params["p"]; !ok {
		params["p"] = strconv.FormatFloat(f.p, 'g', -1, 64)
	}
	return params, nil
}

// parseThresholds parses --thresholds: nil tables mean auto.
func parseThresholds(s string, models int) ([]sched.Table, error) {
	if strings.TrimSpace(s) == "auto" {
		return nil, nil
	}
	tables, err := sched.ParseStatic(s)
	if err != nil {
		return nil, fmt.Errorf("--thresholds: %w", err)
	}
	if len(tables) != models {
		return nil, fmt.Errorf("--thresholds: %d values for %d models", len(tables), models)
	}
	return tables, nil
}

// benchDeployment reads the profile, the algorithm parameters and the
// thresholds (nil tables: automatic) a run is built from.
func benchDeployment(f benchFlags) (sim.Preset, map[string]string, []sched.Table, error) {
	preset, err := sim.LoadPreset(f.profile)
	if err != nil {
		return sim.Preset{}, nil, nil, err
	}
	params, err := benchParams(f)
	if err != nil {
		return sim.Preset{}, nil, nil, err
	}
	tables, err := parseThresholds(f.thresholds, len(preset.Models))
	if err != nil {
		return sim.Preset{}, nil, nil, err
	}
	return preset, params, tables, nil
}

func runBench(cmd *cobra.Command, f benchFlags) error {
	if f.format != "table" && f.format != "json" {
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	preset, params, tables, err := benchDeployment(f)
	if err != nil {
		return err
	}
	var rows []benchRow
	for _, n := range f.concurrency {
		sys, err := buildSystem(f, preset, params, tables, nil)
		if err != nil {
			return err
		}
		res, err := bench.Run(cmd.Context(), sys, bench.Options{
			Concurrency: n, MaxTokens: f.maxTokens, PromptLen: f.promptLen, Warmup: f.warmup,
			Duration: f.duration, Seed: f.seed, Progress: cmd.ErrOrStderr(),
			Label: fmt.Sprintf("%s N=%d", f.system, n),
		})
		// Read the tuner before Close; its state survives Close anyway.
		var st *autotune.Status
		if r, ok := sys.(*router.Router); ok && r.Tuner() != nil {
			s := r.Tuner().Status()
			st = &s
		}
		cerr := sys.Close()
		if err != nil {
			return err
		}
		if cerr != nil {
			return fmt.Errorf("closing %s: %w", f.system, cerr)
		}
		row := benchRow{System: f.system, Algorithm: f.algorithm, Concurrency: n, TokensPerSecond: res.TokensPerSecond,
			Tokens: res.Tokens, Seconds: res.Seconds, RoutedFraction: res.RoutedFraction}
		if f.system == "tokenrouter" {
			switch {
			case tables != nil:
				for _, t := range tables {
					row.Thresholds = append(row.Thresholds, t[0])
				}
			case st != nil:
				row.Auto, row.Plans = true, st.Plans
				if st.Err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "auto thresholds: %v\n", st.Err)
				}
				if st.Tables != nil {
					row.Tables = st.Tables
					for _, t := range st.Tables {
						row.Thresholds = append(row.Thresholds, t.At(n))
					}
					row.EstimatedP, row.EstimatedLatencyMS = st.Model.P, st.Model.L
				} else {
					row.Thresholds = make([]int, len(preset.Models))
					for i := range row.Thresholds {
						row.Thresholds[i] = 1
					}
				}
			}
		}
		rows = append(rows, row)
	}
	out := cmd.OutOrStdout()
	if f.format == "json" {
		enc := json.NewEncoder(out)
		if len(rows) == 1 {
			return enc.Encode(rows[0])
		}
		return enc.Encode(rows)
	}
	fmt.Fprintf(out, "%-12s %-12s %4s %-10s %10s %8s %7s %s\n", "system", "algorithm", "N", "B", "tok/s", "tokens", "routed", "plans")
	for _, r := range rows {
		b := perfmodel.FormatB(r.Thresholds)
		plans := ""
		if r.Auto {
			b = "auto:" + b
			plans = strconv.Itoa(r.Plans)
		}
		fmt.Fprintf(out, "%-12s %-12s %4d %-10s %10.1f %8d %7.3f %s\n", r.System, r.Algorithm, r.Concurrency,
			b, r.TokensPerSecond, r.Tokens, r.RoutedFraction, plans)
	}
	return nil
}

// buildSystem wires the chosen serving system on fresh sim engines. Nil
// tables select automatic thresholds.
func buildSystem(f benchFlags, preset sim.Preset, params map[string]string, tables []sched.Table, obs subserver.Observer) (bench.System, error) {
	return benchSetup(f, preset, params, tables, obs).Build(context.Background(), f.system)
}

// benchSetup describes the deployment every system of a run is built from.
func benchSetup(f benchFlags, preset sim.Preset, params map[string]string, tables []sched.Table, obs subserver.Observer) bench.Setup {
	ms := bench.SimModels(preset, f.agree)
	for i := range ms {
		ms[i].Engine = f.engine
	}
	return bench.Setup{Models: ms, Algorithm: f.algorithm, Params: params, Registry: builtin.Registry(),
		Thresholds: tables, MaxWait: f.maxWait, Observer: obs}
}

// parseParams turns name=value pairs into a map.
func parseParams(kv []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q: want name=value", s)
		}
		out[k] = v
	}
	return out, nil
}

// validatePoint is one (N, B) point of bench --validate.
type validatePoint struct {
	Concurrency     int     `json:"concurrency"`
	Thresholds      []int   `json:"thresholds"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	RoutedFraction  float64 `json:"routed_fraction"`
	Predicted       float64 `json:"predicted_tokens_per_second"`
	Method          string  `json:"method"`
	ErrorPercent    float64 `json:"error_percent"`
	// PredictedAtRouted is the model's prediction at the routed fraction
	// the measured windows actually had (a finite run's draws stray from p
	// by about ±1%, which moves throughput by about as much), and
	// ErrorAtRoutedPercent the measured value's error against it. The
	// acceptance check (Within) uses Predicted.
	PredictedAtRouted    float64 `json:"predicted_at_routed_fraction"`
	ErrorAtRoutedPercent float64 `json:"error_at_routed_fraction_percent"`
	Within               bool    `json:"within_tolerance"`
	PredictedBest        bool    `json:"predicted_best"`
	MeasuredBest         bool    `json:"measured_best"`
	// Retries counts slices measured again because the machine starved;
	// Starved counts slices kept although it still was.
	Retries int `json:"retries"`
	Starved int `json:"starved"`
	// Slices is the number of slices measured (rounds, plus any the
	// resolve step added).
	Slices int `json:"slices"`

	routed  float64
	byRound map[int]float64 // tok/s of the slice measured in each round
}

// validateN summarises one concurrency.
type validateN struct {
	Concurrency     int     `json:"concurrency"`
	PredictedBestB1 int     `json:"predicted_best_b1"`
	MeasuredBestB1  int     `json:"measured_best_b1"`
	Match           bool    `json:"match"`
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
	// ExtraSeconds is the measuring time the resolve step added.
	ExtraSeconds float64 `json:"extra_seconds"`
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
func decide(pts []validatePoint, idx []int) contest {
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
		m, h, n := pairedLead(pts[c.best].byRound, pts[k].byRound)
		if n < 2 || m-h <= 0 {
			c.open = append(c.open, k)
		}
		if c.runnerUp < 0 || m < c.margin {
			c.runnerUp, c.margin, c.half, c.pairs = k, m, h, n
		}
	}
	return c
}

// pairedLead returns the mean of a[r] − b[r] over the rounds r both have,
// the half-width of its 95% Student-t confidence interval (0 with fewer
// than two pairs) and the number of pairs.
func pairedLead(a, b map[int]float64) (mean, half float64, n int) {
	var d []float64
	for r, x := range a {
		if y, ok := b[r]; ok {
			d = append(d, x-y)
		}
	}
	n = len(d)
	if n == 0 {
		return 0, 0, 0
	}
	mean = stat.Mean(d, nil)
	if n < 2 {
		return mean, 0, n
	}
	se := stat.StdDev(d, nil) / math.Sqrt(float64(n))
	return mean, distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975) * se, n
}

// validateReport is bench --validate's output.
type validateReport struct {
	Profile          string          `json:"profile"`
	Algorithm        string          `json:"algorithm"`
	P                float64         `json:"p"`
	LatencyMS        []float64       `json:"latency_ms"`
	MaxWaitMS        float64         `json:"max_wait_ms"`
	SecondsPerPoint  float64         `json:"seconds_per_point"`
	Rounds           int             `json:"rounds"`
	TolerancePercent float64         `json:"tolerance_percent"`
	Points           []validatePoint `json:"points"`
	PerConcurrency   []validateN     `json:"per_concurrency"`
	AllMatch         bool            `json:"all_match"`
	AllWithin        bool            `json:"all_within_tolerance"`
	// ResolveSeconds is the --resolve budget per concurrency; AllResolved
	// says every concurrency's best was told apart.
	ResolveSeconds float64 `json:"resolve_seconds"`
	AllResolved    bool    `json:"all_resolved"`
}

func runValidate(cmd *cobra.Command, f benchFlags) error {
	fl := cmd.Flags()
	if !fl.Changed("duration") {
		f.duration = 10 * time.Second
	}
	if !fl.Changed("warmup") {
		f.warmup = time.Second
	}
	if !fl.Changed("max-wait") {
		f.maxWait = 0
	}
	if !fl.Changed("concurrency") {
		f.concurrency = []int{2, 3, 4, 5, 6}
	}
	switch {
	case f.engine != "sim":
		return fmt.Errorf("--validate: --engine %q: validation runs on the sim engine", f.engine)
	case f.algorithm != r2rrandom.Name:
		return fmt.Errorf("--validate: --algorithm %q: validation runs %s", f.algorithm, r2rrandom.Name)
	case f.system != "tokenrouter":
		return fmt.Errorf("--validate: --system %q: validation runs tokenrouter", f.system)
	case f.rounds < 1 || f.duration <= 0:
		return errors.New("--validate: --rounds and --duration must be positive")
	case f.format != "table" && f.format != "json":
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	preset, err := sim.LoadPreset(f.profile)
	if err != nil {
		return err
	}
	if len(preset.Models) != 2 {
		return fmt.Errorf("--validate: profile %s has %d models, r2r needs 2", preset.Name, len(preset.Models))
	}
	lat := make([]float64, 2)
	for i, pr := range preset.Profiles {
		if pr.PerSeq != 0 || pr.PerToken != 0 {
			return fmt.Errorf("--validate: profile %s: model %d's step time depends on the batch; the model assumes it does not", preset.Name, i)
		}
		lat[i] = float64(pr.Base) / float64(time.Millisecond)
	}
	params, err := benchParams(f)
	if err != nil {
		return err
	}
	if _, ok := params["switch-at"]; ok {
		return errors.New("--validate: a p schedule (switch-at) does not fit a stationary model")
	}
	p, err := strconv.ParseFloat(params["p"], 64)
	if err != nil {
		return fmt.Errorf("--validate: p=%q: %w", params["p"], err)
	}
	model := perfmodel.R2R(p, lat[0], lat[1])
	pl := perfmodel.NewPlanner(perfmodel.Options{})
	ctx := cmd.Context()

	var pts []validatePoint
	for _, n := range f.concurrency {
		for b1 := 1; b1 <= n; b1++ {
			b := []int{1, b1}
			if !sched.Feasible(b, n) {
				continue
			}
			r, err := pl.Evaluate(ctx, model, n, b)
			if err != nil {
				return fmt.Errorf("--validate: %w", err)
			}
			pts = append(pts, validatePoint{Concurrency: n, Thresholds: b, Predicted: r.TokensPerSecond, Method: string(r.Method)})
		}
	}
	slice := f.duration / time.Duration(f.rounds)
	total := time.Duration(len(pts)*f.rounds) * (slice + f.warmup)
	fmt.Fprintf(cmd.ErrOrStderr(), "validate: %d points × %d rounds × (%v + %v warm-up) ≈ %v\n",
		len(pts), f.rounds, slice, f.warmup, total.Round(time.Second))
	done := 0
	// run measures the points idx in one round, in a shuffled order. Every
	// point of a round uses the same seed (common random numbers), so two
	// points' slices of one round form a pair.
	run := func(round int, idx []int) error {
		order := slices.Clone(idx)
		rng := rand.New(rand.NewPCG(f.seed, uint64(round)))
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, k := range order {
			pt := &pts[k]
			tables := []sched.Table{sched.Static(pt.Thresholds[0]), sched.Static(pt.Thresholds[1])}
			var sl sliceResult
			for try := 0; ; try++ {
				var err error
				sl, err = measure(ctx, f, preset, params, tables, pt.Concurrency, slice, f.seed+uint64(round))
				if err != nil {
					return err
				}
				if sl.healthy(f, lat) {
					break
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "validate: N=%d B=%s: machine starved (timer lateness %v, step ms %.3f), %s\n",
					pt.Concurrency, perfmodel.FormatB(pt.Thresholds), sl.lateness.Round(time.Microsecond), sl.stepMS,
					map[bool]string{true: "keeping the slice", false: "measuring again"}[try >= f.retries])
				if try >= f.retries {
					pt.Starved++
					break
				}
				pt.Retries++
			}
			res := sl.res
			pt.Tokens += res.Tokens
			pt.Seconds += res.Seconds
			pt.routed += res.RoutedFraction * float64(res.Tokens)
			if pt.byRound == nil {
				pt.byRound = map[int]float64{}
			}
			pt.byRound[round] = res.TokensPerSecond
			done++
			fmt.Fprintf(cmd.ErrOrStderr(), "validate [%d] round %d N=%d B=%s: %.1f tok/s (predicted %.2f)\n",
				done, round+1, pt.Concurrency, perfmodel.FormatB(pt.Thresholds), res.TokensPerSecond, pt.Predicted)
		}
		return nil
	}
	all := make([]int, len(pts))
	for k := range all {
		all[k] = k
	}
	for round := range f.rounds {
		if err := run(round, all); err != nil {
			return err
		}
	}
	rep := validateReport{Profile: preset.Name, Algorithm: f.algorithm, P: p, LatencyMS: lat,
		MaxWaitMS: float64(f.maxWait) / float64(time.Millisecond), SecondsPerPoint: f.duration.Seconds(),
		Rounds: f.rounds, TolerancePercent: 100 * f.tolerance, ResolveSeconds: f.resolve.Seconds(),
		AllMatch: true, AllWithin: true, AllResolved: true}
	next := f.rounds
	for _, n := range f.concurrency {
		var idx []int
		for k := range pts {
			if pts[k].Concurrency == n {
				idx = append(idx, k)
			}
		}
		if len(idx) == 0 {
			continue
		}
		// Resolve: while the measured best is not ahead of every other
		// point by a 95% paired confidence interval, measure it and the
		// points it is not yet ahead of in further rounds, within the
		// --resolve budget.
		var spent time.Duration
		var c contest
		for {
			c = decide(pts, idx)
			if len(c.open) == 0 || spent+time.Duration(1+len(c.open))*slice > f.resolve {
				break
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "validate: N=%d: B1=%d leads B1=%d by %.2f ± %.2f tok/s; measuring again\n",
				n, pts[c.best].Thresholds[1], pts[c.runnerUp].Thresholds[1], c.margin, c.half)
			if err := run(next, append([]int{c.best}, c.open...)); err != nil {
				return err
			}
			next++
			spent += time.Duration(1+len(c.open)) * slice
		}
		pb := slices.MaxFunc(idx, func(a, b int) int { return cmpFloat(pts[a].Predicted, pts[b].Predicted) })
		pts[pb].PredictedBest, pts[c.best].MeasuredBest = true, true
		s := validateN{Concurrency: n, PredictedBestB1: pts[pb].Thresholds[1], MeasuredBestB1: pts[c.best].Thresholds[1],
			Match: pb == c.best, Resolved: len(c.open) == 0, ExtraSeconds: spent.Seconds()}
		if c.runnerUp >= 0 {
			s.RunnerUpB1, s.Margin, s.MarginCI95, s.Pairs = pts[c.runnerUp].Thresholds[1], c.margin, c.half, c.pairs
		}
		rep.AllMatch = rep.AllMatch && s.Match
		rep.AllResolved = rep.AllResolved && s.Resolved
		rep.PerConcurrency = append(rep.PerConcurrency, s)
	}
	for k := range pts {
		pt := &pts[k]
		pt.TokensPerSecond = float64(pt.Tokens) / pt.Seconds
		pt.ErrorPercent = 100 * (pt.TokensPerSecond - pt.Predicted) / pt.Predicted
		pt.Within = math.Abs(pt.ErrorPercent) <= 100*f.tolerance
		pt.Slices = len(pt.byRound)
		rep.AllWithin = rep.AllWithin && pt.Within
		if pt.Tokens > 0 {
			pt.RoutedFraction = pt.routed / float64(pt.Tokens)
			r, err := pl.Evaluate(ctx, perfmodel.R2R(pt.RoutedFraction, lat[0], lat[1]), pt.Concurrency, pt.Thresholds)
			if err != nil {
				return fmt.Errorf("--validate: %w", err)
			}
			pt.PredictedAtRouted = r.TokensPerSecond
			pt.ErrorAtRoutedPercent = 100 * (pt.TokensPerSecond - r.TokensPerSecond) / r.TokensPerSecond
		}
	}
	for i := range rep.PerConcurrency {
		s := &rep.PerConcurrency[i]
		for k := range pts {
			if pts[k].Concurrency == s.Concurrency {
				s.MaxErrorPercent = max(s.MaxErrorPercent, math.Abs(pts[k].ErrorPercent))
			}
		}
	}
	rep.Points = pts
	if err := plotValidate(cmd, f, rep); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.format == "json" {
		return json.NewEncoder(out).Encode(rep)
	}
	printValidate(out, rep)
	return nil
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
	lateness time.Duration // mean wake-up lateness of a 1 ms sleep
	stepMS   []float64     // mean step time per model
}

// healthy reports whether the slice ran at the profile's step times on a
// machine that was not starved.
func (s sliceResult) healthy(f benchFlags, lat []float64) bool {
	if s.lateness > f.maxLateness {
		return false
	}
	for i, l := range s.stepMS {
		if l > 0 && math.Abs(l-lat[i]) > f.maxStepDev*lat[i] {
			return false
		}
	}
	return true
}

// stepMeter is a subserver.Observer that averages step times per model.
type stepMeter struct {
	steps []atomic.Int64
	nanos []atomic.Int64
}

// Step records a step's latency.
func (m *stepMeter) Step(model, _, _ int, d time.Duration) {
	if model >= 0 && model < len(m.steps) {
		m.steps[model].Add(1)
		m.nanos[model].Add(int64(d))
	}
}

// Routed ignores hand-offs.
func (m *stepMeter) Routed(int, []int) {}

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

// measure runs one closed-loop slice of the tokenrouter system, watching the
// step times and the machine's timer lateness.
func measure(ctx context.Context, f benchFlags, preset sim.Preset, params map[string]string, tables []sched.Table,
	n int, d time.Duration, seed uint64) (sliceResult, error) {
	f.system = "tokenrouter"
	m := len(preset.Models)
	meter := &stepMeter{steps: make([]atomic.Int64, m), nanos: make([]atomic.Int64, m)}
	sys, err := buildSystem(f, preset, params, tables, meter)
	if err != nil {
		return sliceResult{}, err
	}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var late time.Duration
	wg.Go(func() { late = probeLateness(pctx) })
	res, err := bench.Run(ctx, sys, bench.Options{
		Concurrency: n, MaxTokens: f.maxTokens, PromptLen: f.promptLen, Warmup: f.warmup, Duration: d, Seed: seed,
	})
	stop()
	wg.Wait()
	cerr := sys.Close()
	if err != nil {
		return sliceResult{}, err
	}
	if cerr != nil {
		return sliceResult{}, fmt.Errorf("closing tokenrouter: %w", cerr)
	}
	out := sliceResult{res: res, lateness: late, stepMS: make([]float64, m)}
	for i := range m {
		if k := meter.steps[i].Load(); k > 0 {
			out.stepMS[i] = float64(meter.nanos[i].Load()) / float64(k) / 1e6
		}
	}
	return out, nil
}

// printValidate prints the human table of a validation.
func printValidate(w io.Writer, rep validateReport) {
	fmt.Fprintf(w, "profile %s (L = %s ms), %s p = %g, max-wait %gms, %.0fs per point in %d rounds\n",
		rep.Profile, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(rep.LatencyMS)), ", "), "[]"),
		rep.Algorithm, rep.P, rep.MaxWaitMS, rep.SecondsPerPoint, rep.Rounds)
	fmt.Fprintf(w, "%3s %-5s %10s %10s %8s %7s %10s %8s %6s %6s %7s %s\n", "N", "B", "measured", "predicted", "error", "routed",
		"at routed", "error", "method", "slices", "retries", "best")
	for _, pt := range rep.Points {
		best := ""
		if pt.PredictedBest {
			best += " predicted"
		}
		if pt.MeasuredBest {
			best += " measured"
		}
		mark := ""
		if !pt.Within {
			mark = "!"
		}
		fmt.Fprintf(w, "%3d %-5s %10.2f %10.2f %+7.2f%%%1s %6.3f %10.2f %+7.2f%% %6s %6d %7d%s\n", pt.Concurrency, perfmodel.FormatB(pt.Thresholds),
			pt.TokensPerSecond, pt.Predicted, pt.ErrorPercent, mark, pt.RoutedFraction, pt.PredictedAtRouted, pt.ErrorAtRoutedPercent,
			pt.Method, pt.Slices, pt.Retries, best)
	}
	fmt.Fprintln(w)
	for _, s := range rep.PerConcurrency {
		lead := "no other point"
		switch {
		case s.RunnerUpB1 > 0 && s.Pairs >= 2:
			lead = fmt.Sprintf("leads B1=%d by %.2f ± %.2f tok/s (95%%, %d pairs)", s.RunnerUpB1, s.Margin, s.MarginCI95, s.Pairs)
		case s.RunnerUpB1 > 0:
			lead = fmt.Sprintf("leads B1=%d by %.2f tok/s (%d pair: no interval)", s.RunnerUpB1, s.Margin, s.Pairs)
		}
		fmt.Fprintf(w, "N=%d: predicted best B1=%d, measured best B1=%d, match=%v, resolved=%v (%s), max |error| %.2f%%\n",
			s.Concurrency, s.PredictedBestB1, s.MeasuredBestB1, s.Match, s.Resolved, lead, s.MaxErrorPercent)
	}
	fmt.Fprintf(w, "all match: %v; all resolved: %v; all within %.0f%%: %v\n", rep.AllMatch, rep.AllResolved, rep.TolerancePercent, rep.AllWithin)
}
