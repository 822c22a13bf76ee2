package perfmodel

import (
	"errors"
	"fmt"
	"math"
)

// DefaultDelta is the default time quantum in milliseconds.
const DefaultDelta = 0.1

// Model describes a token-level routing system for the throughput model.
type Model struct {
	// L is the step latency of each model in milliseconds.
	L []float64
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

// M returns the number of models.
func (m Model) M() int { return len(m.L) }

// delta returns the effective time quantum.
func (m Model) delta() float64 {
	if m.Delta > 0 {
		return m.Delta
	}
	return DefaultDelta
}

// Quanta returns each model's step latency in whole time quanta (at least 1).
func (m Model) Quanta() []int {
	d := m.delta()
	q := make([]int, len(m.L))
	for i, l := range m.L {
		q[i] = max(1, int(math.Round(l/d)))
	}
	return q
}

// Validate checks shapes, probabilities and latencies.
func (m Model) Validate() error {
	n := len(m.L)
	if n == 0 {
		return fmt.Errorf("%w: no models", ErrInvalidModel)
	}
	if m.Delta < 0 || math.IsNaN(m.Delta) {
		return fmt.Errorf("%w: time quantum %v", ErrInvalidModel, m.Delta)
	}
	if len(m.P) != n || len(m.C) != n {
		return fmt.Errorf("%w: %d latencies but P has %d rows and C %d", ErrInvalidModel, n, len(m.P), len(m.C))
	}
	for i, l := range m.L {
		if !(l > 0) || math.IsInf(l, 0) {
			return fmt.Errorf("%w: latency L[%d] = %v must be positive", ErrInvalidModel, i, l)
		}
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

// tokensPerStep returns, for each model, the expected tokens committed per
// request that finishes a step there: Σ_j P_ij C_ij.
func (m Model) tokensPerStep() []float64 {
	t := make([]float64, len(m.L))
	for i := range m.L {
		for j, p := range m.P[i] {
			t[i] += p * m.C[i][j]
		}
	}
	return t
}

// key is a canonical text form of the model used for caching.
func (m Model) key() string {
	return fmt.Sprintf("%v|%v|%v|%v", m.Quanta(), m.P, m.C, m.delta())
}

// NoContentionBound returns the throughput (tokens per second) that n
// requests would reach if no request ever waited for a batch: each request
// cycles through the models independently. It solves the routing chain's
// stationary distribution ν (ν = νP) and returns
// n · Σ_i ν_i Σ_j P_ij C_ij / Σ_i ν_i L_i, using the quantised latencies.
// For R2R this is n/(T0 + p·T1) tokens per millisecond.
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
