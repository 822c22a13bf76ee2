// Package autotune chooses TokenRouter's launch thresholds while it runs
// (DESIGN §6, "the runtime uses B* by default"). A Tuner watches every
// sub-server as a subserver.Observer: the hot path only adds to per-model
// atomic counters (steps, step time and tokens appended, per batch size;
// hand-offs by destination). Its own goroutine (Run) samples those counters
// on a tick, estimates over a sliding window every model's step time as a
// function of its batch, L_i(b) (a steptime.Curve fitted to the mean step
// time of each batch size seen, or a calibrated curve scaled to them,
// Options.Prior), the routing matrix P from the observed hand-offs and the
// tokens committed per request-step (from the sub-servers' commit
// counters), builds a perfmodel.Model (under Options.Placement) and
// computes the table B*(n) with perfmodel.Planner.Table for every active
// count n up to the largest observed. It pushes the tables with SetPolicy,
// keeping each model's max-wait guard. A model whose steps take the same
// time at every batch size seen (within Options.Flat) gets a constant step
// time, the paper's case.
//
// Until the first estimate is ready every model launches at B = 1. The
// first plan uses what a quarter of the window holds, so that delayed
// batching starts early; it is provisional, and the tuner plans again once
// the window is full (the first steps of a fresh process run slow, which
// would otherwise stay in the plan). After that, it re-plans when an
// estimate drifts by more than
// Options.Drift (10%) and the drift is statistically clear and has lasted a
// whole window (so a step change is planned once, on post-change data),
// at most once per Options.MinInterval.
//
// The throughput model only needs the expected tokens committed by a
// request-step on model i, Σ_j P_ij C_ij; when no commit matrix is given
// the tuner uses C_ij = t_i, the observed tokens committed per request-step
// on model i, which gives the same prediction as the algorithm's exact C.
// The tokens a request appends beyond one per step on each model (its
// extends) are observed as well, and the fitted curves hold the contexts
// the steps saw.
package autotune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// Target is one sub-server as the tuner drives it; *subserver.Server is
// one.
type Target interface {
	// SetPolicy replaces the launch policy; safe from any goroutine.
	SetPolicy(p sched.Policy)
	// Stats returns the sub-server's counters; safe from any goroutine.
	Stats() subserver.Stats
}

// Options tune the tuner; zero values take the defaults.
type Options struct {
	// Fixed holds thresholds fixed during the search (model index →
	// threshold). Nil means {0: 1}: the entry model launches at once, as
	// in DESIGN §6's check. A non-nil empty map searches every model.
	Fixed map[int]int
	// MaxN is the largest active count planned (default 32). The table
	// covers the active counts observed so far, rounded up to a multiple
	// of 4, up to MaxN; larger counts use its last entry.
	MaxN int
	// C is the commit matrix; nil estimates tokens per request-step from
	// the sub-servers' commit counters.
	C [][]float64
	// Delta is the model's time quantum in milliseconds (default
	// perfmodel.DefaultDelta for batch-independent step times, twice
	// perfmodel.AutoDelta's otherwise: Tuner.Model).
	Delta float64
	// Drift is the relative change of an estimate that triggers a
	// re-plan (default 0.10).
	Drift float64
	// Z is how many standard errors a routing probability must move
	// besides Drift before it counts as drift (default 2).
	Z float64
	// MinInterval is the least time between two plans (default 2s).
	MinInterval time.Duration
	// Tick is how often Run samples the counters (default 100ms).
	Tick time.Duration
	// Window is the sliding estimation window (default 2s).
	Window time.Duration
	// MinSteps is the number of steps a model must have run in the window
	// before its latency counts as known (default 10).
	MinSteps int
	// Planner evaluates thresholds; nil uses a Planner with one worker,
	// so planning never takes more than one core from the sub-servers,
	// and an exact-chain cutoff of plannerMaxStates, so a plan made
	// during a burst adds little to the server's peak memory.
	Planner *perfmodel.Planner
	// Placement is how the sub-servers share the machine; time-shared
	// placement plans with its launch rule (perfmodel.TimeSharedRule).
	Placement perfmodel.Placement
	// Prior, if set, holds calibrated step-time curves (bench calibrate),
	// one per model (a zero Curve: none): the tuner keeps such a model's
	// curve shape and scales it to the steps it observes (the curve at
	// context 0, the scale absorbing the contexts seen), instead of fitting
	// the observed batch sizes alone.
	Prior []steptime.Curve
	// Flat is the largest mean relative distance (over the steps seen)
	// between a fitted curve and the mean step time for which a model's
	// step time counts as batch-independent (default 0.02).
	Flat float64
	// Budget is the planning time allowed per minute (default 2s); it
	// accrues up to one minute's worth, and a plan due while it is spent
	// waits.
	Budget time.Duration
	// PlanTimeout cuts one plan off (default 2s). The evaluations it
	// finished stay in the planner's cache, so the next plan goes on
	// from there.
	PlanTimeout time.Duration
	// CacheSize is the number of tables kept by load level (default 32):
	// a plan for a model already planned, to within the rounding of
	// cacheKey, reuses its tables.
	CacheSize int
}

