package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/tokenrouter/tokenrouter/sched"
)

// ErrTooLarge is returned by the exact evaluation when the reachable chain
// exceeds its state limit.
var ErrTooLarge = errors.New("perfmodel: chain exceeds the state limit")

// ErrInfeasible is returned when a threshold vector can deadlock:
// Σ(B_i − 1) ≥ N.
var ErrInfeasible = errors.New("perfmodel: infeasible thresholds")

// outcome is one way a finishing batch spreads over the models.
type outcome struct {
	arr  []int
	prob float64
}

// chain is the reachable part of the Markov chain for one (model, N, B).
type chain struct {
	p      *csr
	tokens []float64 // expected tokens committed at the next event, per state
	dt     []float64 // time to the next event in ms, per state
}

// codec packs a state (k_i, b_i, r_i per model, and the waiting queue
// under time-shared placement) into a uint64.
type codec struct {
	radix []uint64 // per digit: 3 per model, then the queue's
}

// newCodec returns the codec of states with n requests, steps of at most
// maxQuanta[i] quanta, and a waiting queue when shared.
func newCodec(n int, maxQuanta []int, shared bool) (codec, error) {
	var c codec
	total := uint64(1)
	mul := func(r uint64) error {
		hi, lo := bits.Mul64(total, r)
		if hi != 0 {
			return fmt.Errorf("%w: state space of %d models at N=%d does not fit 64 bits", ErrTooLarge, len(maxQuanta), n)
		}
		total = lo
		c.radix = append(c.radix, r)
		return nil
	}
	for _, q := range maxQuanta {
		for _, r := range []uint64{uint64(n + 1), uint64(n + 1), uint64(q + 1)} {
			if err := mul(r); err != nil {
				return codec{}, err
			}
		}
	}
	if shared {
		r, err := queueRadix(len(maxQuanta))
		if err != nil {
			return codec{}, err
		}
		if err := mul(r); err != nil {
			return codec{}, err
		}
	}
	return c, nil
}

func (c codec) encode(s []int) uint64 {
	var x uint64
	for d := len(s) - 1; d >= 0; d-- {
		x = x*c.radix[d] + uint64(s[d])
	}
	return x
}

func (c codec) decode(x uint64, s []int) {
	for d := range s {
		s[d] = int(x % c.radix[d])
		x /= c.radix[d]
	}
}

// multinomials lists, for each model i and batch size b ≤ n, how b
// finishing requests spread over the destinations of row P_i.
func multinomials(p [][]float64, n int) [][][]outcome {
	m := len(p)
	lf := make([]float64, n+1)
	for i := 1; i <= n; i++ {
		lf[i] = lf[i-1] + math.Log(float64(i))
	}
	out := make([][][]outcome, m)
	for i := range m {
		var dests []int
		for j, v := range p[i] {
			if v > 0 {
				dests = append(dests, j)
			}
		}
		out[i] = make([][]outcome, n+1)
		for b := 1; b <= n; b++ {
			x := make([]int, m)
			var rec func(d, left int)
			rec = func(d, left int) {
				if d == len(dests)-1 {
					x[dests[d]] = left
					lp := lf[b]
					for _, j := range dests {
						lp += float64(x[j])*math.Log(p[i][j]) - lf[x[j]]
					}
					out[i][b] = append(out[i][b], outcome{arr: slices.Clone(x), prob: math.Exp(lp)})
					x[dests[d]] = 0
					return
				}
				for c := 0; c <= left; c++ {
					x[dests[d]] = c
					rec(d+1, left-c)
				}
				x[dests[d]] = 0
			}
			rec(0, b)
		}
	}
	return out
}

// staticPolicies returns one static policy per threshold, no max-wait.
func staticPolicies(b []int) []Policy {
	pols := make([]Policy, len(b))
	for i, x := range b {
		pols[i] = Policy{Policy: sched.Policy{B: sched.Static(x)}}
	}
	return pols
}

