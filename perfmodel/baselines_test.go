package perfmodel

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/steptime"
)

// baselinePair is R2R at p with linear step curves: L0(b, e, c) = 4 +
// 1·b + 0.5·e + 0.01·(b+e)·c and L1(b, e, c) = 10 + 2·b + 1·e +
// 0.02·(b+e)·c, and interference factors of 2 that no baseline may apply.
func baselinePair(p float64, w Workload) Model {
	m := R2R(p, 0, 0)
	m.L = nil
	c0, c1 := steptime.Linear(4, 1, 0.5), steptime.Linear(10, 2, 1)
	c0.PerRowContextMS, c1.PerRowContextMS = 0.01, 0.02
	m.Steps = []steptime.Curve{c0, c1}
	m.Interference = []float64{2, 2}
	m.Workload = w
	return m
}

func TestLockstepFormula(t *testing.T) {
	paper := R2R(0.35, 6.0, 27.9)
	prompts := Workload{PromptLen: 16, OutputLen: 48}
	for _, c := range []struct {
		name string
		m    Model
		n    int
		want float64
	}{
		// docs/results/routing-throughput.md's lockstep formula: n / (L0 + (1 − 0.65^n)·L1).
		{"paper N=1", paper, 1, 1000 / (6 + 0.35*27.9)},
		{"paper N=4", paper, 4, 138.3},
		{"paper N=8", paper, 8, 242.3},
		{"paper N=16", paper, 16, 472.4},
		// p = 0.5, no contexts: x0 = 0, x1 = 1/p − 1 = 1. L0(2) = 6;
		// L1(k) = 10 + 2k + k; K ~ Bin(2, ½): ½·13 + ¼·16 = 10.5.
		{"linear p=0.5 N=2", baselinePair(0.5, Workload{}), 2, 2000 / (6 + 10.5)},
		// p = 0.25: x1 = 3, L0(3) = 7, L1(k) = 10 + 5k; K ~ Bin(3, ¼):
		// 27/64·15 + 9/64·20 + 1/64·25.
		{"linear p=0.25 N=3", baselinePair(0.25, Workload{}), 3, 3000 / (7 + 27.0/64*15 + 9.0/64*20 + 1.0/64*25)},
		// Prompts of 16, outputs of 48: extends scale by 64/48, so x0 =
		// 1/3 and x1 = 2·4/3 − 1 = 5/3; contexts 48·(16+24−e)/64 with e =
		// 1 on model 0 (29.25) and 2 on model 1 (28.5). L0(2) = 4 + 2 +
		// 0.5·2/3 + 0.01·(8/3)·29.25 = 7.11333…; L1(k) = 10 + 2k + 5k/3 +
		// 0.02·(8k/3)·28.5 = 10 + 5.18666…·k; ½·L1(1) + ¼·L1(2) =
		// 12.68666…; the sum is 19.8.
		{"prompts p=0.5 N=2", baselinePair(0.5, prompts), 2, 2000 / 19.8},
	} {
		got, err := Lockstep(c.m, c.n)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tol := 1e-9 * c.want
		if c.m.Steps == nil && c.n > 1 {
			tol = 0.05 // the figures of docs/results have one decimal
		}
		if math.Abs(got-c.want) > tol {
			t.Errorf("%s: %.6f tok/s, want %.6f", c.name, got, c.want)
		}
	}
}

func TestLockstepBatchIndependentClosedForm(t *testing.T) {
	for _, p := range []float64{0, 0.1, 0.35, 1} {
		for n := 1; n <= 32; n++ {
			got, err := Lockstep(R2R(p, 6.0, 27.9), n)
			want := 1000 * float64(n) / (6.0 + (1-math.Pow(1-p, float64(n)))*27.9)
			if err != nil || math.Abs(got-want) > 1e-9*want {
				t.Fatalf("p=%v N=%d: %v, %v; want %v", p, n, got, err, want)
			}
		}
	}
}