// plannerMaxStates is the default planner's exact-chain cutoff; larger
// chains are simulated, so the chain, its transpose, ILU factors and
// Krylov basis held while one is solved stay small. With the planner's own
// default (250,000 states) a plan during a 2,000-stream burst raised the
// server's peak RSS to 1.4-2.9x that of static thresholds; with this one,
// 1.3-1.45x. For the paper's pair the best thresholds at N = 16, 24 and 32
// came out the same with either cutoff (tokenrouter plan --max-states).
const plannerMaxStates = 25_000

// maxBucket is the largest batch size counted on its own; larger batches
// share its bucket.
const maxBucket = 64

func (o Options) withDefaults() Options {
	if o.Fixed == nil {
		o.Fixed = map[int]int{0: 1}
	}
	if o.MaxN <= 0 {
		o.MaxN = 32
	}
	if o.Delta <= 0 {
		o.Delta = perfmodel.DefaultDelta
	}
	if o.Drift <= 0 {
		o.Drift = 0.10
	}
	if o.Z <= 0 {
		o.Z = 2
	}
	if o.MinInterval <= 0 {
		o.MinInterval = 2 * time.Second
	}
	if o.Tick <= 0 {
		o.Tick = 100 * time.Millisecond
	}
	if o.Window <= 0 {
		o.Window = 2 * time.Second
	}
	if o.MinSteps <= 0 {
		o.MinSteps = 10
	}
	if o.Planner == nil {
		o.Planner = perfmodel.NewPlanner(perfmodel.Options{Workers: 1, MaxStates: plannerMaxStates})
	}
	if o.Flat <= 0 {
		o.Flat = 0.02
	}
	orDefault(&o.Budget, 2*time.Second)
	orDefault(&o.PlanTimeout, 2*time.Second)
	orDefault(&o.CacheSize, 32)
	return o
}

// orDefault sets *v to def when it is not positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Estimate is what the tuner measured over one window.
type Estimate struct {
	// L is each model's mean step latency in milliseconds.
	L []float64
	// Steps is each model's step time as a function of its batch: a
	// constant L when it does not depend on the batch.
	Curves []steptime.Curve
	// Extend is, per model, the tokens a request appended beyond one per
	// step.
	Extend []float64
	// Points are, per model, the mean step time of each batch size seen
	// (weighted by its number of steps), which Curves were fitted to.
	Points [][]steptime.Point
	// P is the routing matrix estimated from hand-offs.
	P [][]float64
	// TokensPerStep is the tokens committed per request-step per model.
	TokensPerStep []float64
	// Steps is the number of steps each model ran in the window.
	Steps []uint64
	// Routed is the number of routed request-steps (stays included) out of
	// each model in the window: the sample size of P's row.
	Routed []uint64
	// Active is the largest number of active requests seen in the window.
	Active int
	// Span is the time the window covers.
	Span time.Duration
}

