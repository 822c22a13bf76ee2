package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/steptime"
)

// ErrNoFormula is wrapped by a baseline's prediction for a model outside
// the pattern its formula covers.
var ErrNoFormula = errors.New("perfmodel: no formula for this model")

// Lockstep returns the predicted throughput, in tokens per second, of n
// requests served in lockstep (baseline/lockstep, R2R's official serving)
// on an R2R model: two models, the large one always handing the request
// back (P[1][0] = 1), p = P[0][1].
//
// All n requests advance in global steps. A global step steps the small
// model on all n, then the large model on the K of them it routed,
// K ~ Binomial(n, p), when K > 0. The routed requests come back within the
// same global step, so every global step starts with all n on the small
// model and commits, per request, t = (1−p)·C[0][0] + p·(C[0][1] + C[1][0])
// tokens (1 for R2R). So, with times in milliseconds,
//
//	throughput = 1000 · n·t / (L_0(n) + Σ_{k=1..n} C(n,k)·p^k·(1−p)^(n−k)·L_1(k)).
//
// L_i(b) is model i's own curve at a batch of b with the chain's mean
// extend and context per request (Model.Extends, Model.StepContext: the
// routing visits the models at the same rates as under TokenRouter, so a
// step appends 0 tokens beyond one per request on the small model and
// 1/p − 1 on the large one, plus the prompts' share; the mean stands in
// for the random extends, exact where the curve is linear in the rows).
// The models never step at once, so no interference applies; the
// placement enters only through the curves (each model's share of the
// cores when partitioned, every core when time-shared). Step times are
// not quantised. With batch-independent L_i it is
// 1000·n / (L_0 + (1 − (1−p)^n)·L_1): the paper's R2R pair (p = 0.35,
// 6.0 / 27.9 ms) gives 138.3, 242.3 and 472.4 tokens/s at n = 4, 8, 16.
func Lockstep(m Model, n int) (float64, error) {
	if err := checkBaseline(m, n); err != nil {
		return 0, err
	}
	if m.M() != 2 || m.P[1][0] != 1 {
		return 0, fmt.Errorf("%w: lockstep needs R2R's pattern (two models, the second always handing back), got P = %v", ErrNoFormula, m.P)
	}
	p := m.P[0][1]
	x, err := m.Extends()
	if err != nil {
		return 0, err
	}
	t := m.stepOn(m.ownCurve(0), 0, n, x)
	for k := 1; k <= n; k++ {
		t += binomial(n, k, p) * m.stepOn(m.ownCurve(1), 1, k, x)
	}
	tok := (1-p)*m.C[0][0] + p*(m.C[0][1]+m.C[1][0])
	return 1000 * float64(n) * tok / t, nil
}

// binomial returns the probability of k successes in n trials of
// probability p.
func binomial(n, k int, p float64) float64 {
	c := 1.0
	for j := 1; j <= k; j++ {
		c = c * float64(n-k+j) / float64(j)
	}
	return c * math.Pow(p, float64(k)) * math.Pow(1-p, float64(n-k))
}

// Alone returns the predicted throughput, in tokens per second, of n
// requests served by model i alone (bench's slm-only and llm-only: the
// single algorithm on the routed runtime at B = 1, the other models idle).
// The n requests finish every step together and launch again together, so
// every step takes the whole batch and commits one token per request:
//
//	throughput = 1000 · n / L_i(n, n·x, c)
//
// with x = PromptLen/OutputLen the prompts' share of the extends (0 for
// long outputs, Workload.OutputLen = 0) and c the mean context of a model
// every step of a request visits (Workload.Context(1)). No interference
// applies (nothing else steps); the placement enters through the curve
// (the model's share of the cores when partitioned, every core when
// time-shared). With a batch-independent L_i it is 1000·n / L_i.
func Alone(m Model, i, n int) (float64, error) {
	if err := checkBaseline(m, n); err != nil {
		return 0, err
	}
	if i < 0 || i >= m.M() {
		return 0, fmt.Errorf("%w: model %d of %d", ErrInvalidModel, i, m.M())
	}
	one := Model{Steps: []steptime.Curve{m.ownCurve(i)}, P: [][]float64{{1}}, C: [][]float64{{1}}, Workload: m.Workload}
	x, err := one.Extends()
	if err != nil {
		return 0, err
	}
	return 1000 * float64(n) / one.stepOn(one.ownCurve(0), 0, n, x), nil
}

// checkBaseline validates a model and a concurrency for a baseline's
// formula.
func checkBaseline(m Model, n int) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	return nil
}

// TokenRouter predicts TokenRouter's throughput at concurrency n: with
// static thresholds b, Evaluate's chain at b; with b nil, the best
// thresholds with the fixed entries held (Optimize: what the runtime's
// automatic thresholds aim for). A positive maxWait adds the runtime's
// max-wait guard to every model's policy, which only the simulator follows
// (EvaluatePolicies); it cannot fire when every threshold is 1, and the
// prediction then stays exact. The Result's B holds the thresholds
// predicted.
func (pl *Planner) TokenRouter(ctx context.Context, m Model, n int, b []int, fixed map[int]int, maxWait time.Duration) (Result, error) {
	var r Result
	var err error
	if b == nil {
		r, err = pl.Optimize(ctx, m, n, fixed)
	} else {
		r, err = pl.Evaluate(ctx, m, n, b)
	}
	if err != nil || maxWait <= 0 || !r.Feasible || !slices.ContainsFunc(r.B, func(v int) bool { return v > 1 }) {
		return r, err
	}
	pols := staticPolicies(r.B)
	for i := range pols {
		pols[i].MaxWait = maxWait
	}
	g, err := pl.EvaluatePolicies(ctx, m, n, pols)
	if err != nil {
		return Result{}, fmt.Errorf("perfmodel: N=%d B=%v with max-wait %v: %w", n, r.B, maxWait, err)
	}
	g.N, g.B = n, r.B
	return g, nil
}