func TestAloneFormula(t *testing.T) {
	paper := R2R(0.35, 6.0, 27.9)
	for _, c := range []struct {
		name string
		m    Model
		i, n int
		want float64
	}{
		{"paper slm N=4", paper, 0, 4, 4000 / 6.0},
		{"paper llm N=16", paper, 1, 16, 16000 / 27.9},
		// No contexts, no prompts: L0(4) = 4 + 4, L1(3) = 10 + 6.
		{"linear slm N=4", baselinePair(0.35, Workload{}), 0, 4, 4000 / 8.0},
		{"linear llm N=3", baselinePair(0.35, Workload{}), 1, 3, 3000 / 16.0},
		// Prompts of 16, outputs of 48: x = 1/3, context 48·39/64 =
		// 29.25. L0(4) = 4 + 4 + 0.5·4/3 + 0.01·(16/3)·29.25 =
		// 10.22666…; L1(4) = 10 + 8 + 4/3 + 0.02·(16/3)·29.25 = 22.45333….
		{"prompts slm N=4", baselinePair(0.35, Workload{PromptLen: 16, OutputLen: 48}), 0, 4, 4000 / (8 + 2.0/3 + 1.56)},
		{"prompts llm N=4", baselinePair(0.35, Workload{PromptLen: 16, OutputLen: 48}), 1, 4, 4000 / (18 + 4.0/3 + 3.12)},
	} {
		got, err := Alone(c.m, c.i, c.n)
		if err != nil || math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("%s: %.6f tok/s (%v), want %.6f", c.name, got, err, c.want)
		}
	}
}

func TestBaselineErrors(t *testing.T) {
	if _, err := Lockstep(Ensemble([]float64{1, 1}, []float64{5, 9}), 4); !errors.Is(err, ErrNoFormula) {
		t.Errorf("lockstep of an ensemble: %v", err)
	}
	if _, err := Lockstep(R2R(0.35, 6, 27.9), 0); err == nil {
		t.Error("lockstep at N = 0")
	}
	if _, err := Alone(R2R(0.35, 6, 27.9), 2, 4); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("model 2 of 2: %v", err)
	}
	if _, err := Alone(R2R(1.5, 6, 27.9), 0, 4); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("p = 1.5: %v", err)
	}
}

func TestTokenRouterPrediction(t *testing.T) {
	ctx := context.Background()
	pl := NewPlanner(Options{Sim: SimOptions{Seed: 1, Batches: 4, BatchEvents: 2000}})
	m := R2R(0.35, 6.0, 27.9)
	static, err := pl.TokenRouter(ctx, m, 4, []int{1, 3}, nil, 0)
	if err != nil || static.Method != MethodExact || math.Abs(static.TokensPerSecond-207.95) > 0.01 {
		t.Fatalf("static (1,3) at N=4: %+v, %v; docs/results/routing-throughput.md has 207.95", static, err)
	}
	best, err := pl.TokenRouter(ctx, m, 8, nil, map[int]int{0: 1}, 0)
	if err != nil || best.B[0] != 1 || best.B[1] != 5 || math.Abs(best.TokensPerSecond-399.0) > 0.05 {
		t.Fatalf("auto at N=8: %+v, %v; docs/results/routing-throughput.md has (1,5) at 399.0", best, err)
	}
	b1, err := pl.TokenRouter(ctx, m, 4, []int{1, 1}, nil, 50*time.Millisecond)
	if err != nil || b1.Method != MethodExact || math.Abs(b1.TokensPerSecond-187.19) > 0.01 {
		t.Fatalf("B = 1 with a max-wait guard: %+v, %v; the guard cannot fire", b1, err)
	}
	// A 1 ms guard fires long before model 1 gathers 3 requests: the
	// simulated prediction falls toward B = (1,1)'s.
	guarded, err := pl.TokenRouter(ctx, m, 4, []int{1, 3}, nil, time.Millisecond)
	if err != nil || guarded.Method != MethodSimulation || guarded.B[1] != 3 || guarded.TokensPerSecond > static.TokensPerSecond-5 {
		t.Fatalf("(1,3) with a 1 ms guard: %+v, %v (without: %.2f)", guarded, err, static.TokensPerSecond)
	}
}
