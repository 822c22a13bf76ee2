// Package autotune chooses TokenRouter's launch thresholds while it runs
// (DESIGN §6, "the runtime uses B* by default"). A Tuner watches every
// sub-server as a subserver.Observer: the hot path only adds to per-model
// atomic counters (steps, batch sizes, step time, hand-offs by
// destination). Its own goroutine (Run) samples those counters on a tick,
// estimates over a sliding window the step latency L_i of every model, the
// routing matrix P from the observed hand-offs and the tokens committed per
// request-step (from the sub-servers' commit counters), builds a
// perfmodel.Model and computes the table B*(n) with perfmodel.Planner.Table
// for every active count n up to the largest observed. It pushes the tables
// with SetPolicy, keeping each model's max-wait guard.
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
package autotune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
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
	// perfmodel.DefaultDelta).
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
	// so planning never takes more than one core from the sub-servers.
	Planner *perfmodel.Planner
}

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
		o.Planner = perfmodel.NewPlanner(perfmodel.Options{Workers: 1})
	}
	return o
}

// Estimate is what the tuner measured over one window.
type Estimate struct {
	// L is each model's mean step latency in milliseconds.
	L []float64
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
}

// Tuner estimates the routing process and keeps the thresholds at B*.
// Its Observer methods may be called from every sub-server's loop at once.
type Tuner struct {
	opts Options
	base []sched.Policy
	obs  []counters

	// run-goroutine state
	hist       []sample
	planned    *Estimate
	plannedN   int
	lastPlan   time.Time
	driftSince time.Time

	mu     sync.Mutex
	status Status
}

// counters are one model's cumulative observations, written by its loop.
type counters struct {
	steps, batch atomic.Uint64
	nanos        atomic.Int64
	moved        []atomic.Uint64
	_            [64]byte // keep models' hot counters on separate cache lines
}

// sample is a snapshot of every cumulative counter at one time.
type sample struct {
	at     time.Time
	steps  []uint64
	batch  []uint64
	nanos  []int64
	tokens []uint64
	moved  [][]uint64
	active int
}

// New returns a tuner for len(base) models. base holds each model's policy
// apart from its thresholds (max-wait guard, lookahead); the tuner replaces
// only B.
func New(base []sched.Policy, o Options) (*Tuner, error) {
	if len(base) == 0 {
		return nil, errors.New("autotune: no models")
	}
	o = o.withDefaults()
	m := len(base)
	for i, v := range o.Fixed {
		if i < 0 || i >= m || v < 1 {
			return nil, fmt.Errorf("autotune: fixed threshold B[%d] = %d is out of range", i, v)
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
	t := &Tuner{opts: o, base: slices.Clone(base), obs: make([]counters, m)}
	for i := range t.obs {
		t.obs[i].moved = make([]atomic.Uint64, m)
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
func (t *Tuner) Step(model, batch, _ int, d time.Duration) {
	if model < 0 || model >= len(t.obs) {
		return
	}
	c := &t.obs[model]
	c.steps.Add(1)
	c.batch.Add(uint64(batch))
	c.nanos.Add(int64(d))
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
	t.plan(ctx, targets, est, now)
}

// sample reads every counter.
func (t *Tuner) sample(targets []Target, now time.Time) sample {
	m := len(t.obs)
	s := sample{at: now, steps: make([]uint64, m), batch: make([]uint64, m), nanos: make([]int64, m),
		tokens: make([]uint64, m), moved: make([][]uint64, m)}
	for i := range t.obs {
		c := &t.obs[i]
		s.steps[i] = c.steps.Load()
		s.batch[i] = c.batch.Load()
		s.nanos[i] = c.nanos.Load()
		s.moved[i] = make([]uint64, m)
		for j := range c.moved {
			s.moved[i][j] = c.moved[j].Load()
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
		Steps: make([]uint64, m), Routed: make([]uint64, m), Span: b.at.Sub(a.at)}
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
	}
	return e, any
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
		if rel(est.L[i], old.L[i]) || (t.opts.C == nil && rel(est.TokensPerStep[i], old.TokensPerStep[i])) {
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

// Model builds the throughput model of an estimate: latencies rounded to
// the time quantum (unmeasured models get one quantum), probabilities
// rounded to 0.001, and the commit matrix from Options.C or the observed
// tokens per request-step.
func (t *Tuner) Model(est Estimate) perfmodel.Model {
	m := len(est.L)
	md := perfmodel.Model{L: make([]float64, m), P: make([][]float64, m), C: make([][]float64, m), Delta: t.opts.Delta}
	for i := range m {
		md.L[i] = max(math.Round(est.L[i]/t.opts.Delta), 1) * t.opts.Delta
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
	return md
}

// plan computes the tables for est and pushes them.
func (t *Tuner) plan(ctx context.Context, targets []Target, est Estimate, now time.Time) {
	maxN := min(t.opts.MaxN, max(4, (est.Active+3)/4*4))
	md := t.Model(est)
	start := time.Now()
	if n := est.Active; n > 1 && maxN > 8 {
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
	took := time.Since(start)
	t.lastPlan, t.driftSince = now, time.Time{}
	if err != nil {
		if ctx.Err() == nil {
			t.mu.Lock()
			t.status.Err = fmt.Errorf("autotune: plan: %w", err)
			t.mu.Unlock()
		}
		return
	}
	for i, tg := range targets {
		p := t.base[i]
		p.B = tabs[i]
		tg.SetPolicy(p)
	}
	e := est
	t.planned, t.plannedN = &e, maxN
	t.mu.Lock()
	t.status = Status{Plans: t.status.Plans + 1, Planned: &e, Model: &md, Tables: tabs, MaxN: maxN,
		LastPlan: now, PlanTime: took}
	t.mu.Unlock()
}

var _ subserver.Observer = (*Tuner)(nil)
