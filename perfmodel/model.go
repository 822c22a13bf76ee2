package perfmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tokenrouter/tokenrouter/steptime"
)

// DefaultDelta is the default time quantum in milliseconds.
const DefaultDelta = 0.1

// Placement is how the models share one machine (DESIGN §6a).
type Placement string

// Placements.
const (
	// Partitioned: each model steps on its own cores, so the models'
	// steps overlap; every idle model whose queue reaches its threshold
	// launches at once. The zero Placement means Partitioned.
	Partitioned Placement = "partitioned"
	// TimeShared: one step at a time, each on every core (TimeSharedRule).
	TimeShared Placement = "time-shared"
)

// TimeSharedRule is the launch rule of time-shared placement, which the
// runtime must follow for the model to predict it:
//
// At most one model steps at a time. A model is eligible when it is idle
// and sched.Decide says launch. Eligible models wait for the turn in a
// first-come, first-served queue. A step's turn ends once its results are
// applied: its stayers are back in its own queue and its hand-offs are in
// the receivers' queues. At that moment the models the step made eligible
// join the back of the queue, the model that stepped first and then the
// receivers in model order; then the model at the front takes the turn and
// launches with every request it has at that moment, including those the
// step just handed to it. So a model that was already waiting goes before
// the one that just stepped, and the one that just stepped goes before the
// models its own hand-offs made eligible.
const TimeSharedRule = "first-come first-served; at a step's end the stepping model queues before the models its hand-offs made eligible; the model taking the turn launches with every request it holds then"

// Workload describes the requests of a closed-loop run, for the parts of
// a step's time that depend on them: the tokens a request extends beyond
// one per step (its prompt on its first step) and the context its
// sequences hold.
type Workload struct {
	// PromptLen is each request's prompt length in tokens.
	PromptLen int
	// OutputLen is the tokens each request generates. 0 means long
	// outputs: prompts are neglected and contexts taken as PromptLen.
	OutputLen int
}

// Context returns the mean context a row of a step on a model attends
// over (steptime.Curve's c: tokens its sequence held before the step,
// weighted by rows), for a model that a request visits every e committed
// tokens (Model.Extends' e_i). Over a request's life of P + O tokens (P =
// PromptLen, O = OutputLen) the model appends about all of them: first P
// (or the whole sequence so far, at a later model's first visit) over an
// empty context, then e per visit over a context that averages P + O/2 − e
// on the visits, so the row-weighted mean is O·(P + O/2 − e)/(P + O). With
// OutputLen 0 it is PromptLen (contexts are not modelled).
func (w Workload) Context(e float64) float64 {
	p, o := float64(w.PromptLen), float64(w.OutputLen)
	if o <= 0 {
		return p
	}
	return max(0, o*(p+o/2-e)/(p+o))
}

// Model describes a token-level routing system for the throughput model.
type Model struct {
	// L is the batch-independent step latency of each model in
	// milliseconds (the paper's case). Give L or Steps, not both.
	L []float64
	// Steps, when set, gives each model's step time as a function of its
	// batch (DESIGN §6a): a launch of b requests on model i takes
	// Steps[i].At(b, b·Extend_i, c_i), quantised to Delta, with c_i the
	// mean context of a row there (Model.StepContext).
	// steptime.Constant(L_i) is the same as L.
	Steps []steptime.Curve
	// P is the routing matrix: P[i][j] is the probability that a request
	// that just stepped on model i moves to model j (P[i][i]: it stays).
	// Every row sums to 1.
	P [][]float64
	// C is the commit matrix: C[i][j] is the number of tokens committed
	// when a request moves from model i to model j after a step.
	C [][]float64
	// Delta is the time quantum in milliseconds; 0 means DefaultDelta.
	// Latencies are rounded to whole quanta.
	Delta float64
	// Extend is, per model, the mean number of tokens a request appends
	// beyond one in a step there; nil derives it from P, C and Workload
	// (Model.Extends).
	Extend []float64
	// Workload sets the contexts the step-time curves see and the prompts'
	// share of Extend.
	Workload Workload
	// Placement is Partitioned (the zero value) or TimeShared.
	Placement Placement
	// Interference is, per model, the factor by which its steps slow down
	// while another model steps at once; under partitioned placement a
	// factor above steptime.FoldAbove multiplies the model's step time
	// (nil: none).
	Interference []float64
	// Replicas is, per model, how many replicas serve it (nil or 0: one).
	// The chain keeps one server per model and prices a launch of b
	// requests on a model with r replicas as one replica's step of ⌈b/r⌉
	// (the replicas step in parallel, the requests spread evenly among
	// them) — an approximation: the replicas' own launches are not in
	// step.
	Replicas []int
}

