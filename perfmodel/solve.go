package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// DefaultTolerance is the residual ‖πP − π‖₁ the stationary solver must
// reach.
const DefaultTolerance = 1e-10

// denseLimit is the largest chain solved by dense LU instead of iteration.
const denseLimit = 600

// ErrNotConverged is returned when the stationary solver does not reach its
// tolerance.
var ErrNotConverged = errors.New("perfmodel: stationary solver did not converge")

// csr is a sparse row-major matrix of transition probabilities.
type csr struct {
	n      int
	rowPtr []int32
	col    []int32
	val    []float64
}

// transpose returns the column-major view (the CSR of the transpose).
func (a *csr) transpose() *csr {
	t := &csr{n: a.n, rowPtr: make([]int32, a.n+1), col: make([]int32, len(a.col)), val: make([]float64, len(a.val))}
	for _, c := range a.col {
		t.rowPtr[c+1]++
	}
	for i := range a.n {
		t.rowPtr[i+1] += t.rowPtr[i]
	}
	next := append([]int32(nil), t.rowPtr[:a.n]...)
	for i := range a.n {
		for e := a.rowPtr[i]; e < a.rowPtr[i+1]; e++ {
			c := a.col[e]
			t.col[next[c]] = int32(i)
			t.val[next[c]] = a.val[e]
			next[c]++
		}
	}
	return t
}

// residual returns ‖πP − π‖₁ given the transpose pt of P.
func residual(pt *csr, pi []float64) float64 {
	r := 0.0
	for j := range pt.n {
		s := 0.0
		for e := pt.rowPtr[j]; e < pt.rowPtr[j+1]; e++ {
			s += pi[pt.col[e]] * pt.val[e]
		}
		r += math.Abs(s - pi[j])
	}
	return r
}

// normalise scales v to sum to 1 and clamps tiny negative entries to 0.
func normalise(v []float64) error {
	s := 0.0
	for i, x := range v {
		if x < 0 {
			v[i] = 0
			x = 0
		}
		s += x
	}
	if !(s > 0) || math.IsInf(s, 0) {
		return fmt.Errorf("%w: distribution sums to %v", ErrNotConverged, s)
	}
	for i := range v {
		v[i] /= s
	}
	return nil
}

// stationary returns the stationary distribution of the row-stochastic
// matrix p and its residual ‖πP − π‖₁. Small chains are solved by dense LU
// (one balance equation replaced by the normalisation); larger ones by
// Gauss–Seidel sweeps over the transpose until the residual reaches tol.
func stationary(ctx context.Context, p *csr, tol float64) ([]float64, float64, int, error) {
	pt := p.transpose()
	if p.n <= denseLimit {
		pi, err := stationaryDense(p)
		if err == nil {
			if r := residual(pt, pi); r <= tol {
				return pi, r, 0, nil
			}
		}
		// Fall through to iteration, which refines any solution.
	}
	return gaussSeidel(ctx, pt, tol)
}

// stationaryDense solves (Pᵀ − I)π = 0 with Σπ = 1 by LU.
func stationaryDense(p *csr) ([]float64, error) {
	n := p.n
	a := mat.NewDense(n, n, nil)
	for i := range n {
		a.Set(i, i, -1)
	}
	for i := range n {
		for e := p.rowPtr[i]; e < p.rowPtr[i+1]; e++ {
			j := int(p.col[e])
			a.Set(j, i, a.At(j, i)+p.val[e])
		}
	}
	for i := range n {
		a.Set(n-1, i, 1)
	}
	b := mat.NewVecDense(n, nil)
	b.SetVec(n-1, 1)
	var x mat.VecDense
	if err := x.SolveVec(a, b); err != nil {
		var cond mat.Condition
		if !errors.As(err, &cond) {
			return nil, fmt.Errorf("perfmodel: dense stationary solve: %w", err)
		}
	}
	pi := make([]float64, n)
	for i := range n {
		pi[i] = x.AtVec(i)
	}
	if err := normalise(pi); err != nil {
		return nil, err
	}
	return pi, nil
}

// gaussSeidel iterates π_j ← Σ_{i≠j} π_i P_ij / (1 − P_jj) in place,
// alternating forward and backward sweeps, until ‖πP − π‖₁ ≤ tol.
func gaussSeidel(ctx context.Context, pt *csr, tol float64) ([]float64, float64, int, error) {
	n := pt.n
	pi := make([]float64, n)
	for i := range pi {
		pi[i] = 1 / float64(n)
	}
	const maxSweeps = 200000
	res := math.Inf(1)
	update := func(j int) {
		s, d := 0.0, 0.0
		for e := pt.rowPtr[j]; e < pt.rowPtr[j+1]; e++ {
			i := pt.col[e]
			if int(i) == j {
				d += pt.val[e]
				continue
			}
			s += pi[i] * pt.val[e]
		}
		if d < 1 {
			pi[j] = s / (1 - d)
		}
	}
	for sweep := 1; sweep <= maxSweeps; sweep++ {
		if err := ctx.Err(); err != nil {
			return nil, res, sweep, fmt.Errorf("perfmodel: stationary solve: %w", err)
		}
		if sweep%2 == 1 {
			for j := range n {
				update(j)
			}
		} else {
			for j := n - 1; j >= 0; j-- {
				update(j)
			}
		}
		if err := normalise(pi); err != nil {
			return nil, res, sweep, err
		}
		if sweep%4 == 0 || sweep < 4 {
			res = residual(pt, pi)
			if res <= tol {
				return pi, res, sweep, nil
			}
		}
	}
	return nil, res, maxSweeps, fmt.Errorf("%w: residual %.3g after %d sweeps", ErrNotConverged, res, maxSweeps)
}

// routingStationary returns the stationary distribution ν of one request's
// routing chain (ν = νP) over the models.
func routingStationary(p [][]float64) ([]float64, error) {
	m := len(p)
	s := &csr{n: m, rowPtr: make([]int32, m+1)}
	for i := range m {
		for j, v := range p[i] {
			if v > 0 {
				s.col = append(s.col, int32(j))
				s.val = append(s.val, v)
			}
		}
		s.rowPtr[i+1] = int32(len(s.col))
	}
	pi, err := stationaryDense(s)
	if err != nil {
		return nil, err
	}
	if r := residual(s.transpose(), pi); r > 1e-9 {
		return nil, fmt.Errorf("%w: routing chain residual %.3g (is P reducible?)", ErrNotConverged, r)
	}
	return pi, nil
}
