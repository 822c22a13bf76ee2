package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
)

// DefaultMaxStates is the default exact-chain cutoff: chains with more
// reachable states are simulated instead. At this size building and solving
// one chain takes about two seconds on one core. R2R chains stay far below it
// (about 57,000 states at N = 32); three-model ensembles pass it near N = 6.
const DefaultMaxStates = 250_000

// Options controls how a Planner evaluates thresholds.
type Options struct {
	// MaxStates is the exact-chain cutoff (default DefaultMaxStates).
	MaxStates int
	// Tolerance is the stationary residual ‖πP − π‖₁ required (default
	// DefaultTolerance).
	Tolerance float64
	// Sim configures simulation above the cutoff.
	Sim SimOptions
	// Workers bounds parallel evaluations in a search (default GOMAXPROCS).
	Workers int
	// SearchStates is the chain size above which Table stops searching
	// every threshold vector: once B*(n−1)'s chain has more states, B*(n)
	// is found by a local search from B*(n−1) (default 2000; the paper's
	// R2R chains at B* stay far below it, batch-dependent ones do not).
	SearchStates int
}

func (o Options) withDefaults() Options {
	if o.MaxStates <= 0 {
		o.MaxStates = DefaultMaxStates
	}
	if o.Tolerance <= 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.SearchStates <= 0 {
		o.SearchStates = 2000
	}
	o.Sim = o.Sim.withDefaults()
	return o
}

// Planner evaluates and optimises thresholds, caching every result by
// model, concurrency and threshold vector. It is safe for concurrent use.
type Planner struct {
	opts Options

	mu    sync.Mutex
	cache map[string]Result
}

// NewPlanner returns a Planner with the given options (zero values take the
// defaults).
func NewPlanner(o Options) *Planner {
	return &Planner{opts: o.withDefaults(), cache: map[string]Result{}}
}

// Evaluate returns the predicted throughput of static thresholds b at
// concurrency n. An infeasible b (Σ(B_i − 1) ≥ n) gives a Result with
// Feasible false and Method MethodNone and no error. The exact chain is
// used up to Options.MaxStates states, simulation beyond; simulation is
// also used (and named in Result.Method) if the exact stationary solve
// cannot reach Options.Tolerance, so a result never rests on an
// unconverged distribution.
func (pl *Planner) Evaluate(ctx context.Context, m Model, n int, b []int) (Result, error) {
	return pl.evaluate(ctx, m, n, b, false)
}

// evaluate is Evaluate; simOnly skips the exact attempt (used once a smaller
// concurrency already needed simulation).
func (pl *Planner) evaluate(ctx context.Context, m Model, n int, b []int, simOnly bool) (Result, error) {
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	if err := checkThresholds(m, n, b); err != nil {
		if errors.Is(err, ErrInfeasible) {
			return Result{N: n, B: slices.Clone(b), Method: MethodNone}, nil
		}
		return Result{}, err
	}
	mk, err := m.key(n)
	if err != nil {
		return Result{}, err
	}
	key := mk + "|" + strconv.Itoa(n) + "|" + fmt.Sprint(b)
	pl.mu.Lock()
	r, ok := pl.cache[key]
	pl.mu.Unlock()
	if ok && (!simOnly || r.Method == MethodSimulation) {
		return r, nil
	}
	pols := staticPolicies(b)
	if !simOnly {
		r, err = EvaluateExact(ctx, m, n, pols, pl.opts)
	}
	if simOnly || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNotConverged) {
		r, err = Simulate(ctx, m, n, pols, pl.opts.Sim)
	}
	if err != nil {
		return Result{}, fmt.Errorf("perfmodel: evaluate N=%d B=%v: %w", n, b, err)
	}
	pl.mu.Lock()
	pl.cache[key] = r
	pl.mu.Unlock()
	return r, nil
}

// Vectors lists every threshold vector with each B_i in [1, n] and the
// entries in fixed (model index → threshold) held, in lexicographic order.
// Infeasible vectors are included.
func Vectors(m int, n int, fixed map[int]int) [][]int {
	var out [][]int
	b := make([]int, m)
	var rec func(i int)
	rec = func(i int) {
		if i == m {
			out = append(out, slices.Clone(b))
			return
		}
		if v, ok := fixed[i]; ok {
			b[i] = v
			rec(i + 1)
			return
		}
		for v := 1; v <= n; v++ {
			b[i] = v
			rec(i + 1)
		}
	}
	rec(0)
	return out
}