// Status is a snapshot of the tuner's state.
type Status struct {
	// Plans is the number of tables computed and pushed.
	Plans int
	// Planned is the estimate the current tables were computed from.
	Planned *Estimate
	// Model is the throughput model the current tables were computed from.
	Model *perfmodel.Model
	// Tables is the current B*(n) table per model (nil before the first
	// plan: B = 1 everywhere).
	Tables []sched.Table
	// MaxN is the largest active count the current tables were planned for.
	MaxN int
	// LastPlan is when the current tables were pushed.
	LastPlan time.Time
	// PlanTime is how long the last plan took.
	PlanTime time.Duration
	// Err is the last planning error, if the last attempt failed.
	Err error
	// Cost is what planning has cost since the tuner started.
	Cost Cost
}

// Cost is the tuner's planning work.
type Cost struct {
	// Seconds is the time spent planning (wall time of the one planning
	// worker: its CPU time or more).
	Seconds float64
	// Computed counts plans whose tables were computed.
	Computed int
	// CacheHits counts plans whose tables came from the cache by load
	// level.
	CacheHits int
	// TimedOut counts plans cut off by Options.PlanTimeout.
	TimedOut int
	// Abandoned counts plans given up because every sub-server went idle
	// while they ran: the load they were for is gone.
	Abandoned int
	// Deferred counts ticks on which a plan was due but the budget was
	// spent.
	Deferred int
}

// Tuner estimates the routing process and keeps the thresholds at B*.
// Its Observer methods may be called from every sub-server's loop at once.
type Tuner struct {
	opts     Options
	deltaSet bool // Options.Delta was given
	base     []sched.Policy
	obs      []counters

	// run-goroutine state
	hist       []sample
	planned    *Estimate
	plannedN   int
	lastPlan   time.Time
	driftSince time.Time
	credit     time.Duration // planning time left (Options.Budget per minute)
	credited   time.Time
	cache      map[string][]sched.Table // tables by cacheKey

	mu     sync.Mutex
	status Status
}

// counters are one model's cumulative observations, written by its loop.
type counters struct {
	steps, batch atomic.Uint64
	nanos        atomic.Int64
	moved        []atomic.Uint64
	bySize       []sizeCounters // index b−1 for batch size b (maxBucket and larger share the last)
	_            [64]byte       // keep models' hot counters on separate cache lines
}

// sizeCounters are one model's steps of one batch size: their number,
// requests (for the shared last bucket), rows and time.
type sizeCounters struct {
	steps, batch, rows atomic.Uint64
	nanos              atomic.Int64
}

// sample is a snapshot of every cumulative counter at one time.
type sample struct {
	at     time.Time
	steps  []uint64
	batch  []uint64
	nanos  []int64
	tokens []uint64
	moved  [][]uint64
	sizes  [][]sizeSample // per model, per batch size
	active int
}

// sizeSample is a snapshot of sizeCounters.
type sizeSample struct {
	steps, batch, rows uint64
	nanos              int64
}