// checkThresholds validates a threshold vector against the model and N.
func checkThresholds(m Model, n int, b []int) error {
	if n < 1 {
		return fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	if len(b) != m.M() {
		return fmt.Errorf("perfmodel: %d thresholds for %d models", len(b), m.M())
	}
	for i, x := range b {
		if x < 1 {
			return fmt.Errorf("perfmodel: threshold B[%d] = %d must be at least 1", i, x)
		}
	}
	if !sched.Feasible(b, n) {
		return fmt.Errorf("%w: B=%v at N=%d (Σ(B_i−1) ≥ N)", ErrInfeasible, b, n)
	}
	return nil
}

// buildChain enumerates the states reachable from "all n requests queued at
// model 0" under the launch policies pols (no max-wait), with at most
// maxStates states.
func buildChain(ctx context.Context, m Model, n int, pols []Policy, maxStates int) (*chain, error) {
	b, err := newChainBuilder(m, n, pols, maxStates)
	if err != nil {
		return nil, err
	}
	ch := &chain{p: &csr{rowPtr: []int32{0}}}
	for cur := 0; cur < len(b.codes); cur++ {
		if cur%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("perfmodel: building chain: %w", err)
			}
		}
		if err := b.expand(b.codes[cur], ch); err != nil {
			return nil, err
		}
	}
	ch.p.n = len(b.codes)
	return ch, nil
}

// chainEdge is one transition out of the state being expanded.
type chainEdge struct {
	to   int32
	prob float64
}

// chainBuilder holds the tables and scratch space of buildChain.
type chainBuilder struct {
	n, M      int
	maxStates int
	env       *launchEnv
	cd        codec
	mult      [][][]outcome
	tps       []float64
	delta     float64

	index map[uint64]int32 // state code → index
	codes []uint64         // states in discovery order

	s, next, arr []int       // scratch: current state, successor, arrivals
	finishing    []int       // models whose batches finish at the next event
	row          []chainEdge // transitions out of the current state
}

// newChainBuilder prepares the tables for model m, concurrency n and
// policies pols, with the start state (all n requests queued at model 0,
// then launched) registered.
func newChainBuilder(m Model, n int, pols []Policy, maxStates int) (*chainBuilder, error) {
	env, err := newLaunchEnv(m, n, pols)
	if err != nil {
		return nil, err
	}
	cd, err := newCodec(n, env.maxQuanta(), env.shared)
	if err != nil {
		return nil, err
	}
	b := &chainBuilder{
		n: n, M: m.M(), maxStates: maxStates, env: env, cd: cd,
		mult: multinomials(m.P, n), tps: m.tokensPerStep(), delta: m.delta(),
		index: make(map[uint64]int32, 1024),
		s:     make([]int, env.stateLen()), next: make([]int, env.stateLen()), arr: make([]int, m.M()),
	}
	s := b.s
	s[0] = n
	env.launchAll(s, -1, 0, nil, nil)
	b.index[cd.encode(s)] = 0
	b.codes = append(b.codes, cd.encode(s))
	return b, nil
}

// expand decodes the state with code x and appends its expected tokens,
// time to the next event and transition row to ch.
func (b *chainBuilder) expand(x uint64, ch *chain) error {
	s := b.s
	b.cd.decode(x, s)
	tmin := math.MaxInt
	for i := range b.M {
		if s[3*i+1] > 0 && s[3*i+2] < tmin {
			tmin = s[3*i+2]
		}
	}
	if tmin == math.MaxInt {
		return fmt.Errorf("%w: deadlock state reached at N=%d", ErrInfeasible, b.n)
	}
	b.finishing = b.finishing[:0]
	tok := 0.0
	for i := range b.M {
		if s[3*i+1] > 0 && s[3*i+2] == tmin {
			b.finishing = append(b.finishing, i)
			tok += float64(s[3*i+1]) * b.tps[i]
		}
	}
	// Under time-shared placement exactly one model runs, and it is
	// the one that just stepped; partitioned ignores fin.
	fin := b.finishing[0]
	ch.tokens = append(ch.tokens, tok)
	ch.dt = append(ch.dt, float64(tmin)*b.delta)

	b.row = b.row[:0]
	b.routeFinishing(0, tmin, fin, 1)
	for _, e := range b.row {
		if e.to < 0 {
			return fmt.Errorf("%w: more than %d states at N=%d", ErrTooLarge, b.maxStates, b.n)
		}
	}
	b.appendRow(ch.p)
	return nil
}

// routeFinishing enumerates the cartesian product of the outcomes of the
// finishing batches from b.finishing[f] on (arrivals so far in b.arr,
// probability prob so far), adding an edge to b.row for each.
func (b *chainBuilder) routeFinishing(f, tmin, fin int, prob float64) {
	if f == len(b.finishing) {
		b.row = append(b.row, chainEdge{b.successor(tmin, fin), prob})
		return
	}
	i := b.finishing[f]
	for _, o := range b.mult[i][b.s[3*i+1]] {
		for j, a := range o.arr {
			b.arr[j] += a
		}
		b.routeFinishing(f+1, tmin, fin, prob*o.prob)
		for j, a := range o.arr {
			b.arr[j] -= a
		}
	}
}