// ErrInvalidModel is wrapped by every model validation error.
var ErrInvalidModel = errors.New("perfmodel: invalid model")

// R2R returns the model of R2R-style routing between a small model 0 and a
// large model 1: after each small-model step a request stays with
// probability 1−p (committing its token) or goes to the large model with
// probability p (dropping it); the large model regenerates that token,
// commits it and always hands the request back.
func R2R(p, l0, l1 float64) Model {
	return Model{
		L: []float64{l0, l1},
		P: [][]float64{{1 - p, p}, {1, 0}},
		C: [][]float64{{1, 0}, {1, 0}},
	}
}

// Ensemble returns the model of per-token model ensembles (ME): after every
// step the model of the next step is drawn by weight, and every step commits
// one token. weights are normalised to sum to 1.
func Ensemble(weights, latencies []float64) Model {
	m := len(weights)
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	row := make([]float64, m)
	for j, w := range weights {
		if sum > 0 {
			row[j] = w / sum
		}
	}
	md := Model{L: append([]float64(nil), latencies...), P: make([][]float64, m), C: make([][]float64, m)}
	for i := range m {
		md.P[i] = append([]float64(nil), row...)
		md.C[i] = make([]float64, m)
		for j := range md.C[i] {
			md.C[i][j] = 1
		}
	}
	return md
}

// AutoDelta returns a time quantum for m: DefaultDelta when every step
// time is batch-independent (the paper's case, whose values it reproduces);
// otherwise about a twentieth of the shortest one-request step, rounded
// down to 1, 2 or 5 times a power of ten and at least DefaultDelta. Each
// step then rounds by at most 2.5% (unbiased over the batch sizes; on
// curves like the cpu engine's, autotune's BenchmarkPlanBatchDependent,
// B* stayed and throughput moved by under 0.1% against a quantum five
// times finer), and the chain stays small: batch-dependent steps give every
// batch size its own step time, and the chain's states multiply with the
// distinct remaining times they leave.
func AutoDelta(m Model) float64 {
	x, err := m.Extends()
	if err != nil {
		return DefaultDelta
	}
	shortest, constant := math.Inf(1), true
	for i := range m.M() {
		constant = constant && m.Curve(i).Constant()
		shortest = min(shortest, m.StepMS(i, 1, x))
	}
	if constant || !(shortest > 0) || math.IsInf(shortest, 0) {
		return DefaultDelta
	}
	d := shortest / 20
	p := math.Pow(10, math.Floor(math.Log10(d)))
	for _, f := range []float64{5, 2, 1} {
		if f*p <= d {
			return max(DefaultDelta, f*p)
		}
	}
	return DefaultDelta
}

// M returns the number of models.
func (m Model) M() int {
	if m.Steps != nil {
		return len(m.Steps)
	}
	return len(m.L)
}

// timeShared reports whether the placement is TimeShared.
func (m Model) timeShared() bool { return m.Placement == TimeShared }

// Curve returns model i's step-time curve as the chain uses it: Steps[i]
// (or a constant L[i]), with the interference folded in under partitioned
// placement.
func (m Model) Curve(i int) steptime.Curve {
	c := m.ownCurve(i)
	if !m.timeShared() && i < len(m.Interference) {
		c = c.WithInterference(m.Interference[i])
	}
	return c
}