// New returns a tuner for len(base) models. base holds each model's policy
// apart from its thresholds (max-wait guard, lookahead); the tuner replaces
// only B.
func New(base []sched.Policy, o Options) (*Tuner, error) {
	if len(base) == 0 {
		return nil, errors.New("autotune: no models")
	}
	deltaSet := o.Delta > 0
	o = o.withDefaults()
	m := len(base)
	for i, v := range o.Fixed {
		if i < 0 || i >= m || v < 1 {
			return nil, fmt.Errorf("autotune: fixed threshold B[%d] = %d is out of range", i, v)
		}
	}
	if o.Prior != nil && len(o.Prior) != m {
		return nil, fmt.Errorf("autotune: %d prior curves for %d models", len(o.Prior), m)
	}
	for i, c := range o.Prior {
		if c.Knots != nil {
			if err := c.Validate(); err != nil {
				return nil, fmt.Errorf("autotune: prior curve %d: %w", i, err)
			}
		}
	}
	if o.C != nil {
		if len(o.C) != m {
			return nil, fmt.Errorf("autotune: commit matrix has %d rows for %d models", len(o.C), m)
		}
		for i, row := range o.C {
			if len(row) != m {
				return nil, fmt.Errorf("autotune: commit matrix row %d has %d entries for %d models", i, len(row), m)
			}
		}
	}
	t := &Tuner{opts: o, deltaSet: deltaSet, base: slices.Clone(base), obs: make([]counters, m),
		credit: o.Budget, cache: map[string][]sched.Table{}}
	for i := range t.obs {
		t.obs[i].moved = make([]atomic.Uint64, m)
		t.obs[i].bySize = make([]sizeCounters, maxBucket)
	}
	return t, nil
}

// Initial returns model i's policy before the first plan: its base policy
// with B = 1.
func (t *Tuner) Initial(i int) sched.Policy {
	p := t.base[i]
	p.B = sched.Static(1)
	return p
}

// Step records one engine step (subserver.Observer). Allocation-free.
func (t *Tuner) Step(model, batch, appended int, d time.Duration) {
	if model < 0 || model >= len(t.obs) || batch < 1 {
		return
	}
	c := &t.obs[model]
	c.steps.Add(1)
	c.batch.Add(uint64(batch))
	c.nanos.Add(int64(d))
	z := &c.bySize[min(batch, maxBucket)-1]
	z.steps.Add(1)
	z.batch.Add(uint64(batch))
	z.rows.Add(uint64(max(appended, batch)))
	z.nanos.Add(int64(d))
}

// Routed records one step's hand-offs (subserver.Observer).
// Allocation-free.
func (t *Tuner) Routed(model int, moved []int) {
	if model < 0 || model >= len(t.obs) {
		return
	}
	c := &t.obs[model]
	for j, k := range moved {
		if k > 0 && j < len(c.moved) {
			c.moved[j].Add(uint64(k))
		}
	}
}

// Status returns a snapshot of the tuner's state. Safe from any goroutine.
func (t *Tuner) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.status
	s.Tables = slices.Clone(s.Tables)
	return s
}

// Run samples, estimates and plans until ctx ends, pushing tables to
// targets (one per model, in index order). It returns nil when ctx ends;
// planning errors do not stop it (Status reports the last one).
func (t *Tuner) Run(ctx context.Context, targets []Target) error {
	if len(targets) != len(t.obs) {
		return fmt.Errorf("autotune: %d targets for %d models", len(targets), len(t.obs))
	}
	tick := time.NewTicker(t.opts.Tick)
	defer tick.Stop()
	t.tick(ctx, targets, time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			t.tick(ctx, targets, now)
		}
	}
}

// tick takes a sample, updates the window and plans when due.
func (t *Tuner) tick(ctx context.Context, targets []Target, now time.Time) {
	t.hist = append(t.hist, t.sample(targets, now))
	// Keep the newest sample at least Window old as the window's start.
	k := 0
	for k+1 < len(t.hist) && now.Sub(t.hist[k+1].at) >= t.opts.Window {
		k++
	}
	t.hist = t.hist[k:]
	est, ok := t.estimate()
	if !ok {
		return
	}
	switch {
	case t.planned == nil:
		// First plan as soon as every reached model has been measured.
	case est.Active > t.plannedN && t.plannedN < t.opts.MaxN:
		// More requests than the table covers.
	case t.planned.Span < t.opts.Window && est.Span >= t.opts.Window:
		// The provisional first plan, now with a full window.
	case t.drifted(est):
		if t.driftSince.IsZero() {
			t.driftSince = now
		}
		if now.Sub(t.driftSince) < t.opts.Window {
			return // wait until the window holds only the new regime
		}
	default:
		t.driftSince = time.Time{}
		return
	}
	if !t.lastPlan.IsZero() && now.Sub(t.lastPlan) < t.opts.MinInterval {
		return
	}
	if !t.afford(now) {
		t.mu.Lock()
		t.status.Cost.Deferred++
		t.mu.Unlock()
		return
	}
	t.plan(ctx, targets, est, now)
}

