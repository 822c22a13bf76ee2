package perfmodel

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/tokenrouter/tokenrouter/sched"
)

// paperR2R is the R2R pair of the paper: p = 0.35, L = (6.0, 27.9) ms.
func paperR2R() Model { return R2R(0.35, 6.0, 27.9) }

func TestPaperValues(t *testing.T) {
	cases := []struct {
		n, b1 int
		want  float64
	}{
		{2, 1, 98.96}, {2, 2, 110.32},
		{3, 1, 142.34}, {3, 2, 158.12}, {3, 3, 151.89},
		{4, 1, 187.19}, {4, 2, 195.44}, {4, 3, 207.95}, {4, 4, 190.74},
	}
	pl := NewPlanner(Options{})
	for _, c := range cases {
		r, err := pl.Evaluate(context.Background(), paperR2R(), c.n, []int{1, c.b1})
		if err != nil {
			t.Fatalf("N=%d B1=%d: %v", c.n, c.b1, err)
		}
		if r.Method != MethodExact || !r.Feasible {
			t.Errorf("N=%d B1=%d: method %q feasible %v, want exact and feasible", c.n, c.b1, r.Method, r.Feasible)
		}
		if math.Abs(r.TokensPerSecond-c.want) > 0.05 {
			t.Errorf("N=%d B1=%d: %.4f tok/s, want %.2f ± 0.05", c.n, c.b1, r.TokensPerSecond, c.want)
		}
		if r.Residual > DefaultTolerance {
			t.Errorf("N=%d B1=%d: residual %.3g > %.0g", c.n, c.b1, r.Residual, DefaultTolerance)
		}
	}
}

func TestPaperBest(t *testing.T) {
	want := map[int]int{2: 2, 3: 2, 4: 3}
	for n, b1 := range want {
		r, err := Optimize(context.Background(), paperR2R(), n, map[int]int{0: 1})
		if err != nil {
			t.Fatal(err)
		}
		if r.B[0] != 1 || r.B[1] != b1 {
			t.Errorf("N=%d: B* = %v, want [1 %d]", n, r.B, b1)
		}
	}
}

