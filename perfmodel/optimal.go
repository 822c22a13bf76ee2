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
	M := m.M()
	if M > 16 {
		return 0, 0, fmt.Errorf("perfmodel: optimal policy supports at most 16 models, got %d", M)
	}
	quanta, err := m.StepQuanta(n)
	if err != nil {
		return 0, 0, err
	}
	maxQ := make([]int, M)
	for i, q := range quanta {
		maxQ[i] = slices.Max(q)
	}
	cd, err := newCodec(n, maxQ, false)
	if err != nil {
		return 0, 0, err
	}
	shared := m.timeShared()
	mult := multinomials(m.P, n)
	tps := m.tokensPerStep()
	delta := m.delta()

	index := map[uint64]int32{}
	var codes []uint64
	var acts [][]mdpAction
	s := make([]int, 3*M)
	s[0] = n
	index[cd.encode(s)] = 0
	codes = append(codes, cd.encode(s))
	y := make([]int, 3*M)
	next := make([]int, 3*M)
	arr := make([]int, M)
	for cur := 0; cur < len(codes); cur++ {
		if err := ctx.Err(); err != nil {
			return 0, 0, fmt.Errorf("perfmodel: optimal policy: %w", err)
		}
		cd.decode(codes[cur], s)
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
			copy(y, s)
			running := false
			for i := range M {
				if sub&(1<<i) != 0 {
					y[3*i+1], y[3*i], y[3*i+2] = y[3*i], 0, quanta[i][y[3*i]]
				}
				running = running || y[3*i+1] > 0
			}
			// Time-shared: one step at a time, so a launch needs an idle
			// machine and launches one model.
			allowed := !shared || sub == 0 || (!busy && bits.OnesCount(uint(sub)) == 1)
			if running && allowed {
				a := mdpAction{launch: sub}
				tmin := math.MaxInt
				for i := range M {
					if y[3*i+1] > 0 {
						tmin = min(tmin, y[3*i+2])
					}
				}
				a.time = float64(tmin) * delta
				var fin []int
				for i := range M {
					if y[3*i+1] > 0 && y[3*i+2] == tmin {
						fin = append(fin, i)
						a.reward += float64(y[3*i+1]) * tps[i]
					}
				}
				succ := map[int32]float64{}
				var rec func(f int, prob float64) error
				rec = func(f int, prob float64) error {
					if f == len(fin) {
						copy(next, y)
						for i := range M {
							next[3*i] += arr[i]
							if next[3*i+1] > 0 {
								if next[3*i+2] -= tmin; next[3*i+2] == 0 {
									next[3*i+1] = 0
								}
							}
						}
						code := cd.encode(next)
						idx, ok := index[code]
						if !ok {
							if len(codes) >= optimalLimit {
								return fmt.Errorf("%w: more than %d decision states at N=%d", ErrTooLarge, optimalLimit, n)
							}
							idx = int32(len(codes))
							index[code] = idx
							codes = append(codes, code)
						}
						succ[idx] += prob
						return nil
					}
					i := fin[f]
					for _, o := range mult[i][y[3*i+1]] {
						for j, v := range o.arr {
							arr[j] += v
						}
						err := rec(f+1, prob*o.prob)
						for j, v := range o.arr {
							arr[j] -= v
						}
						if err != nil {
							return err
						}
					}
					return nil
				}
				if err := rec(0, 1); err != nil {
					return 0, 0, err
				}
				for to, p := range succ {
					a.to = append(a.to, to)
					a.prob = append(a.prob, p)
				}
				list = append(list, a)
			}
			if sub == 0 {
				break
			}
		}
		if len(list) == 0 {
			return 0, 0, fmt.Errorf("%w: decision state with no running batch possible", ErrInfeasible)
		}
		acts = append(acts, list)
	}
	g, err := policyIteration(ctx, acts)
	return g * 1000, len(acts), err
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