// afford accrues the planning budget up to now and reports whether any is
// left.
func (t *Tuner) afford(now time.Time) bool {
	if !t.credited.IsZero() {
		earned := time.Duration(float64(now.Sub(t.credited)) * float64(t.opts.Budget) / float64(time.Minute))
		t.credit = min(t.credit+earned, t.opts.Budget)
	}
	t.credited = now
	return t.credit > 0
}

// sample reads every counter.
func (t *Tuner) sample(targets []Target, now time.Time) sample {
	m := len(t.obs)
	s := sample{at: now, steps: make([]uint64, m), batch: make([]uint64, m), nanos: make([]int64, m),
		tokens: make([]uint64, m), moved: make([][]uint64, m), sizes: make([][]sizeSample, m)}
	for i := range t.obs {
		c := &t.obs[i]
		s.steps[i] = c.steps.Load()
		s.batch[i] = c.batch.Load()
		s.nanos[i] = c.nanos.Load()
		s.moved[i] = make([]uint64, m)
		for j := range c.moved {
			s.moved[i][j] = c.moved[j].Load()
		}
		s.sizes[i] = make([]sizeSample, maxBucket)
		for b := range c.bySize {
			z := &c.bySize[b]
			s.sizes[i][b] = sizeSample{steps: z.steps.Load(), batch: z.batch.Load(), rows: z.rows.Load(), nanos: z.nanos.Load()}
		}
		st := targets[i].Stats()
		s.tokens[i] = st.Tokens
		s.active = max(s.active, st.Records)
	}
	return s
}

// estimate computes the window's estimate; ok is false while some model
// that requests reach has not run MinSteps steps.
func (t *Tuner) estimate() (Estimate, bool) {
	if len(t.hist) < 2 {
		return Estimate{}, false
	}
	a, b := t.hist[0], t.hist[len(t.hist)-1]
	if b.at.Sub(a.at) < t.opts.Window/4 {
		return Estimate{}, false
	}
	m := len(t.obs)
	e := Estimate{L: make([]float64, m), P: make([][]float64, m), TokensPerStep: make([]float64, m),
		Steps: make([]uint64, m), Routed: make([]uint64, m), Span: b.at.Sub(a.at),
		Curves: make([]steptime.Curve, m), Extend: make([]float64, m), Points: make([][]steptime.Point, m)}
	for _, s := range t.hist {
		e.Active = max(e.Active, s.active)
	}
	seen := make([]bool, m)
	for i := range m {
		e.Steps[i] = b.steps[i] - a.steps[i]
		seen[i] = e.Steps[i] >= uint64(t.opts.MinSteps)
		e.P[i] = make([]float64, m)
		for j := range m {
			e.Routed[i] += b.moved[i][j] - a.moved[i][j]
		}
		if !seen[i] || e.Routed[i] == 0 {
			seen[i] = false
			continue
		}
		e.L[i] = float64(b.nanos[i]-a.nanos[i]) / float64(e.Steps[i]) / 1e6
		for j := range m {
			e.P[i][j] = float64(b.moved[i][j]-a.moved[i][j]) / float64(e.Routed[i])
		}
		if rs := b.batch[i] - a.batch[i]; rs > 0 {
			e.TokensPerStep[i] = float64(b.tokens[i]-a.tokens[i]) / float64(rs)
		}
		e.Points[i], e.Extend[i] = sizePoints(a.sizes[i], b.sizes[i])
		e.Curves[i] = t.curve(i, e.Points[i], e.L[i])
	}
	any := false
	for i := range m {
		if seen[i] {
			any = true
			continue
		}
		// A model nobody measured reached is fine (its row is never used);
		// one that is reached must be measured first.
		for j := range m {
			if j != i && seen[j] && e.P[j][i] > 0 {
				return Estimate{}, false
			}
		}
		e.P[i][i] = 1
		e.L[i] = 0
		e.Curves[i], e.Points[i], e.Extend[i] = steptime.Curve{}, nil, 0
	}
	return e, any
}