// successor returns the index of the state reached from b.s after tmin
// quanta with arrivals b.arr and the launches that follow fin's step,
// registering it if new (−1 past the state limit).
func (b *chainBuilder) successor(tmin, fin int) int32 {
	next := b.next
	copy(next, b.s)
	for i := range b.M {
		next[3*i] += b.arr[i]
		if next[3*i+1] > 0 {
			next[3*i+2] -= tmin
			if next[3*i+2] == 0 {
				next[3*i+1], next[3*i+2] = 0, 0
			}
		}
	}
	b.env.launchAll(next, fin, 0, nil, nil)
	code := b.cd.encode(next)
	idx, ok := b.index[code]
	if !ok {
		idx = int32(len(b.codes))
		if len(b.codes) >= b.maxStates {
			idx = -1
		} else {
			b.index[code] = idx
			b.codes = append(b.codes, code)
		}
	}
	return idx
}

// appendRow sorts b.row by destination, merges duplicate destinations and
// appends the result as p's next row.
func (b *chainBuilder) appendRow(p *csr) {
	row := b.row
	slices.SortFunc(row, func(a, b chainEdge) int { return int(a.to - b.to) })
	for k := 0; k < len(row); {
		to, pr := row[k].to, 0.0
		for ; k < len(row) && row[k].to == to; k++ {
			pr += row[k].prob
		}
		p.col = append(p.col, to)
		p.val = append(p.val, pr)
	}
	p.rowPtr = append(p.rowPtr, int32(len(p.col)))
}

// EvaluateExact returns the exact throughput of launch policies pols (one
// per model) at concurrency n: the stationary distribution of the chain of
// DESIGN §6 with sched.Decide as the launch rule. Policies must not use a
// max-wait guard (the chain has no clock). It fails with ErrTooLarge when
// the chain has more than opts.MaxStates states, and with ErrInfeasible
// when a reachable state deadlocks. When the stationary solver cannot reach
// opts.Tolerance, the error wraps ErrNotConverged and the Result still holds
// the throughput of the best distribution found together with its Residual,
// for the caller to judge.
func EvaluateExact(ctx context.Context, m Model, n int, pols []Policy, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	if n < 1 {
		return Result{}, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	if len(pols) != m.M() {
		return Result{}, fmt.Errorf("perfmodel: %d policies for %d models", len(pols), m.M())
	}
	res := Result{N: n, B: policyThresholds(pols, n), Feasible: true, Method: MethodExact}
	for i, p := range pols {
		if p.MaxWait > 0 {
			return res, fmt.Errorf("perfmodel: policy %d has a max-wait guard; the exact chain cannot model it (use Simulate)", i)
		}
	}
	ch, err := buildChain(ctx, m, n, pols, opts.MaxStates)
	if err != nil {
		return res, err
	}
	err = ch.solve(ctx, opts.Tolerance, &res)
	return res, err
}

// solve computes the chain's stationary distribution and sets res's
// throughput, states and solver figures. On ErrNotConverged res still
// holds the best distribution's throughput and residual.
func (ch *chain) solve(ctx context.Context, tol float64, res *Result) error {
	// The solver takes the transition matrix: once it has its transpose
	// and the recurrent class, P can be collected while GMRES runs.
	p, states := ch.p, ch.p.n
	ch.p = nil
	sol, err := stationary(ctx, p, tol)
	res.States, res.Residual, res.Sweeps, res.Solver = states, sol.residual, sol.iters, sol.solver
	if sol.pi != nil {
		num, den := 0.0, 0.0
		for i, x := range sol.pi {
			num += x * ch.tokens[i]
			den += x * ch.dt[i]
		}
		res.TokensPerSecond = num / den * 1000
	}
	if err != nil {
		return fmt.Errorf("perfmodel: N=%d B=%v (%d states): %w", res.N, res.B, states, err)
	}
	return nil
}

// policyThresholds returns each policy's threshold at n active requests.
func policyThresholds(pols []Policy, n int) []int {
	b := make([]int, len(pols))
	for i, p := range pols {
		b[i] = p.B.At(n)
	}
	return b
}