// ownCurve returns model i's step-time curve with no interference: Steps[i]
// or a constant L[i].
func (m Model) ownCurve(i int) steptime.Curve {
	if m.Steps != nil {
		return m.Steps[i]
	}
	return steptime.Constant(m.L[i])
}

// Extends returns the mean tokens a request appends beyond one in a step
// on each model: Model.Extend when set; otherwise derived from the routing
// process. A request stepping on model i appends the tokens committed since
// its last step there, on average e_i = Σ_k ν_k t_k / ν_i (ν the routing
// chain's stationary distribution, t_k = Σ_j P_kj C_kj the tokens one step
// on k commits): 1 for a model that keeps its requests, 1/p for R2R's large
// model. A model appends, over a request's life, about its whole prompt
// and output, so with Workload.OutputLen > 0 the prompt scales that by
// (PromptLen + OutputLen)/OutputLen. The result is e_i(·) − 1, at least 0.
// Batch-independent models need no extends (nil, no error).
func (m Model) Extends() ([]float64, error) {
	if m.Extend != nil {
		return m.Extend, nil
	}
	constant := true
	for i := range m.M() {
		constant = constant && m.Curve(i).Constant()
	}
	if constant {
		return nil, nil
	}
	nu, err := routingStationary(m.P)
	if err != nil {
		return nil, fmt.Errorf("perfmodel: extends from the routing process: %w", err)
	}
	tok := m.tokensPerStep()
	tau := 0.0
	for k := range nu {
		tau += nu[k] * tok[k]
	}
	scale := 1.0
	if w := m.Workload; w.OutputLen > 0 {
		scale = float64(w.PromptLen+w.OutputLen) / float64(w.OutputLen)
	}
	x := make([]float64, len(nu))
	for i, v := range nu {
		if v > 1e-12 {
			x[i] = max(0, tau/v*scale-1)
		}
	}
	return x, nil
}

// StepMS returns the chain's step time of model i for a batch of b
// requests with extends x (from Extends), before quantisation.
func (m Model) StepMS(i, b int, x []float64) float64 {
	if i < len(m.Replicas) && m.Replicas[i] > 1 {
		b = (b + m.Replicas[i] - 1) / m.Replicas[i]
	}
	return m.stepOn(m.Curve(i), i, b, x)
}

// stepOn is StepMS on curve c: the expected step time over the spread of
// the extends. A request appends 1 + x_i tokens on average (Extends). With
// a workload of prompts and outputs (and Extend derived), that mean has two
// parts: the tokens committed since the request's last step on the model,
// e_i − 1 beyond one (taken as geometric with that mean: the small-model
// steps between two visits of a model that R2R-style routing sends a token
// to with a fixed probability, so the extra rows of b requests are
// negative-binomial), and its prompt, PromptLen tokens on its first step
// there, which a request in the batch is at with probability e_i/OutputLen
// (it visits the model OutputLen/e_i times), so the prompts in a batch are
// binomial. (Spread as geometric too, a prompt's rows would be priced as
// many small extends in most steps rather than one large one in a few:
// the small model alone at N = 8 and 16 was predicted 12% below its
// measured throughput.) A curve that
// is not linear in the rows (an engine's tiles make steps a staircase)
// costs more on average than at the mean rows; a straight curve
// (steptime.Curve.Straight) costs the same.
func (m Model) stepOn(c steptime.Curve, i, b int, x []float64) float64 {
	ctx := m.StepContext(i, x)
	if x == nil || x[i] <= 0 || c.Straight() {
		e := 0.0
		if x != nil {
			e = float64(b) * max(x[i], 0)
		}
		return c.At(b, e, ctx)
	}
	route, prompt, pi := x[i], 0.0, 0.0
	if w := m.Workload; m.Extend == nil && w.OutputLen > 0 && w.PromptLen > 0 {
		e := (1 + x[i]) * float64(w.OutputLen) / float64(w.PromptLen+w.OutputLen)
		route, prompt, pi = max(e-1, 0), float64(w.PromptLen), min(1, e/float64(w.OutputLen))
	}
	sum, mass := 0.0, 0.0
	for k := 0; k <= b && mass < 1-spreadTail; k++ {
		pk := binomial(b, k, pi)
		sum += pk * spread(c, b, route, float64(k)*prompt, ctx)
		mass += pk
	}
	return sum / mass
}

