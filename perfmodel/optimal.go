package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// optimalLimit bounds the decision states of OptimalThroughput (dense
// policy evaluation).
const optimalLimit = 4000

// mdpAction is one launch choice at a decision state.
type mdpAction struct {
	launch int // bit set of models launched
	reward float64
	time   float64 // ms
	to     []int32
	prob   []float64
}

// OptimalThroughput returns the highest throughput any launch policy can
// reach at concurrency n, together with the number of decision states: the
// optimum of the semi-Markov decision process whose states are the chain's
// states just before launching (queues, running batches, remaining times)
// and whose actions are the sets of idle models that launch now (at least
// one batch must then be running, so no policy deadlocks; under
// time-shared placement at most one model, and only when none runs, in any
// order). It is solved by
// policy iteration, starting from "launch whenever possible" (B = 1), and
// bounds what any rule that sched.Decide could express, however much state
// it looks at. Only small chains are supported (a few thousand decision
// states).
func OptimalThroughput(ctx context.Context, m Model, n int) (float64, int, error) {
	if err := m.Validate(); err != nil {
		return 0, 0, err
	}
	if n < 1 {
		return 0, 0, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	if M := m.M(); M > 16 {
		return 0, 0, fmt.Errorf("perfmodel: optimal policy supports at most 16 models, got %d", M)
	}
	b, err := newMDPBuilder(m, n)
	if err != nil {
		return 0, 0, err
	}
	acts, err := b.explore(ctx)
	if err != nil {
		return 0, 0, err
	}
	g, err := policyIteration(ctx, acts)
	return g * 1000, len(acts), err
}

// mdpBuilder enumerates the decision states reachable from the empty-batch
// start state and the launch actions available at each.
type mdpBuilder struct {
	n, M   int
	cd     codec
	quanta [][]int
	mult   [][][]outcome
	tps    []float64
	delta  float64
	shared bool

	index map[uint64]int32 // decision state code → index
	codes []uint64         // decision states in discovery order

	y, next, arr []int // scratch: state after launching, successor, arrivals
}

// newMDPBuilder prepares the state codec and per-model tables for model m at
// concurrency n, with the start state (all requests queued at model 0)
// registered.
func newMDPBuilder(m Model, n int) (*mdpBuilder, error) {
	M := m.M()
	quanta, err := m.StepQuanta(n)
	if err != nil {
		return nil, err
	}
	maxQ := make([]int, M)
	for i, q := range quanta {
		maxQ[i] = slices.Max(q)
	}
	cd, err := newCodec(n, maxQ, false)
	if err != nil {
		return nil, err
	}
	b := &mdpBuilder{
		n: n, M: M, cd: cd, quanta: quanta,
		mult: multinomials(m.P, n), tps: m.tokensPerStep(), delta: m.delta(), shared: m.timeShared(),
		index: map[uint64]int32{},
		y:     make([]int, 3*M), next: make([]int, 3*M), arr: make([]int, M),
	}
	s := make([]int, 3*M)
	s[0] = n
	b.index[cd.encode(s)] = 0
	b.codes = append(b.codes, cd.encode(s))
	return b, nil
}

// explore visits decision states breadth-first, discovering successors as
// it goes, and returns the actions of every state in index order.
func (b *mdpBuilder) explore(ctx context.Context) ([][]mdpAction, error) {
	var acts [][]mdpAction
	s := make([]int, 3*b.M)
	for cur := 0; cur < len(b.codes); cur++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("perfmodel: optimal policy: %w", err)
		}
		b.cd.decode(b.codes[cur], s)
		list, err := b.stateActions(s)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("%w: decision state with no running batch possible", ErrInfeasible)
		}
		acts = append(acts, list)
	}
	return acts, nil
}

// stateActions returns the admissible actions at decision state s: every
// subset of idle models (from the full set down) whose launch leaves a batch
// running and, under time-shared placement, respects one step at a time.
func (b *mdpBuilder) stateActions(s []int) ([]mdpAction, error) {
	M := b.M
	idle := 0
	for i := range M {
		if s[3*i+1] == 0 && s[3*i] > 0 {
			idle |= 1 << i
		}
	}
	var list []mdpAction
	busy := false
	for i := range M {
		busy = busy || s[3*i+1] > 0
	}
	for sub := idle; ; sub = (sub - 1) & idle {
		y := b.y
		copy(y, s)
		running := false
		for i := range M {
			if sub&(1<<i) != 0 {
				y[3*i+1], y[3*i], y[3*i+2] = y[3*i], 0, b.quanta[i][y[3*i]]
			}
			running = running || y[3*i+1] > 0
		}
		// Time-shared: one step at a time, so a launch needs an idle
		// machine and launches one model.
		allowed := !b.shared || sub == 0 || (!busy && bits.OnesCount(uint(sub)) == 1)
		if running && allowed {
			a, err := b.launchAction(sub)
			if err != nil {
				return nil, err
			}
			list = append(list, a)
		}
		if sub == 0 {
			break
		}
	}
	return list, nil
}

