package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
)

// solveProbs are the routing probabilities the solver must handle, from
// nearly decomposable (p → 0) to nearly periodic (p → 1).
var solveProbs = []float64{0.01, 0.05, 0.35, 0.5, 0.9, 0.99}

// balanceResidual returns ‖πP − π‖₁ computed from the rows of P (not its
// transpose, as the solver does), and |Σπ − 1|.
func balanceResidual(p *csr, pi []float64) (float64, float64) {
	y := make([]float64, p.n)
	sum := 0.0
	for i := range p.n {
		sum += pi[i]
		for e := p.rowPtr[i]; e < p.rowPtr[i+1]; e++ {
			y[p.col[e]] += pi[i] * p.val[e]
		}
	}
	r := 0.0
	for j := range y {
		r += math.Abs(y[j] - pi[j])
	}
	return r, math.Abs(sum - 1)
}

// checkSolve solves the chain of (m, n, b), verifies π independently and
// returns the solution.
func checkSolve(t *testing.T, m Model, n int, b []int) (*chain, solution) {
	t.Helper()
	ch, err := buildChain(context.Background(), m, n, staticPolicies(b), DefaultMaxStates)
	if err != nil {
		t.Fatalf("N=%d B=%v: %v", n, b, err)
	}
	sol, err := stationary(context.Background(), ch.p, DefaultTolerance)
	if err != nil {
		t.Fatalf("N=%d B=%v (%d states): %v", n, b, ch.p.n, err)
	}
	r, s := balanceResidual(ch.p, sol.pi)
	if r > DefaultTolerance || s > 1e-12 {
		t.Errorf("N=%d B=%v (%d states, %s): residual %.3g, |Σπ−1| %.3g", n, b, ch.p.n, sol.solver, r, s)
	}
	if math.Abs(r-sol.residual) > 1e-12 {
		t.Errorf("N=%d B=%v: reported residual %.3g, recomputed %.3g", n, b, sol.residual, r)
	}
	for i, x := range sol.pi {
		if !(x >= 0) {
			t.Fatalf("N=%d B=%v: π[%d] = %v", n, b, i, x)
		}
	}
	return ch, sol
}

// throughput is the model's throughput under π.
func (ch *chain) throughput(pi []float64) float64 {
	num, den := 0.0, 0.0
	for i, x := range pi {
		num += x * ch.tokens[i]
		den += x * ch.dt[i]
	}
	return num / den * 1000
}

func TestStationaryR2RAcrossP(t *testing.T) {
	ns := []int{2, 4, 8}
	if !testing.Short() {
		ns = append(ns, 12, 16)
	}
	for _, p := range solveProbs {
		for _, n := range ns {
			t.Run(fmt.Sprintf("p=%v/N=%d", p, n), func(t *testing.T) {
				m := R2R(p, 6.0, 27.9)
				b1s := []int{1, 3, n / 2, n}
				if n <= 8 {
					b1s = b1s[:0]
					for b1 := 1; b1 <= n; b1++ {
						b1s = append(b1s, b1)
					}
				}
				for _, b1 := range b1s {
					ch, sol := checkSolve(t, m, n, []int{1, b1})
					if ch.p.n > denseLimit && sol.solver == SolverDense {
						t.Errorf("B1=%d (%d states): dense solve above the dense limit", b1, ch.p.n)
					}
				}
			})
		}
	}
}

// TestStationaryKrylovMatchesDense solves chains of up to 715 states both
// by the sparse path and by dense LU; the throughputs must agree.
func TestStationaryKrylovMatchesDense(t *testing.T) {
	ctx := context.Background()
	for _, p := range solveProbs {
		for _, b1 := range []int{1, 2, 3, 4} {
			ch, err := buildChain(ctx, R2R(p, 6.0, 27.9), 4, staticPolicies([]int{1, b1}), DefaultMaxStates)
			if err != nil {
				t.Fatal(err)
			}
			sol, err := stationaryIterative(ctx, ch.p, ch.p.transpose(), DefaultTolerance, solution{})
			if err != nil {
				t.Fatalf("p=%v B1=%d: %v", p, b1, err)
			}
			if (sol.solver != SolverGMRES && sol.solver != SolverGaussSeidel) || sol.iters == 0 {
				t.Errorf("p=%v B1=%d: solver %s after %d iterations, want an iterative solve", p, b1, sol.solver, sol.iters)
			}
			if r, _ := balanceResidual(ch.p, sol.pi); r > DefaultTolerance {
				t.Errorf("p=%v B1=%d: residual %.3g", p, b1, r)
			}
			pi, err := stationaryDense(ch.p)
			if err != nil {
				t.Fatal(err)
			}
			got, want := ch.throughput(sol.pi), ch.throughput(pi)
			if math.Abs(got-want) > 1e-9*want {
				t.Errorf("p=%v B1=%d: GMRES %.12f, dense %.12f", p, b1, got, want)
			}
		}
	}
}