// spread returns the expected time on c of a step of b requests at
// context ctx appending base extra rows plus each request a geometric
// number of extra rows with mean x (negative-binomial in all: P(k) =
// C(k+b−1, k) q^b (1−q)^k with q = 1/(1+x)).
func spread(c steptime.Curve, b int, x, base, ctx float64) float64 {
	if x <= 0 {
		return c.At(b, base, ctx)
	}
	q := 1 / (1 + x)
	pk := math.Pow(q, float64(b))
	sum, mass := 0.0, 0.0
	for k := 0; mass < 1-spreadTail && k <= spreadMaxRows*b; k++ {
		sum += pk * c.At(b, base+float64(k), ctx)
		mass += pk
		pk *= (1 - q) * float64(k+b) / float64(k+1)
	}
	return sum / mass
}

// spreadTail is the probability mass of the extends' spread left out of
// stepOn's expectation, and spreadMaxRows bounds the extra rows per
// request it sums over.
const (
	spreadTail    = 1e-12
	spreadMaxRows = 256
)

// StepContext returns the mean context of a row of model i's steps
// (Workload.Context), for extends x (from Extends; nil: one token a step).
func (m Model) StepContext(i int, x []float64) float64 {
	e := 1.0
	if x != nil && m.Workload.OutputLen > 0 {
		// Extends scale the tokens between visits by the prompt's share.
		w := m.Workload
		e = (1 + x[i]) * float64(w.OutputLen) / float64(w.PromptLen+w.OutputLen)
	}
	return m.Workload.Context(e)
}

// StepQuanta returns each model's step time in whole time quanta (at least
// 1) for every batch size b = 0..n (entry 0 repeats b = 1).
func (m Model) StepQuanta(n int) ([][]int, error) {
	x, err := m.Extends()
	if err != nil {
		return nil, err
	}
	d := m.delta()
	q := make([][]int, m.M())
	for i := range q {
		q[i] = make([]int, n+1)
		for b := 1; b <= n; b++ {
			q[i][b] = max(1, int(math.Round(m.StepMS(i, b, x)/d)))
		}
		q[i][0] = q[i][min(1, n)]
	}
	return q, nil
}

// delta returns the effective time quantum.
func (m Model) delta() float64 {
	if m.Delta > 0 {
		return m.Delta
	}
	return DefaultDelta
}

// Quanta returns each model's step latency at batch 1 in whole time quanta
// (at least 1).
func (m Model) Quanta() []int {
	q, err := m.StepQuanta(1)
	out := make([]int, m.M())
	for i := range out {
		out[i] = 1
		if err == nil {
			out[i] = q[i][1]
		}
	}
	return out
}

// Validate checks shapes, probabilities and latencies.
func (m Model) Validate() error {
	n := m.M()
	if n == 0 {
		return fmt.Errorf("%w: no models", ErrInvalidModel)
	}
	if m.Delta < 0 || math.IsNaN(m.Delta) {
		return fmt.Errorf("%w: time quantum %v", ErrInvalidModel, m.Delta)
	}
	if len(m.P) != n || len(m.C) != n {
		return fmt.Errorf("%w: %d models but P has %d rows and C %d", ErrInvalidModel, n, len(m.P), len(m.C))
	}
	if err := m.validateSteps(); err != nil {
		return err
	}
	if m.Replicas != nil && len(m.Replicas) != n || slices.ContainsFunc(m.Replicas, func(r int) bool { return r < 0 }) {
		return fmt.Errorf("%w: replicas %v for %d models", ErrInvalidModel, m.Replicas, n)
	}
	for i := range n {
		if len(m.P[i]) != n || len(m.C[i]) != n {
			return fmt.Errorf("%w: row %d of P or C does not have %d entries", ErrInvalidModel, i, n)
		}
		s := 0.0
		for j, p := range m.P[i] {
			if !(p >= 0 && p <= 1) {
				return fmt.Errorf("%w: P[%d][%d] = %v is not a probability", ErrInvalidModel, i, j, p)
			}
			if c := m.C[i][j]; !(c >= 0) || math.IsInf(c, 0) {
				return fmt.Errorf("%w: C[%d][%d] = %v must be a finite non-negative count", ErrInvalidModel, i, j, c)
			}
			s += p
		}
		if math.Abs(s-1) > 1e-9 {
			return fmt.Errorf("%w: row %d of P sums to %v, not 1", ErrInvalidModel, i, s)
		}
	}
	return nil
}

