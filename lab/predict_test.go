package lab

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
)

// TestPredictEachSystem checks each system's prediction on the paper's
// R2R pair against the figures of docs/results/routing-throughput.md and the closed forms.
func TestPredictEachSystem(t *testing.T) {
	ctx := context.Background()
	setup := bench.Setup{Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(3)}}}
	m := perfmodel.R2R(0.35, 6.0, 27.9)
	pl := perfmodel.NewPlanner(perfmodel.Options{})
	out := []bench.Summary{
		{System: "tokenrouter", Concurrency: 4, TokensPerSecond: 200},
		{System: "tokenrouter-auto", Concurrency: 8},
		{System: "tokenrouter-b1", Concurrency: 4},
		{System: "lockstep", Concurrency: 16},
		{System: "slm-only", Concurrency: 4},
		{System: "llm-only", Concurrency: 4},
		{System: "std-serving", Concurrency: 4},
		{System: "query-level", Concurrency: 4},
		{System: "served=http://127.0.0.1:1", Concurrency: 4},
		{System: "tokenrouter", Concurrency: 2}, // the runtime clamps B to N: (1,2)
	}
	if err := AddPredictions(ctx, setup, pl, m, nil, out); err != nil {
		t.Fatal(err)
	}
	for k, want := range []struct {
		tps float64
		b   []int
	}{{207.95, []int{1, 3}}, {399.0, []int{1, 5}}, {187.19, []int{1, 1}}, {472.4, nil}, {4000 / 6.0, nil}, {4000 / 27.9, nil}, {}, {}, {}, {110.32, []int{1, 2}}} {
		r := out[k]
		if math.Abs(r.Predicted-want.tps) > 0.05 || len(r.PredictedB) != len(want.b) || (want.b != nil && r.PredictedB[1] != want.b[1]) {
			t.Errorf("%s N=%d: predicted %.2f B %v (%s), want %.2f B %v", r.System, r.Concurrency, r.Predicted, r.PredictedB, r.PredictedMethod, want.tps, want.b)
		}
	}
	if r := out[0]; math.Abs(r.MeasuredOverPredicted-200/r.Predicted) > 1e-12 || r.PredictedMethod != string(perfmodel.MethodExact) {
		t.Errorf("ratio %v, method %q", r.MeasuredOverPredicted, r.PredictedMethod)
	}
	// Thresholds that can deadlock have no prediction.
	stuck := bench.Setup{Launch: sched.Launch{Tables: []sched.Table{sched.Static(2), sched.Static(2)}}}
	if p, ok, err := Predict(ctx, stuck, pl, m, "tokenrouter", 2); err != nil || ok {
		t.Errorf("(2,2) at N=2: %+v %v %v", p, ok, err)
	}
	// Automatic thresholds in tokenrouter's launch predict B*.
	auto := bench.Setup{Launch: sched.Launch{Auto: true}}
	if p, ok, err := Predict(ctx, auto, pl, m, "tokenrouter", 16); err != nil || !ok || p.B[1] != 10 || math.Abs(p.TokensPerSecond-778.0) > 0.05 {
		t.Errorf("tokenrouter with auto thresholds at N=16: %+v %v %v; docs/results/routing-throughput.md has (1,10) at 778.0", p, ok, err)
	}
}