func TestStationaryEnsembleAcrossP(t *testing.T) {
	for _, p := range solveProbs {
		m := Ensemble([]float64{1 - p, 0.6 * p, 0.4 * p}, []float64{6, 12, 27.9})
		for _, n := range []int{2, 3, 4} {
			extreme := p == solveProbs[0] || p == solveProbs[len(solveProbs)-1]
			if n == 4 && (testing.Short() || !extreme) {
				continue
			}
			t.Run(fmt.Sprintf("p=%v/N=%d", p, n), func(t *testing.T) {
				vecs := Vectors(3, n, nil)
				switch {
				case n == 4:
					// 75,789 states, the largest chain at N = 4.
					vecs = [][]int{{1, 1, 1}}
				case n == 3:
					// The largest chain and two delayed ones.
					vecs = [][]int{{1, 1, 1}, {1, 2, 2}, {2, 1, 3}}
				}
				for _, b := range vecs {
					if checkThresholds(m, n, b) != nil {
						continue
					}
					checkSolve(t, m, n, b)
				}
			})
		}
	}
}

// ringChain returns a chain whose states 0..t−1 are transient (a path
// into the ring) and whose states t..t+r−1 form a nearly periodic ring:
// ring state k moves to k + stride (mod r) with probability 1−ε_k and
// stays otherwise, where ε_k = ε except every tenth state has ε_k = 1/2, so
// π_k ∝ 1/(1−ε_k). A stride coprime to r and far from ±1 makes the ring's
// order unrelated to the state order, so Gauss–Seidel sweeps gain little.
func ringChain(t, r, stride int, eps float64) *csr {
	n := t + r
	p := &csr{n: n, rowPtr: []int32{0}}
	add := func(to int, v float64) {
		p.col = append(p.col, int32(to))
		p.val = append(p.val, v)
	}
	for i := range n {
		switch {
		case i < t-1:
			add(i+1, 1)
		case i == t-1:
			add(t+r/2, 1)
		default:
			j := t + (i-t+stride)%r
			eps := eps
			if (i-t)%10 == 0 {
				eps = 0.5
			}
			if j < i {
				add(j, 1-eps)
				add(i, eps)
			} else {
				add(i, eps)
				add(j, 1-eps)
			}
		}
		p.rowPtr = append(p.rowPtr, int32(len(p.col)))
	}
	return p
}

func TestStationaryTransientAndPeriodic(t *testing.T) {
	const tr, ring = 50, 1000
	p := ringChain(tr, ring, 389, 1e-3)
	// The ring mixes slowly, so π's error can exceed the residual by orders
	// of magnitude; solve it to 1e-14 to check π entrywise.
	sol, err := stationary(context.Background(), p, 1e-14)
	if err != nil {
		t.Fatal(err)
	}
	if sol.solver != SolverGMRES {
		t.Errorf("solver %s, want %s", sol.solver, SolverGMRES)
	}
	// π_k ∝ 1/(1−ε_k): weight 2 on every tenth ring state.
	norm := (ring/10)*2 + (ring-ring/10)/(1-1e-3)
	for i, x := range sol.pi {
		want := 0.0
		switch {
		case i < tr:
		case (i-tr)%10 == 0:
			want = 2 / norm
		default:
			want = 1 / (1 - 1e-3) / norm
		}
		if math.Abs(x-want) > 1e-12 {
			t.Fatalf("π[%d] = %.15g, want %.15g (residual %.3g)", i, x, want, sol.residual)
		}
	}
	if r, _ := balanceResidual(p, sol.pi); r > DefaultTolerance {
		t.Errorf("residual %.3g", r)
	}
}

func TestStationaryFailsHonestly(t *testing.T) {
	// Two closed classes: no unique stationary distribution.
	p := ringChain(2, 700, 1, 0.5)
	p.col[0] = 0 // state 0 absorbing: a second closed class
	if _, err := stationary(context.Background(), p, DefaultTolerance); !errors.Is(err, ErrNotConverged) {
		t.Errorf("two closed classes: %v, want ErrNotConverged", err)
	}

	// An unreachable tolerance: the best π comes back with its residual
	// and an error.
	ctx := context.Background()
	opts := Options{Tolerance: 1e-300}
	r, err := EvaluateExact(ctx, paperR2R(), 4, staticPolicies([]int{1, 3}), opts)
	if !errors.Is(err, ErrNotConverged) {
		t.Fatalf("tolerance 1e-300: %v, want ErrNotConverged", err)
	}
	if r.Residual <= 0 || r.Residual > DefaultTolerance || math.Abs(r.TokensPerSecond-207.95) > 0.05 {
		t.Errorf("best effort: %.4f tok/s residual %.3g, want 207.95 with residual ≤ %.0g", r.TokensPerSecond, r.Residual, DefaultTolerance)
	}
	// A Planner does not use it: it simulates and says so.
	pl := NewPlanner(Options{Tolerance: 1e-300, Sim: SimOptions{Seed: 1, Batches: 5, BatchEvents: 2000}})
	res, err := pl.Evaluate(ctx, paperR2R(), 4, []int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != MethodSimulation || res.CIHalfWidth <= 0 {
		t.Errorf("planner: method %s CI %.3g, want a simulation", res.Method, res.CIHalfWidth)
	}
}

func TestStationaryCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ch, err := buildChain(context.Background(), R2R(0.9, 6.0, 27.9), 8, staticPolicies([]int{1, 1}), DefaultMaxStates)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stationaryIterative(ctx, ch.p, ch.p.transpose(), DefaultTolerance, solution{}); !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
	if _, err := stationary(ctx, ch.p, DefaultTolerance); !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
}