// sizePoints returns the mean step time of each batch size stepped between
// two samples (weighted by its steps) and the tokens appended beyond one
// per request-step.
func sizePoints(a, b []sizeSample) ([]steptime.Point, float64) {
	var pts []steptime.Point
	var reqs, extra float64
	for k := range b {
		n := b[k].steps - a[k].steps
		if n == 0 {
			continue
		}
		size := int(math.Round(float64(b[k].batch-a[k].batch) / float64(n))) // k+1 but in the shared bucket
		rows := float64(b[k].rows-a[k].rows) / float64(n)
		ms := float64(b[k].nanos-a[k].nanos) / float64(n) / 1e6
		if ms <= 0 || size < 1 {
			continue
		}
		e := max(rows-float64(size), 0)
		pts = append(pts, steptime.Point{Batch: size, Extend: e, MS: ms, Weight: float64(n)})
		reqs += float64(size * int(n))
		extra += e * float64(n)
	}
	if reqs == 0 {
		return pts, 0
	}
	return pts, extra / reqs
}

// curve estimates model i's step time from the mean step time of each
// batch size (pts) and its mean over all steps (mean): the prior scaled to
// the points, a fit of them, or the constant mean when the fit stays within
// Options.Flat of it.
func (t *Tuner) curve(i int, pts []steptime.Point, mean float64) steptime.Curve {
	if len(pts) == 0 || !(mean > 0) {
		return steptime.Curve{}
	}
	if t.opts.Prior != nil && t.opts.Prior[i].Knots != nil {
		prior := t.opts.Prior[i]
		got, want := 0.0, 0.0
		for _, p := range pts {
			got += p.Weight * p.MS
			want += p.Weight * prior.At(p.Batch, p.Extend, 0)
		}
		if want > 0 {
			return prior.Scale(got / want)
		}
	}
	c, err := steptime.Fit(pts, steptime.FitOptions{})
	if err != nil {
		return steptime.Constant(mean)
	}
	// Flat when the fit strays from the mean by at most Flat on average
	// over the steps (a batch size seen a few times weighs little).
	dev, w := 0.0, 0.0
	for _, p := range pts {
		dev += p.Weight * math.Abs(c.At(p.Batch, p.Extend, 0)-mean)
		w += p.Weight
	}
	if dev <= t.opts.Flat*mean*w {
		return steptime.Constant(mean)
	}
	return c
}

// drifted reports whether est differs from the planned estimate by more
// than Drift in a latency, a tokens-per-step figure or (by Drift and Z
// standard errors) a routing probability.
func (t *Tuner) drifted(est Estimate) bool {
	old := t.planned
	rel := func(a, b float64) bool {
		return math.Abs(a-b) > t.opts.Drift*math.Abs(b)
	}
	for i := range est.L {
		if est.Routed[i] == 0 || old.Routed[i] == 0 {
			if (est.Routed[i] == 0) != (old.Routed[i] == 0) && est.Steps[i] >= uint64(t.opts.MinSteps) {
				return true // a model started or stopped receiving requests
			}
			continue
		}
		if curveDrift(est.Points[i], old.Curves[i]) > t.opts.Drift || (t.opts.C == nil && rel(est.TokensPerStep[i], old.TokensPerStep[i])) {
			return true
		}
		n := float64(est.Routed[i])
		for j, p := range est.P[i] {
			q := old.P[i][j]
			se := math.Sqrt(max(q*(1-q), 1/n) / n)
			if math.Abs(p-q) > t.opts.Drift*max(q, 0.01) && math.Abs(p-q) > t.opts.Z*se {
				return true
			}
		}
	}
	return false
}