// launchAction builds the action launching set sub, given the state after
// launch in b.y: it runs until the earliest batches finish, earning their
// tokens, and moves to each successor with its routing probability.
func (b *mdpBuilder) launchAction(sub int) (mdpAction, error) {
	y := b.y
	a := mdpAction{launch: sub}
	tmin := math.MaxInt
	for i := range b.M {
		if y[3*i+1] > 0 {
			tmin = min(tmin, y[3*i+2])
		}
	}
	a.time = float64(tmin) * b.delta
	var fin []int
	for i := range b.M {
		if y[3*i+1] > 0 && y[3*i+2] == tmin {
			fin = append(fin, i)
			a.reward += float64(y[3*i+1]) * b.tps[i]
		}
	}
	succ := map[int32]float64{}
	if err := b.routeFinished(fin, 0, tmin, 1, succ); err != nil {
		return a, err
	}
	for to, p := range succ {
		a.to = append(a.to, to)
		a.prob = append(a.prob, p)
	}
	return a, nil
}

// routeFinished enumerates the routing outcomes of finished batches fin[f:]
// (arrivals so far in b.arr, probability prob so far) and adds each
// resulting decision state, tmin quanta later, to succ.
func (b *mdpBuilder) routeFinished(fin []int, f, tmin int, prob float64, succ map[int32]float64) error {
	if f == len(fin) {
		idx, err := b.successor(tmin)
		if err != nil {
			return err
		}
		succ[idx] += prob
		return nil
	}
	i := fin[f]
	for _, o := range b.mult[i][b.y[3*i+1]] {
		for j, v := range o.arr {
			b.arr[j] += v
		}
		err := b.routeFinished(fin, f+1, tmin, prob*o.prob, succ)
		for j, v := range o.arr {
			b.arr[j] -= v
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// successor returns the index of the decision state reached from b.y after
// tmin quanta with arrivals b.arr, registering it if new.
func (b *mdpBuilder) successor(tmin int) (int32, error) {
	next := b.next
	copy(next, b.y)
	for i := range b.M {
		next[3*i] += b.arr[i]
		if next[3*i+1] > 0 {
			if next[3*i+2] -= tmin; next[3*i+2] == 0 {
				next[3*i+1] = 0
			}
		}
	}
	code := b.cd.encode(next)
	idx, ok := b.index[code]
	if !ok {
		if len(b.codes) >= optimalLimit {
			return 0, fmt.Errorf("%w: more than %d decision states at N=%d", ErrTooLarge, optimalLimit, b.n)
		}
		idx = int32(len(b.codes))
		b.index[code] = idx
		b.codes = append(b.codes, code)
	}
	return idx, nil
}

// policyIteration maximises the long-run reward per unit time of a
// unichain semi-Markov decision process. Action 0 of every state launches
// all idle models (subsets are enumerated from the full set down).
func policyIteration(ctx context.Context, acts [][]mdpAction) (float64, error) {
	n := len(acts)
	pol := make([]int, n)
	var g float64
	h := make([]float64, n)
	for iter := 0; iter < 200; iter++ {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("perfmodel: policy iteration: %w", err)
		}
		// Evaluate: h(x) + g·τ(x) − Σ P h(x') = r(x), with h(0) = 0; the
		// unknown g takes the column of h(0).
		a := mat.NewDense(n, n, nil)
		b := mat.NewVecDense(n, nil)
		for x := range n {
			act := acts[x][pol[x]]
			a.Set(x, x, 1)
			for k, to := range act.to {
				a.Set(x, int(to), a.At(x, int(to))-act.prob[k])
			}
			a.Set(x, 0, act.time) // column 0 carries g (h(0) = 0)
			b.SetVec(x, act.reward)
		}
		var sol mat.VecDense
		if err := sol.SolveVec(a, b); err != nil {
			var cond mat.Condition
			if !errors.As(err, &cond) {
				return 0, fmt.Errorf("perfmodel: policy evaluation: %w", err)
			}
		}
		g = sol.AtVec(0)
		h[0] = 0
		for x := 1; x < n; x++ {
			h[x] = sol.AtVec(x)
		}
		// Improve.
		changed := false
		for x := range n {
			q := func(act mdpAction) float64 {
				v := act.reward - g*act.time
				for k, to := range act.to {
					v += act.prob[k] * h[to]
				}
				return v
			}
			cur := q(acts[x][pol[x]])
			for k, act := range acts[x] {
				if v := q(act); v > cur+1e-9*(1+math.Abs(cur)) {
					cur, pol[x], changed = v, k, true
				}
			}
		}
		if !changed {
			return g, nil
		}
	}
	return g, fmt.Errorf("%w: policy iteration did not settle", ErrNotConverged)
}