func TestIterativeSolverResidual(t *testing.T) {
	// N=4, B1=1 has 715 states: above the dense limit, so the sparse
	// iterative solver runs.
	r, err := EvaluateExact(context.Background(), paperR2R(), 4, staticPolicies([]int{1, 1}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.States <= denseLimit || r.Sweeps == 0 || r.Solver != SolverGMRES {
		t.Fatalf("states %d solver %q iterations %d: want the iterative path", r.States, r.Solver, r.Sweeps)
	}
	if r.Residual > DefaultTolerance {
		t.Errorf("residual %.3g", r.Residual)
	}
	// The same chain solved densely must agree.
	if math.Abs(r.TokensPerSecond-187.19) > 0.005 {
		t.Errorf("N=4 B1=1: %.4f, want 187.19", r.TokensPerSecond)
	}
	ch, err := buildChain(context.Background(), paperR2R(), 4, staticPolicies([]int{1, 1}), DefaultMaxStates)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := stationaryDense(ch.p)
	if err != nil {
		t.Fatal(err)
	}
	num, den := 0.0, 0.0
	for i, x := range pi {
		num += x * ch.tokens[i]
		den += x * ch.dt[i]
	}
	if d := math.Abs(num/den*1000 - r.TokensPerSecond); d > 1e-6 {
		t.Errorf("dense %.9f vs iterative %.9f", num/den*1000, r.TokensPerSecond)
	}
}

func TestInfeasible(t *testing.T) {
	pl := NewPlanner(Options{})
	r, err := pl.Evaluate(context.Background(), paperR2R(), 3, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Feasible || r.Method != MethodNone || r.TokensPerSecond != 0 {
		t.Errorf("B=[2 3] at N=3: %+v, want infeasible and not evaluated", r)
	}
	rs, err := pl.Search(context.Background(), paperR2R(), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 9 {
		t.Fatalf("%d results, want 9", len(rs))
	}
	nInf := 0
	for _, r := range rs {
		if !r.Feasible {
			nInf++
			if sched.Feasible(r.B, 3) {
				t.Errorf("%v marked infeasible", r.B)
			}
		}
	}
	if nInf != 3 { // [2 3] [3 2] [3 3]
		t.Errorf("%d infeasible, want 3", nInf)
	}
	if _, err := EvaluateExact(context.Background(), paperR2R(), 3, staticPolicies([]int{2, 3}), Options{}); !errors.Is(err, ErrInfeasible) {
		t.Errorf("exact evaluation of an infeasible vector: %v, want ErrInfeasible", err)
	}
}

func TestOptimizeFreeB0(t *testing.T) {
	// With B0 free the optimum can only be at least the B0 = 1 optimum.
	pl := NewPlanner(Options{})
	fixed, err := pl.Optimize(context.Background(), paperR2R(), 4, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	free, err := pl.Optimize(context.Background(), paperR2R(), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if free.TokensPerSecond < fixed.TokensPerSecond {
		t.Errorf("free %v %.3f < fixed %v %.3f", free.B, free.TokensPerSecond, fixed.B, fixed.TokensPerSecond)
	}
}

func TestSimulationMatchesExact(t *testing.T) {
	for _, c := range []struct{ n, b1 int }{{3, 2}, {4, 3}, {6, 3}} {
		ex, err := EvaluateExact(context.Background(), paperR2R(), c.n, staticPolicies([]int{1, c.b1}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		sim, err := Simulate(context.Background(), paperR2R(), c.n, staticPolicies([]int{1, c.b1}), SimOptions{Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if sim.Method != MethodSimulation || sim.CIHalfWidth <= 0 {
			t.Errorf("sim result %+v", sim)
		}
		// Within 3 half-widths and within 1%.
		d := math.Abs(sim.TokensPerSecond - ex.TokensPerSecond)
		if d > 3*sim.CIHalfWidth || d > 0.01*ex.TokensPerSecond {
			t.Errorf("N=%d B1=%d: sim %.2f ± %.2f, exact %.2f", c.n, c.b1, sim.TokensPerSecond, sim.CIHalfWidth, ex.TokensPerSecond)
		}
	}
}

func TestSimulationSeeded(t *testing.T) {
	o := SimOptions{Seed: 3, Batches: 5, BatchEvents: 1000}
	a, err := Simulate(context.Background(), paperR2R(), 5, staticPolicies([]int{1, 2}), o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(context.Background(), paperR2R(), 5, staticPolicies([]int{1, 2}), o)
	if err != nil {
		t.Fatal(err)
	}
	if a.TokensPerSecond != b.TokensPerSecond {
		t.Errorf("same seed, different results: %v vs %v", a.TokensPerSecond, b.TokensPerSecond)
	}
}

func TestSimulationMaxWait(t *testing.T) {
	// B1 = N launches only when every request is at model 1. A max-wait
	// guard of 1 ns launches one quantum after a request arrives instead,
	// which behaves like B1 = 1 (187.19 exact) slightly delayed; it must
	// never deadlock.
	pols := staticPolicies([]int{1, 4})
	base, err := Simulate(context.Background(), paperR2R(), 4, pols, SimOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(base.TokensPerSecond-190.74) > 3*base.CIHalfWidth+0.5 {
		t.Errorf("B1=4 simulated %.2f ± %.2f, exact 190.74", base.TokensPerSecond, base.CIHalfWidth)
	}
	pols[1].MaxWait = 1
	guarded, err := Simulate(context.Background(), paperR2R(), 4, pols, SimOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g := guarded.TokensPerSecond; g > 187.19+3*guarded.CIHalfWidth || g < 180 {
		t.Errorf("B1=4 with 1 ns max-wait: %.2f ± %.2f, want just below 187.19", g, guarded.CIHalfWidth)
	}
}

func TestLargeNFallsBackToSimulation(t *testing.T) {
	pl := NewPlanner(Options{MaxStates: 1000, Sim: SimOptions{Batches: 10, BatchEvents: 2000}})
	r, err := pl.Evaluate(context.Background(), paperR2R(), 12, []int{1, 6})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != MethodExact {
		t.Errorf("N=12 B1=6 (142 states): method %q, want exact", r.Method)
	}
	r, err = pl.Evaluate(context.Background(), paperR2R(), 12, []int{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != MethodSimulation || r.CIHalfWidth <= 0 {
		t.Errorf("N=12 B1=1 above the cutoff: %+v, want simulation with a CI", r)
	}
}

func TestTable(t *testing.T) {
	tabs, err := Table(context.Background(), paperR2R(), 8, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(tabs) != 2 || len(tabs[1]) != 9 {
		t.Fatalf("tables %v", tabs)
	}
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3} {
		if tabs[0][n] != 1 || tabs[1][n] != want {
			t.Errorf("n=%d: B = (%d, %d), want (1, %d)", n, tabs[0][n], tabs[1][n], want)
		}
	}
	if tabs[1].At(4) != 3 {
		t.Errorf("At(4) = %d", tabs[1].At(4))
	}
}

func TestTableLocalSearch(t *testing.T) {
	// A tiny cutoff forces simulation and the local search above n = 3.
	pl := NewPlanner(Options{MaxStates: 20, Sim: SimOptions{Batches: 8, BatchEvents: 1500}})
	tabs, err := pl.Table(context.Background(), paperR2R(), 6, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 6; n++ {
		if tabs[0][n] != 1 || tabs[1][n] < 1 || tabs[1][n] > n {
			t.Errorf("n=%d: (%d, %d)", n, tabs[0][n], tabs[1][n])
		}
	}
	// Exact B*(6) is 3; the simulated search must land next to it.
	if b := tabs[1][6]; b < 2 || b > 4 {
		t.Errorf("B1*(6) = %d, want 3 ± 1", b)
	}
}

func TestEnsemble(t *testing.T) {
	m := Ensemble([]float64{5, 3, 2}, []float64{6, 12, 27.9})
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.P[2][0]-0.5) > 1e-12 || m.C[1][2] != 1 {
		t.Fatalf("P %v C %v", m.P, m.C)
	}
	// N = 1: one request, never waits: 1 token per mean step time.
	r, err := EvaluateExact(context.Background(), m, 1, staticPolicies([]int{1, 1, 1}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := 1000 / (0.5*6 + 0.3*12 + 0.2*27.9)
	if math.Abs(r.TokensPerSecond-want) > 1e-6 {
		t.Errorf("N=1: %.6f, want %.6f", r.TokensPerSecond, want)
	}
	bound, err := m.NoContentionBound(1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(bound-want) > 1e-6 {
		t.Errorf("bound %.6f, want %.6f", bound, want)
	}
}

func TestNoContentionBound(t *testing.T) {
	b, err := paperR2R().NoContentionBound(1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(b-1000/(6.0+0.35*27.9)) > 1e-9 || math.Abs(b-63.43) > 0.005 {
		t.Errorf("bound %.4f, want 63.43", b)
	}
}

func TestValidate(t *testing.T) {
	bad := []Model{
		{},
		{L: []float64{1}, P: [][]float64{{0.5}}, C: [][]float64{{1}}},
		{L: []float64{-1}, P: [][]float64{{1}}, C: [][]float64{{1}}},
		{L: []float64{1, 2}, P: [][]float64{{1}}, C: [][]float64{{1}}},
	}
	for i, m := range bad {
		if err := m.Validate(); !errors.Is(err, ErrInvalidModel) {
			t.Errorf("model %d: %v, want ErrInvalidModel", i, err)
		}
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Simulate(ctx, paperR2R(), 4, staticPolicies([]int{1, 3}), SimOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("simulate: %v", err)
	}
	if _, err := NewPlanner(Options{}).Search(ctx, paperR2R(), 16, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("search: %v", err)
	}
}