// curveDrift returns how far the steps of an estimate (the mean step time
// per batch size) lie from a planned curve: Σ w·(observed − planned) /
// Σ w·planned over the batch sizes seen, so that a change of batch sizes
// alone is no drift. For a constant curve it is the relative change of the
// mean step time.
func curveDrift(pts []steptime.Point, planned steptime.Curve) float64 {
	got, want := 0.0, 0.0
	for _, p := range pts {
		got += p.Weight * p.MS
		want += p.Weight * planned.At(p.Batch, p.Extend, 0)
	}
	if !(want > 0) {
		return 0
	}
	return math.Abs(got-want) / want
}

// Model builds the throughput model of an estimate under the tuner's
// placement: step times as curves of the batch with the observed extends,
// or, where no model's step time depends on the batch, latencies rounded
// to the time quantum (unmeasured models get one quantum); probabilities
// rounded to 0.001, and the commit matrix from Options.C or the observed
// tokens per request-step. The time quantum is Options.Delta, or for
// batch-dependent curves twice perfmodel.AutoDelta's: the tuner needs the
// best thresholds, which the coarser quantum keeps at a fraction of the
// cost (on the fast pair's curves throughput moves by about 0.2%).
func (t *Tuner) Model(est Estimate) perfmodel.Model {
	m := len(est.L)
	md := perfmodel.Model{P: make([][]float64, m), C: make([][]float64, m), Delta: t.opts.Delta, Placement: t.opts.Placement}
	flat := true
	for i := range m {
		flat = flat && (est.Curves[i].Knots == nil || est.Curves[i].Constant())
	}
	if flat {
		md.L = make([]float64, m)
	} else {
		md.Steps, md.Extend = make([]steptime.Curve, m), slices.Clone(est.Extend)
	}
	for i := range m {
		switch {
		case flat:
			md.L[i] = max(math.Round(est.L[i]/t.opts.Delta), 1) * t.opts.Delta
		case est.Curves[i].Knots == nil:
			md.Steps[i] = steptime.Constant(t.opts.Delta)
		default:
			md.Steps[i] = est.Curves[i]
		}
		md.P[i] = make([]float64, m)
		sum := 0.0
		for j, p := range est.P[i] {
			md.P[i][j] = math.Round(p*1000) / 1000
			sum += md.P[i][j]
		}
		for j := range md.P[i] {
			md.P[i][j] /= sum
		}
		md.C[i] = make([]float64, m)
		for j := range m {
			if t.opts.C != nil {
				md.C[i][j] = t.opts.C[i][j]
			} else {
				md.C[i][j] = est.TokensPerStep[i]
			}
		}
	}
	if !flat && !t.deltaSet {
		md.Delta = 2 * perfmodel.AutoDelta(md)
	}
	return md
}