// Search evaluates every threshold vector of Vectors(m.M(), n, fixed),
// feasible or not, using up to Options.Workers goroutines, and returns the
// results in that order.
func (pl *Planner) Search(ctx context.Context, m Model, n int, fixed map[int]int) ([]Result, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	for i, v := range fixed {
		if i < 0 || i >= m.M() || v < 1 {
			return nil, fmt.Errorf("perfmodel: fixed threshold B[%d] = %d is out of range", i, v)
		}
	}
	vecs := Vectors(m.M(), n, fixed)
	return pl.evaluateAll(ctx, m, n, vecs, false)
}

// evaluateAll evaluates vecs in parallel; the goroutines end before it
// returns and stop early on the first error or on cancellation.
func (pl *Planner) evaluateAll(ctx context.Context, m Model, n int, vecs [][]int, simOnly bool) ([]Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]Result, len(vecs))
	errs := make([]error, len(vecs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(pl.opts.Workers, len(vecs)) {
		wg.Go(func() {
			for k := range jobs {
				out[k], errs[k] = pl.evaluate(ctx, m, n, vecs[k], simOnly)
				if errs[k] != nil {
					cancel()
				}
			}
		})
	}
feed:
	for k := range vecs {
		select {
		case jobs <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("perfmodel: search: %w", err)
	}
	return out, nil
}

// Best returns the index of the feasible result with the highest
// throughput, or -1 when none is feasible. Ties go to the earlier result.
func Best(rs []Result) int {
	best := -1
	for k, r := range rs {
		if r.Feasible && (best < 0 || r.TokensPerSecond > rs[best].TokensPerSecond) {
			best = k
		}
	}
	return best
}

// Optimize returns B*: the feasible threshold vector with the highest
// predicted throughput at concurrency n, found by exhaustive search over
// every vector with B_i in [1, n] and the fixed entries held.
func (pl *Planner) Optimize(ctx context.Context, m Model, n int, fixed map[int]int) (Result, error) {
	rs, err := pl.Search(ctx, m, n, fixed)
	if err != nil {
		return Result{}, err
	}
	k := Best(rs)
	if k < 0 {
		return Result{}, fmt.Errorf("%w: no feasible thresholds at N=%d with fixed %v", ErrInfeasible, n, fixed)
	}
	return rs[k], nil
}

// Table returns one sched.Table per model holding B*(n) for every active
// count n = 0..maxN (entry 0 is 1), ready for sched.Policy.B. While the
// exact chain at B*(n−1) is small (Options.SearchStates), each entry is an
// exhaustive Optimize; beyond, and once a concurrency needs simulation,
// B*(n) is found by a local search (steps of ±1 per free coordinate)
// started from B*(n−1), which keeps maxN ≈ 32 fast for any number of
// models.
func (pl *Planner) Table(ctx context.Context, m Model, maxN int, fixed map[int]int) ([]sched.Table, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if maxN < 1 {
		return nil, fmt.Errorf("perfmodel: table size %d must be at least 1", maxN)
	}
	M := m.M()
	tabs := make([]sched.Table, M)
	for i := range tabs {
		tabs[i] = make(sched.Table, maxN+1)
		tabs[i][0] = 1
	}
	var prev Result
	for n := 1; n <= maxN; n++ {
		var best Result
		var err error
		switch {
		case n == 1 || (prev.Method == MethodExact && prev.States <= pl.opts.SearchStates):
			best, err = pl.Optimize(ctx, m, n, fixed)
		default:
			best, err = pl.localSearch(ctx, m, n, fixed, prev.B, prev.Method != MethodExact)
		}
		if err != nil {
			return nil, fmt.Errorf("perfmodel: table at n=%d: %w", n, err)
		}
		for i := range M {
			tabs[i][n] = best.B[i]
		}
		prev = best
	}
	return tabs, nil
}

// localSearch hill-climbs from start by ±1 steps of the free coordinates,
// simulating every candidate when simOnly.
func (pl *Planner) localSearch(ctx context.Context, m Model, n int, fixed map[int]int, start []int, simOnly bool) (Result, error) {
	cur := slices.Clone(start)
	for i, v := range fixed {
		cur[i] = v
	}
	for !sched.Feasible(cur, n) {
		hi := -1
		for i := range cur {
			if _, ok := fixed[i]; !ok && cur[i] > 1 && (hi < 0 || cur[i] > cur[hi]) {
				hi = i
			}
		}
		if hi < 0 {
			return Result{}, fmt.Errorf("%w: no feasible thresholds at N=%d with fixed %v", ErrInfeasible, n, fixed)
		}
		cur[hi]--
	}
	best, err := pl.evaluate(ctx, m, n, cur, simOnly)
	if err != nil {
		return Result{}, err
	}
	for {
		var nbrs [][]int
		for i := range best.B {
			if _, ok := fixed[i]; ok {
				continue
			}
			for _, d := range []int{-1, 1} {
				v := slices.Clone(best.B)
				v[i] += d
				if v[i] >= 1 && v[i] <= n && sched.Feasible(v, n) {
					nbrs = append(nbrs, v)
				}
			}
		}
		rs, err := pl.evaluateAll(ctx, m, n, nbrs, simOnly)
		if err != nil {
			return Result{}, err
		}
		k := Best(rs)
		if k < 0 || rs[k].TokensPerSecond <= best.TokensPerSecond {
			return best, nil
		}
		best = rs[k]
	}
}

// Optimize is Planner.Optimize with a fresh default Planner.
func Optimize(ctx context.Context, m Model, n int, fixed map[int]int) (Result, error) {
	return NewPlanner(Options{}).Optimize(ctx, m, n, fixed)
}

// Table is Planner.Table with a fresh default Planner.
func Table(ctx context.Context, m Model, maxN int, fixed map[int]int) ([]sched.Table, error) {
	return NewPlanner(Options{}).Table(ctx, m, maxN, fixed)
}

// FormatB formats a threshold vector as "1,3".
func FormatB(b []int) string {
	s := make([]string, len(b))
	for i, x := range b {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// EvaluatePolicies returns the predicted throughput of arbitrary launch
// policies (tables, Lookahead, max-wait): exact when no policy has a
// max-wait guard, the chain has at most Options.MaxStates states and its
// stationary solve converges, simulated otherwise. It does not check
// static feasibility (a table or a lookahead rule may never deadlock); a
// policy set that does deadlock returns ErrInfeasible.
func (pl *Planner) EvaluatePolicies(ctx context.Context, m Model, n int, pols []Policy) (Result, error) {
	exact := true
	for _, p := range pols {
		exact = exact && p.MaxWait <= 0
	}
	if exact {
		r, err := EvaluateExact(ctx, m, n, pols, pl.opts)
		if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNotConverged) {
			return r, err
		}
	}
	return Simulate(ctx, m, n, pols, pl.opts.Sim)
}

// LookaheadPolicies returns one policy per model using the expected-wait
// rule (Policy.Lookahead) with each model's step latency (of one request)
// and cap as its threshold table (nil: no cap beyond the number of active
// requests).
func LookaheadPolicies(m Model, cap []sched.Table) []Policy {
	pols := make([]Policy, m.M())
	x, _ := m.Extends() // a model whose extends fail fails its evaluation
	for i := range pols {
		b := sched.Table{math.MaxInt32}
		if i < len(cap) && cap[i] != nil {
			b = cap[i]
		}
		pols[i] = Policy{Policy: sched.Policy{B: b}, Lookahead: true, Step: time.Duration(m.StepMS(i, 1, x) * float64(time.Millisecond))}
	}
	return pols
}

// ComparePlacements predicts B* at concurrency n (fixed pins thresholds)
// for the same system under partitioned placement (part) and time-shared
// placement (shared: its step times measured on every core) and returns
// the better placement with both results; partitioned on a tie. It is the
// prediction a deployment can choose its placement by.
func (pl *Planner) ComparePlacements(ctx context.Context, part, shared Model, n int, fixed map[int]int) (Placement, [2]Result, error) {
	part.Placement, shared.Placement = Partitioned, TimeShared
	var rs [2]Result
	for k, m := range []Model{part, shared} {
		r, err := pl.Optimize(ctx, m, n, fixed)
		if err != nil {
			return "", rs, fmt.Errorf("perfmodel: %s placement: %w", m.placement(), err)
		}
		rs[k] = r
	}
	if rs[1].TokensPerSecond > rs[0].TokensPerSecond {
		return TimeShared, rs, nil
	}
	return Partitioned, rs, nil
}
