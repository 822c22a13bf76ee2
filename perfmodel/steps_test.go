package perfmodel

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/steptime"
)

func knots(ms ...float64) steptime.Curve {
	c := steptime.Curve{}
	for i, v := range ms {
		c.Knots = append(c.Knots, steptime.Knot{Rows: i + 1, MS: v})
	}
	return c
}

// handModel is R2R with p = 0.4 and batch-dependent steps in whole
// milliseconds: L0(1) = 3, L0(2) = 5, L1(1) = 3, L1(2) = 7, no extends.
func handModel(pl Placement) Model {
	m := R2R(0.4, 0, 0)
	m.L = nil
	m.Steps = []steptime.Curve{knots(3, 5), knots(3, 7)}
	m.Extend = []float64{0, 0}
	m.Delta = 1
	m.Placement = pl
	return m
}

// TestHandTimeShared checks N = 2, B = (1, 1) under time-shared placement
// against the chain worked out by hand from TimeSharedRule. States at
// launches: A both on model 0 (5 ms); B one on model 0 (3 ms) while one
// waits at model 1; C both on model 1 (7 ms); D one on model 1 (3 ms) while
// one waits at model 0. From A: both stay → A, one routes → B (model 0 just
// stepped, so it goes first), both route → C. From B: the request stays →
// D (model 1 was waiting, so it goes first), routes → C. C → A, D → A.
func TestHandTimeShared(t *testing.T) {
	p := 0.4
	a := 1.0
	b := 2 * p * (1 - p) * a
	c := p*p*a + p*b
	d := (1 - p) * b
	tokens := a*2*(1-p) + b*(1-p) + c*2 + d*1
	ms := a*5 + b*3 + c*7 + d*3
	want := 1000 * tokens / ms
	r, err := EvaluateExact(context.Background(), handModel(TimeShared), 2, staticPolicies([]int{1, 1}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.TokensPerSecond-want) > 1e-9 || r.States != 4 {
		t.Fatalf("time-shared: %.12f tok/s over %d states, want %.12f over 4", r.TokensPerSecond, r.States, want)
	}
}

// TestHandPartitioned checks the same system under partitioned placement:
// there one routed request makes both models step at once (state E, both 3
// ms, finishing together): its stay takes both back to A (model 0 gets the
// stayer and the returning request), its hand-off repeats E.
func TestHandPartitioned(t *testing.T) {
	p := 0.4
	a := 1.0
	e := 2 * p * a
	c := p * p * a
	tokens := a*2*(1-p) + e*(2-p) + c*2
	ms := a*5 + e*3 + c*7
	want := 1000 * tokens / ms
	r, err := EvaluateExact(context.Background(), handModel(Partitioned), 2, staticPolicies([]int{1, 1}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.TokensPerSecond-want) > 1e-9 || r.States != 3 {
		t.Fatalf("partitioned: %.12f tok/s over %d states, want %.12f over 3", r.TokensPerSecond, r.States, want)
	}
}

// TestConstantCurvesAreThePaper checks that the batch-independent special
// case, given as curves, reproduces the paper's values exactly as L does.
func TestConstantCurvesAreThePaper(t *testing.T) {
	viaL := paperR2R()
	viaSteps := paperR2R()
	viaSteps.L = nil
	viaSteps.Steps = []steptime.Curve{steptime.Constant(6.0), steptime.Linear(27.9, 0, 0)}
	for _, c := range []struct{ n, b1 int }{{2, 2}, {3, 2}, {4, 3}, {6, 4}} {
		a, err := EvaluateExact(context.Background(), viaL, c.n, staticPolicies([]int{1, c.b1}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := EvaluateExact(context.Background(), viaSteps, c.n, staticPolicies([]int{1, c.b1}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if a.TokensPerSecond != b.TokensPerSecond || a.States != b.States {
			t.Errorf("N=%d B1=%d: L gives %v (%d states), constant curves %v (%d states)", c.n, c.b1, a.TokensPerSecond, a.States, b.TokensPerSecond, b.States)
		}
	}
	// Time-shared, N = 1: one request never waits, so the placement does
	// not matter.
	ts := viaL
	ts.Placement = TimeShared
	a, _ := EvaluateExact(context.Background(), viaL, 1, staticPolicies([]int{1, 1}), Options{})
	b, err := EvaluateExact(context.Background(), ts, 1, staticPolicies([]int{1, 1}), Options{})
	if err != nil || math.Abs(a.TokensPerSecond-b.TokensPerSecond) > 1e-9 {
		t.Fatalf("N=1: partitioned %v, time-shared %v (%v)", a.TokensPerSecond, b.TokensPerSecond, err)
	}
}

// TestExtendsFromTheRoutingProcess: R2R's small model decodes one token a
// step and its large model extends 1/p; a uniform two-model ensemble
// steps each model every second token on average; prompts add their share.
func TestExtendsFromTheRoutingProcess(t *testing.T) {
	m := R2R(0.25, 0, 0)
	m.L, m.Steps = nil, []steptime.Curve{steptime.Linear(6, 0.1, 0.1), steptime.Linear(28, 0.5, 0.2)}
	x, err := m.Extends()
	if err != nil || math.Abs(x[0]) > 1e-12 || math.Abs(x[1]-3) > 1e-12 {
		t.Fatalf("r2r extends %v (%v), want [0 3]", x, err)
	}
	// A launch of 4 requests on the large model appends 4·(1 + 3) rows.
	if got, want := m.StepMS(1, 4, x), 28+0.5*4+0.2*12; math.Abs(got-want) > 1e-12 {
		t.Fatalf("large step of 4: %v ms, want %v", got, want)
	}
	m.Workload = Workload{PromptLen: 64, OutputLen: 192}
	x, _ = m.Extends()
	if math.Abs(x[0]-(4.0/3-1)) > 1e-12 || math.Abs(x[1]-(4*4.0/3-1)) > 1e-12 {
		t.Fatalf("with prompts: %v", x)
	}
	// Rows attend over O·(P + O/2 − e)/(P + O): the small model is visited
	// every token, the large one every 1/p = 4.
	if c0, c1 := m.StepContext(0, x), m.StepContext(1, x); math.Abs(c0-192*159.0/256) > 1e-9 || math.Abs(c1-192*156.0/256) > 1e-9 {
		t.Fatalf("contexts %v %v", c0, c1)
	}
	e := Ensemble([]float64{1, 1}, nil)
	e.Steps = []steptime.Curve{steptime.Linear(5, 0, 1), steptime.Linear(9, 0, 1)}
	if x, err := e.Extends(); err != nil || math.Abs(x[0]-1) > 1e-12 || math.Abs(x[1]-1) > 1e-12 {
		t.Fatalf("ensemble extends %v (%v), want [1 1]", x, err)
	}
	// Constant curves need none, even where the routing chain is reducible.
	c := Model{L: []float64{5, 6}, P: [][]float64{{1, 0}, {0, 1}}, C: [][]float64{{1, 0}, {0, 1}}}
	if x, err := c.Extends(); err != nil || x != nil {
		t.Fatalf("constant model: %v %v", x, err)
	}
}

// batchedR2R is R2R at p = 0.35 with steps that grow with the batch, as a
// real engine's do (the small model flattens, the large one grows faster;
// the large model's requests extend 1/p tokens).
func batchedR2R(pl Placement) Model {
	m := R2R(0.35, 0, 0)
	m.L = nil
	m.Steps = []steptime.Curve{
		{Knots: []steptime.Knot{{Rows: 1, MS: 6}, {Rows: 4, MS: 7.5}, {Rows: 16, MS: 12}}},
		{Knots: []steptime.Knot{{Rows: 1, MS: 20}, {Rows: 4, MS: 26}, {Rows: 16, MS: 52}, {Rows: 64, MS: 160}}, PerSeqMS: 1},
	}
	m.Placement = pl
	return m
}

// TestSimulationMatchesExactBatchDependent checks the simulator against the
// exact chain on batch-dependent steps under both placements.
func TestSimulationMatchesExactBatchDependent(t *testing.T) {
	for _, pl := range []Placement{Partitioned, TimeShared} {
		for _, c := range []struct{ n, b1 int }{{3, 2}, {5, 3}} {
			m := batchedR2R(pl)
			ex, err := EvaluateExact(context.Background(), m, c.n, staticPolicies([]int{1, c.b1}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			sim, err := Simulate(context.Background(), m, c.n, staticPolicies([]int{1, c.b1}), SimOptions{Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			d := math.Abs(sim.TokensPerSecond - ex.TokensPerSecond)
			if d > 3*sim.CIHalfWidth || d > 0.01*ex.TokensPerSecond {
				t.Errorf("%s N=%d B1=%d: sim %.2f ± %.2f, exact %.2f", pl, c.n, c.b1, sim.TokensPerSecond, sim.CIHalfWidth, ex.TokensPerSecond)
			}
		}
	}
}

// TestPlacementsDiffer: at N = 4 the models' overlap under partitioned
// placement beats taking turns with the same step times, and the time-shared
// optimum over every launch order bounds the time-shared thresholds.
func TestPlacementsDiffer(t *testing.T) {
	pl := NewPlanner(Options{})
	part, err := pl.Optimize(context.Background(), batchedR2R(Partitioned), 4, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := pl.Optimize(context.Background(), batchedR2R(TimeShared), 4, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("N=4: partitioned B*=%v %.2f tok/s, time-shared B*=%v %.2f tok/s", part.B, part.TokensPerSecond, shared.B, shared.TokensPerSecond)
	if !(part.TokensPerSecond > shared.TokensPerSecond) {
		t.Fatalf("partitioned %.2f (%v), time-shared %.2f (%v)", part.TokensPerSecond, part.B, shared.TokensPerSecond, shared.B)
	}
	opt, _, err := OptimalThroughput(context.Background(), batchedR2R(TimeShared), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("time-shared optimum over launch orders: %.2f tok/s", opt)
	if opt < shared.TokensPerSecond-1e-6 {
		t.Fatalf("time-shared optimum %.4f below the best thresholds' %.4f", opt, shared.TokensPerSecond)
	}
}

// TestInterferenceFolds: a factor of 1.04 is ignored, 1.2 slows partitioned
// steps (and so throughput), and time-shared placement never folds it.
func TestInterferenceFolds(t *testing.T) {
	base := batchedR2R(Partitioned)
	eval := func(m Model) float64 {
		r, err := EvaluateExact(context.Background(), m, 3, staticPolicies([]int{1, 2}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r.TokensPerSecond
	}
	b := eval(base)
	small := base
	small.Interference = []float64{1.04, 1.04}
	big := base
	big.Interference = []float64{1.2, 1.2}
	if eval(small) != b || !(eval(big) < b*0.9) {
		t.Fatalf("no interference %v, 4%% %v, 20%% %v", b, eval(small), eval(big))
	}
	ts := batchedR2R(TimeShared)
	tsi := ts
	tsi.Interference = []float64{1.2, 1.2}
	if eval(ts) != eval(tsi) {
		t.Fatal("time-shared placement folded interference")
	}
}

// TestPlannerKeepsPlacementsApart: the planner's cache tells the
// placements apart.
func TestPlannerKeepsPlacementsApart(t *testing.T) {
	pl := NewPlanner(Options{})
	a, err := pl.Evaluate(context.Background(), batchedR2R(Partitioned), 3, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pl.Evaluate(context.Background(), batchedR2R(TimeShared), 3, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if a.TokensPerSecond == b.TokensPerSecond {
		t.Fatalf("both placements %v", a.TokensPerSecond)
	}
}

func TestQueueCodec(t *testing.T) {
	for _, q := range [][]int{nil, {0}, {2, 0}, {1, 2, 0}} {
		x := encodeQueue(q, 3)
		got := decodeQueue(x, 3, nil)
		if len(got) != len(q) {
			t.Fatalf("%v -> %d -> %v", q, x, got)
		}
		for i := range q {
			if got[i] != q[i] {
				t.Fatalf("%v -> %d -> %v", q, x, got)
			}
		}
	}
	if r, err := queueRadix(3); err != nil || r != 64 {
		t.Fatalf("radix %d %v", r, err)
	}
}

func TestAutoDelta(t *testing.T) {
	if d := AutoDelta(paperR2R()); d != DefaultDelta {
		t.Fatalf("paper: %v", d)
	}
	m := batchedR2R(Partitioned) // shortest one-request step 6 ms: 0.3 → 0.2
	if d := AutoDelta(m); d != 0.2 {
		t.Fatalf("6 ms: %v", d)
	}
	m.Steps[0] = steptime.Linear(20, 1, 1) // 21 ms: 1.05 → 1
	if d := AutoDelta(m); d != 1 {
		t.Fatalf("21 ms: %v", d)
	}
	m.Steps[0] = steptime.Linear(12, 1, 1) // 13 ms: 0.65 → 0.5
	if d := AutoDelta(m); d != 0.5 {
		t.Fatalf("13 ms: %v", d)
	}
	m.Steps[0] = steptime.Linear(0.5, 0.5, 0) // 1 ms: 0.05 → at least 0.1
	if d := AutoDelta(m); d != DefaultDelta {
		t.Fatalf("1 ms: %v", d)
	}
}

// TestTableLocalSearchExact: the table's local search over exact chains
// (beyond Options.SearchStates) finds the exhaustive search's thresholds
// on batch-dependent steps.
func TestTableLocalSearchExact(t *testing.T) {
	for _, p := range []Placement{Partitioned, TimeShared} {
		m := batchedR2R(p)
		m.Delta = 0.5
		all, err := NewPlanner(Options{SearchStates: math.MaxInt}).Table(context.Background(), m, 10, map[int]int{0: 1})
		if err != nil {
			t.Fatal(err)
		}
		local, err := NewPlanner(Options{SearchStates: 1}).Table(context.Background(), m, 10, map[int]int{0: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(all[1], local[1]) {
			t.Fatalf("%s: exhaustive %v, local search %v", p, all[1], local[1])
		}
		t.Logf("%s: B1*(n) = %v", p, all[1])
	}
}

// TestComparePlacements: with equal step times overlap wins; with steps
// three times faster on every core, taking turns wins.
func TestComparePlacements(t *testing.T) {
	pl := NewPlanner(Options{})
	m := batchedR2R(Partitioned)
	m.Delta = 0.5
	got, rs, err := pl.ComparePlacements(context.Background(), m, m, 4, map[int]int{0: 1})
	if err != nil || got != Partitioned || !(rs[0].TokensPerSecond > rs[1].TokensPerSecond) {
		t.Fatalf("equal steps: %s %+v %v", got, rs, err)
	}
	fast := m
	fast.Steps = []steptime.Curve{m.Steps[0].Scale(1.0 / 3), m.Steps[1].Scale(1.0 / 3)}
	got, rs, err = pl.ComparePlacements(context.Background(), m, fast, 4, map[int]int{0: 1})
	if err != nil || got != TimeShared || !(rs[1].TokensPerSecond > rs[0].TokensPerSecond) {
		t.Fatalf("faster shared steps: %s %+v %v", got, rs, err)
	}
}

// TestStepOverTheExtendsSpread prices a step on a staircase curve (flat to
// 16 rows, double from 17) as the expectation over the extends' spread: the
// sum over b requests of geometric extra rows, computed here by convolving
// b geometric distributions.
func TestStepOverTheExtendsSpread(t *testing.T) {
	stairs := steptime.Curve{Knots: []steptime.Knot{{Rows: 1, MS: 10}, {Rows: 16, MS: 10}, {Rows: 17, MS: 20}, {Rows: 64, MS: 20}}}
	m := R2R(0.25, 0, 0)
	m.L, m.Steps = nil, []steptime.Curve{stairs, stairs}
	x, err := m.Extends()
	if err != nil || math.Abs(x[1]-3) > 1e-12 {
		t.Fatalf("extends %v (%v)", x, err)
	}
	const b = 4
	dist := geometricSum(b, 1/(1+x[1]))
	want := 0.0
	for k, p := range dist {
		want += p * stairs.At(b, float64(k), m.StepContext(1, x))
	}
	got := m.StepMS(1, b, x)
	if math.Abs(got-want) > 1e-9 {
		t.Fatalf("step of %d on the stairs: %v ms, want %v", b, got, want)
	}
	// 4 requests append 16 rows on average: at the mean the curve says 10
	// ms, but half the launches pass 16 rows.
	if at := stairs.At(b, float64(b)*x[1], 0); at != 10 || got < 14 || got > 16 {
		t.Fatalf("at the mean rows %v ms, expected %v ms", at, got)
	}
}

// TestStepOverThePromptsSpread prices a step with a workload of prompts:
// the extends since a request's last visit spread as geometric rows (the
// convolution of b geometric distributions), and each request at its first
// visit, with probability e/OutputLen, appending its whole prompt on top
// (binomial over the batch).
func TestStepOverThePromptsSpread(t *testing.T) {
	stairs := steptime.Curve{Knots: []steptime.Knot{{Rows: 1, MS: 10}, {Rows: 16, MS: 10}, {Rows: 17, MS: 20}, {Rows: 64, MS: 20}, {Rows: 65, MS: 30}, {Rows: 512, MS: 30}}}
	const promptLen, outputLen, b = 8, 32, 4
	m := R2R(0.25, 0, 0)
	m.L, m.Steps = nil, []steptime.Curve{stairs, stairs}
	m.Workload = Workload{PromptLen: promptLen, OutputLen: outputLen}
	x, err := m.Extends()
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []float64{1, 4} { // tokens a visit appends after the first, from the routing alone
		if want := e*float64(promptLen+outputLen)/outputLen - 1; math.Abs(x[i]-want) > 1e-12 {
			t.Fatalf("model %d extends %v, want %v", i, x[i], want)
		}
		dist := geometricSum(b, 1/e)
		pi := e / outputLen
		want, mean := 0.0, 0.0
		for prompts := 0; prompts <= b; prompts++ {
			pk := binomial(b, prompts, pi)
			for k, p := range dist {
				rows := float64(k + prompts*promptLen)
				want += pk * p * stairs.At(b, rows, m.StepContext(i, x))
				mean += pk * p * rows
			}
		}
		if math.Abs(mean-float64(b)*x[i]) > 1e-6 {
			t.Fatalf("model %d: the spread's mean rows %v, want b·x = %v", i, mean, float64(b)*x[i])
		}
		if got := m.StepMS(i, b, x); math.Abs(got-want) > 1e-9 {
			t.Fatalf("model %d: step of %d on the stairs %v ms, want %v", i, b, got, want)
		}
	}
	// The small model alone: most steps are four decodes (10 ms), a few
	// carry a prompt and pass 16 rows; spread as geometric, the same mean
	// would pass 16 rows in most.
	one := Model{Steps: []steptime.Curve{stairs}, P: [][]float64{{1}}, C: [][]float64{{1}}, Workload: m.Workload}
	tput, err := Alone(one, 0, b)
	if err != nil {
		t.Fatal(err)
	}
	if step := 1000 * b / tput; step < 10 || step > 11.5 {
		t.Fatalf("alone, a step of %d: %v ms, want 10 ms plus the prompts' share", b, step)
	}
}

// geometricSum returns the distribution of the sum of b geometric
// variables of success probability q (P(k) = q(1−q)^k), by convolution,
// over 0..399.
func geometricSum(b int, q float64) []float64 {
	const maxK = 400
	geo := make([]float64, maxK)
	for k := range geo {
		geo[k] = q * math.Pow(1-q, float64(k))
	}
	dist := []float64{1}
	for range b {
		next := make([]float64, maxK)
		for i, p := range dist {
			for k := 0; i+k < maxK; k++ {
				next[i+k] += p * geo[k]
			}
		}
		dist = next
	}
	return dist
}