// plan computes the tables for est (or takes them from the cache by load
// level) and pushes them. It spends at most Options.PlanTimeout, charged
// to the budget.
func (t *Tuner) plan(ctx context.Context, targets []Target, est Estimate, now time.Time) {
	maxN := min(t.opts.MaxN, max(4, (est.Active+3)/4*4))
	md := t.Model(est)
	key := cacheKey(md, maxN)
	tabs, cached := t.cache[key]
	start := time.Now()
	var err error
	if !cached {
		pctx, cancel := context.WithCancelCause(ctx)
		stop := t.watchIdle(pctx, cancel, targets)
		tabs, err = t.compute(pctx, targets, md, est.Active, maxN)
		stop()
		if errors.Is(context.Cause(pctx), errIdle) {
			err = errIdle
		}
		cancel(nil)
	}
	took := time.Since(start)
	t.credit -= took
	t.lastPlan, t.driftSince = now, time.Time{}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &t.status.Cost
	c.Seconds += took.Seconds()
	switch {
	case cached:
		c.CacheHits++
	case errors.Is(err, errIdle):
		c.Abandoned++
		return
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		c.TimedOut++
		return
	case err != nil:
		if ctx.Err() == nil {
			t.status.Err = fmt.Errorf("autotune: plan: %w", err)
		}
		return
	default:
		c.Computed++
		if len(t.cache) >= t.opts.CacheSize {
			clear(t.cache)
		}
		t.cache[key] = tabs
	}
	for i, tg := range targets {
		p := t.base[i]
		p.B = tabs[i]
		tg.SetPolicy(p)
	}
	e := est
	t.planned, t.plannedN = &e, maxN
	t.status = Status{Plans: t.status.Plans + 1, Planned: &e, Model: &md, Tables: tabs, MaxN: maxN,
		LastPlan: now, PlanTime: took, Cost: *c}
}

// errIdle cancels a plan whose load has gone: every sub-server is idle.
var errIdle = errors.New("autotune: every sub-server went idle during the plan")

// watchIdle cancels ctx with errIdle once no target holds a request,
// checking every Options.Tick, until ctx ends or the returned stop is
// called (stop waits for the watcher to finish).
func (t *Tuner) watchIdle(ctx context.Context, cancel context.CancelCauseFunc, targets []Target) (stop func()) {
	done := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(t.opts.Tick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case <-tick.C:
				if idle(targets) {
					cancel(errIdle)
					return
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

// idle reports whether no target holds a request.
func idle(targets []Target) bool {
	for _, tg := range targets {
		if tg.Stats().Records > 0 {
			return false
		}
	}
	return true
}

// compute runs the planner for md within Options.PlanTimeout: first the
// optimum at the active count, pushed at once, then the whole table.
func (t *Tuner) compute(ctx context.Context, targets []Target, md perfmodel.Model, active, maxN int) ([]sched.Table, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.PlanTimeout)
	defer cancel()
	if n := active; n > 1 && maxN > 8 {
		// A full table costs about N⁵ chain states; the optimum at the
		// current active count alone costs a few percent of that. Push it
		// at once (as a static B, clamped to the active count by
		// sched.Table.At), then refine the whole table.
		if best, err := t.opts.Planner.Optimize(ctx, md, min(n, maxN), t.opts.Fixed); err == nil {
			for i, tg := range targets {
				p := t.base[i]
				p.B = sched.Static(best.B[i])
				tg.SetPolicy(p)
			}
		}
	}
	tabs, err := t.opts.Planner.Table(ctx, md, maxN, t.opts.Fixed)
	if err != nil {
		return nil, fmt.Errorf("autotune: table: %w", err)
	}
	return tabs, nil
}

// cacheKey names a load level: the model with its probabilities and
// tokens per step rounded to 0.01 and its latencies to 0.1 ms, and the
// largest active count planned.
func cacheKey(md perfmodel.Model, maxN int) string {
	r := func(v float64, step float64) float64 { return math.Round(v/step) * step }
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%v|%g|", maxN, md.Placement, md.Delta)
	for i := range md.P {
		for j := range md.P[i] {
			fmt.Fprintf(&b, "%.2f,%.2f;", r(md.P[i][j], 0.01), r(md.C[i][j], 0.01))
		}
	}
	for _, l := range md.L {
		fmt.Fprintf(&b, "%.1f;", r(l, 0.1))
	}
	for i, c := range md.Steps {
		fmt.Fprintf(&b, "%v/%.2f;", c, r(md.Extend[i], 0.01))
	}
	return b.String()
}

var _ subserver.Observer = (*Tuner)(nil)
