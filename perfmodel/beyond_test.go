package perfmodel

import (
	"context"
	"math"
	"testing"
)

// TestBeyondStatic compares, for the paper's R2R pair, the static optimum
// B* (B0 = 1), the lookahead launch rule and the optimum over every launch
// policy that decides at batch completions.
func TestBeyondStatic(t *testing.T) {
	ctx := context.Background()
	m := paperR2R()
	pl := NewPlanner(Options{})
	cases := []struct {
		n                     int
		static, look, optimal float64
	}{
		{2, 110.32, 110.32, 110.32},
		{3, 158.12, 158.40, 158.40},
		{4, 207.95, 208.56, 208.56},
	}
	if !testing.Short() {
		// N = 6 (306.21 for both) takes about a minute under -race.
		cases = append(cases, struct {
			n                     int
			static, look, optimal float64
		}{5, 254.16, 255.24, 255.25})
	}
	for _, c := range cases {
		st, err := pl.Optimize(ctx, m, c.n, map[int]int{0: 1})
		if err != nil {
			t.Fatal(err)
		}
		la, err := EvaluateExact(ctx, m, c.n, LookaheadPolicies(m, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		opt, _, err := OptimalThroughput(ctx, m, c.n)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			name      string
			got, want float64
		}{{"static B*", st.TokensPerSecond, c.static}, {"lookahead", la.TokensPerSecond, c.look}, {"optimal", opt, c.optimal}} {
			if math.Abs(v.got-v.want) > 0.01 {
				t.Errorf("N=%d %s: %.3f, want %.2f", c.n, v.name, v.got, v.want)
			}
		}
		if la.TokensPerSecond < st.TokensPerSecond-1e-9 || opt < la.TokensPerSecond-1e-6 {
			t.Errorf("N=%d: want static %.4f ≤ lookahead %.4f ≤ optimal %.4f", c.n, st.TokensPerSecond, la.TokensPerSecond, opt)
		}
	}
}

// TestBeyondStaticLargeN checks the lookahead gain at N = 16 exactly and by
// simulation (the simulator fills sched.State.Incoming the same way).
func TestBeyondStaticLargeN(t *testing.T) {
	ctx := context.Background()
	m := paperR2R()
	st, err := NewPlanner(Options{}).Optimize(ctx, m, 16, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	la, err := EvaluateExact(ctx, m, 16, LookaheadPolicies(m, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.B[1] != 10 || math.Abs(st.TokensPerSecond-777.98) > 0.01 || math.Abs(la.TokensPerSecond-793.26) > 0.01 {
		t.Errorf("N=16: static %v %.3f (want [1 10] 777.98), lookahead %.3f (want 793.26)", st.B, st.TokensPerSecond, la.TokensPerSecond)
	}
	sim, err := Simulate(ctx, m, 16, LookaheadPolicies(m, nil), SimOptions{Seed: 5, Batches: 10, BatchEvents: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(sim.TokensPerSecond - la.TokensPerSecond); d > 3*sim.CIHalfWidth || d > 0.01*la.TokensPerSecond {
		t.Errorf("lookahead N=16: simulated %.2f ± %.2f, exact %.2f", sim.TokensPerSecond, sim.CIHalfWidth, la.TokensPerSecond)
	}
}