// TestPredictionAtStepSpeed prices a run's steps on the model's curves and
// predicts again at the speed the engines stepped: a small model that
// stepped at twice its 6.0 ms is predicted as the pair (12.0, 27.9).
func TestPredictionAtStepSpeed(t *testing.T) {
	ctx := context.Background()
	setup := bench.Setup{Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(3)}}}
	pl := perfmodel.NewPlanner(perfmodel.Options{})
	steps := &bench.StepTally{}
	for range 10 {
		steps.Step(0, 4, 4, 12*time.Millisecond)
		steps.Step(1, 2, 5, 27900*time.Microsecond)
	}
	round := &bench.StepTally{}
	round.Add(steps)
	round.Add(steps)
	if round.Steps(0) != 20 || round.Steps(1) != 20 || round.Steps(2) != 0 {
		t.Fatalf("merged tally: %d, %d, %d steps", round.Steps(0), round.Steps(1), round.Steps(2))
	}
	rows := []bench.Row{{System: "tokenrouter", Concurrency: 4, Steps: round}, {System: "std-serving", Concurrency: 4, Steps: round}}
	out := []bench.Summary{{System: "tokenrouter", Concurrency: 4, TokensPerSecond: 150}, {System: "std-serving", Concurrency: 4}}
	if err := AddPredictions(ctx, setup, pl, perfmodel.R2R(0.35, 6.0, 27.9), rows, out); err != nil {
		t.Fatal(err)
	}
	want, _, err := Predict(ctx, setup, pl, perfmodel.R2R(0.35, 12.0, 27.9), "tokenrouter", 4)
	if err != nil {
		t.Fatal(err)
	}
	r := out[0]
	if len(r.StepOverCurve) != 2 || math.Abs(r.StepOverCurve[0]-2) > 1e-9 || math.Abs(r.StepOverCurve[1]-1) > 1e-9 {
		t.Fatalf("step over curve %v, want [2 1]", r.StepOverCurve)
	}
	if math.Abs(r.PredictedAtStepSpeed-want.TokensPerSecond) > 1e-9 || r.PredictedAtStepSpeed >= r.Predicted ||
		math.Abs(r.MeasuredOverAtStepSpeed-150/want.TokensPerSecond) > 1e-12 {
		t.Errorf("at step speed %.2f (ratio %.3f), want %.2f below %.2f", r.PredictedAtStepSpeed, r.MeasuredOverAtStepSpeed, want.TokensPerSecond, r.Predicted)
	}
	if out[1].StepOverCurve != nil || out[1].PredictedAtStepSpeed != 0 {
		t.Errorf("std-serving has no prediction, got %+v", out[1])
	}
}

// TestOverCurveAlone prices a run where one model stepped alone without
// the partitioned placement's interference (nothing stepped beside it),
// and a run of both with it.
func TestOverCurveAlone(t *testing.T) {
	m := perfmodel.R2R(0.35, 6.0, 27.9)
	m.Interference = []float64{1.5, 1.5}
	alone, both := &bench.StepTally{}, &bench.StepTally{}
	for range 5 {
		alone.Step(1, 1, 1, 27900*time.Microsecond)
		both.Step(0, 1, 1, 6*time.Millisecond)
		both.Step(1, 1, 1, 27900*time.Microsecond)
	}
	for _, c := range []struct {
		tally *bench.StepTally
		want  []float64
	}{{alone, []float64{0, 1}}, {both, []float64{1 / 1.5, 1 / 1.5}}} {
		r, err := c.tally.OverCurve(m)
		if err != nil || len(r) != 2 || math.Abs(r[0]-c.want[0]) > 1e-9 || math.Abs(r[1]-c.want[1]) > 1e-9 {
			t.Errorf("over curve %v (%v), want %v", r, err, c.want)
		}
	}
}

// TestPredictSpeculation: with a speculation or a bus delay set, the
// tokenrouter prediction is the speculative model's: full agreement at a
// depth no result reaches keeps every request in every small-model step
// (N/T0), and a request alone pays a 20 ms bus delay twice per hand-off.
func TestPredictSpeculation(t *testing.T) {
	ctx := context.Background()
	pl := perfmodel.NewPlanner(perfmodel.Options{})
	m := perfmodel.R2R(0.35, 6.0, 27.9)
	for _, c := range []struct {
		setup bench.Setup
		n     int
		want  float64
	}{
		{bench.Setup{Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(3)}}, Speculation: perfmodel.Speculation{Agree: 1, Depth: 20}}, 4, 4000 / 6.0},
		{bench.Setup{Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(1)}}, BusDelay: 20 * time.Millisecond}, 1, 1000 / (6.0 + 0.35*(27.9+40))},
	} {
		p, ok, err := Predict(ctx, c.setup, pl, m, "tokenrouter", c.n)
		if err != nil || !ok || p.Method != string(perfmodel.MethodSimulation) || math.Abs(p.TokensPerSecond-c.want) > max(3*p.CIHalfWidth, 1e-6*c.want) {
			t.Errorf("N=%d: %+v %v %v, want %.2f simulated", c.n, p, ok, err, c.want)
		}
	}
}