// validateSteps checks the step times and what they depend on.
func (m Model) validateSteps() error {
	n := m.M()
	if m.Steps != nil && m.L != nil {
		return fmt.Errorf("%w: give L or Steps, not both", ErrInvalidModel)
	}
	for i, l := range m.L {
		if !(l > 0) || math.IsInf(l, 0) {
			return fmt.Errorf("%w: latency L[%d] = %v must be positive", ErrInvalidModel, i, l)
		}
	}
	for i, c := range m.Steps {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%w: model %d: %w", ErrInvalidModel, i, err)
		}
		if !(c.At(1, 0, m.StepContext(i, nil)) > 0) {
			return fmt.Errorf("%w: model %d: a step of one request takes no time", ErrInvalidModel, i)
		}
	}
	if m.Placement != "" && m.Placement != Partitioned && m.Placement != TimeShared {
		return fmt.Errorf("%w: placement %q", ErrInvalidModel, m.Placement)
	}
	if m.Workload.PromptLen < 0 || m.Workload.OutputLen < 0 {
		return fmt.Errorf("%w: workload %+v", ErrInvalidModel, m.Workload)
	}
	for name, v := range map[string][]float64{"extends": m.Extend, "interference factors": m.Interference} {
		if v == nil {
			continue
		}
		if len(v) != n {
			return fmt.Errorf("%w: %d %s for %d models", ErrInvalidModel, len(v), name, n)
		}
		for i, x := range v {
			if !(x >= 0) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: %s[%d] = %v", ErrInvalidModel, name, i, x)
			}
		}
	}
	return nil
}

// tokensPerStep returns, for each model, the expected tokens committed per
// request that finishes a step there: Σ_j P_ij C_ij.
func (m Model) tokensPerStep() []float64 {
	t := make([]float64, m.M())
	for i := range t {
		for j, p := range m.P[i] {
			t[i] += p * m.C[i][j]
		}
	}
	return t
}

// key is a canonical text form of the model's chain at concurrency n,
// used for caching: what the chain depends on.
func (m Model) key(n int) (string, error) {
	q, err := m.StepQuanta(n)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%v|%v|%v|%v|%s", q, m.P, m.C, m.delta(), m.placement()), nil
}

// placement returns the placement, Partitioned for the zero value.
func (m Model) placement() Placement {
	if m.Placement == "" {
		return Partitioned
	}
	return m.Placement
}

// NoContentionBound returns the throughput (tokens per second) that n
// requests would reach if no request ever waited for a batch: each request
// cycles through the models independently, stepping alone. It solves the
// routing chain's stationary distribution ν (ν = νP) and returns
// n · Σ_i ν_i Σ_j P_ij C_ij / Σ_i ν_i L_i(1), using the quantised
// latencies of one-request steps. For R2R this is n/(T0 + p·T1) tokens per
// millisecond. With batch-dependent step times it is a reference, not a
// bound: batching can beat it.
func (m Model) NoContentionBound(n int) (float64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	nu, err := routingStationary(m.P)
	if err != nil {
		return 0, err
	}
	q := m.Quanta()
	d := m.delta()
	tok := m.tokensPerStep()
	num, den := 0.0, 0.0
	for i := range nu {
		num += nu[i] * tok[i]
		den += nu[i] * float64(q[i]) * d
	}
	if den == 0 {
		return 0, fmt.Errorf("%w: zero mean step time", ErrInvalidModel)
	}
	return float64(n) * num / den * 1000, nil
}
