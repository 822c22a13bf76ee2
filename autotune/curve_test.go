package autotune

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// The true step times of the batch-dependent tests: the small model
// decodes in 5 + rows ms; the large model's requests extend 2 tokens
// beyond one (3 rows each) and a step takes 20 + 10/3·rows ms.
var (
	smallCurve = steptime.Curve{Knots: []steptime.Knot{{Rows: 1, MS: 6}, {Rows: 2, MS: 7}}}
	largeCurve = steptime.Curve{Knots: []steptime.Knot{{Rows: 1, MS: 20 + 10.0/3}, {Rows: 2, MS: 20 + 20.0/3}}}
)

// feedCurve reports one tick of R2R at p = 0.35 with those step times:
// small steps of the batch sizes in small, large steps of those in large
// (each step time scaled by scale), the routed requests as P says (the
// tests' small batches sum to 20 requests, of which 7 route).
func feedCurve(tu *Tuner, tg []*fakeTarget, small, large []int, scale float64) {
	ms := func(c steptime.Curve, b, rows int) time.Duration {
		return time.Duration(scale * c.At(b, float64(rows-b), 0) * float64(time.Millisecond))
	}
	reqs := 0
	for _, b := range small {
		tu.Step(0, b, b, ms(smallCurve, b, b))
		reqs += b
	}
	move := int(math.Round(0.35 * float64(reqs)))
	tu.Routed(0, []int{reqs - move, move})
	tg[0].addTokens(reqs - move)
	for _, b := range large {
		tu.Step(1, b, 3*b, ms(largeCurve, b, 3*b))
		tu.Routed(1, []int{b, 0})
		tg[1].addTokens(b)
	}
}

// curveModel is the true throughput model of feedCurve's steps.
func curveModel(pl perfmodel.Placement) perfmodel.Model {
	m := perfmodel.R2R(0.35, 0, 0)
	m.L, m.Steps, m.Extend, m.Placement = nil, []steptime.Curve{smallCurve, largeCurve}, []float64{0, 2}, pl
	m.Delta = 2 * perfmodel.AutoDelta(m)
	return m
}

// runCurve ticks a tuner for d, feeding each tick with feedCurve.
func runCurve(t *testing.T, tu *Tuner, fakes []*fakeTarget, targets []Target, now *time.Time, d time.Duration, small, large []int, scale float64) {
	t.Helper()
	for end := now.Add(d); now.Before(end); *now = now.Add(100 * time.Millisecond) {
		feedCurve(tu, fakes, small, large, scale)
		tu.tick(context.Background(), targets, *now)
	}
}

// TestBatchDependentEstimate: the tuner fits each model's step time
// against its batch from the observed steps, with the observed extends,
// and pushes the tables the true model gives, under either placement.
func TestBatchDependentEstimate(t *testing.T) {
	for _, pl := range []perfmodel.Placement{perfmodel.Partitioned, perfmodel.TimeShared} {
		base := []sched.Policy{{MaxWait: 50 * time.Millisecond}, {MaxWait: 50 * time.Millisecond}}
		// Generous planning limits: the test checks the tables, not how fast
		// they are planned on a loaded machine.
		tu, err := New(base, Options{Placement: pl, PlanTimeout: time.Minute, Budget: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		fakes := []*fakeTarget{{records: 8}, {records: 8}}
		targets := []Target{fakes[0], fakes[1]}
		now := time.Unix(1000, 0)
		runCurve(t, tu, fakes, targets, &now, 3*time.Second, []int{4, 6, 8, 2}, []int{1, 2, 3, 2}, 1)
		est, ok := tu.estimate()
		if !ok {
			t.Fatal("no estimate")
		}
		for b := 1; b <= 8; b++ {
			if got, want := est.Curves[0].At(b, 0, 0), smallCurve.At(b, 0, 0); math.Abs(got-want) > 1e-6 {
				t.Fatalf("small model at %d: %v ms, want %v", b, got, want)
			}
			if got, want := est.Curves[1].At(b, float64(2*b), 0), largeCurve.At(b, float64(2*b), 0); math.Abs(got-want) > 1e-6 {
				t.Fatalf("large model at %d: %v ms, want %v", b, got, want)
			}
		}
		if math.Abs(est.Extend[0]) > 1e-12 || math.Abs(est.Extend[1]-2) > 1e-12 {
			t.Fatalf("extends %v, want [0 2]", est.Extend)
		}
		st := tu.Status()
		if st.Plans != 2 || st.Err != nil || st.Model.Steps == nil || st.Model.Placement != pl {
			t.Fatalf("%s: %d plans (%v), model %+v", pl, st.Plans, st.Err, st.Model)
		}
		want, err := perfmodel.NewPlanner(perfmodel.Options{}).Table(context.Background(), curveModel(pl), 8, map[int]int{0: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range fakes {
			if !slices.Equal(f.pol.B, want[i]) {
				t.Fatalf("%s: model %d table %v, want %v", pl, i, f.pol.B, want[i])
			}
		}
		t.Logf("%s: B*(n) = %v, quantum %v ms", pl, want[1], st.Model.Delta)
	}
}

// TestBatchMixIsNoDrift: other batch sizes on the same curves do not
// re-plan; 20% slower steps do.
func TestBatchMixIsNoDrift(t *testing.T) {
	tu, fakes, targets := newTest(t)
	now := time.Unix(1000, 0)
	runCurve(t, tu, fakes, targets, &now, 3*time.Second, []int{4, 6, 8, 2}, []int{1, 2, 3, 2}, 1)
	runCurve(t, tu, fakes, targets, &now, 6*time.Second, []int{2, 3, 3, 2, 4, 6}, []int{4, 4, 1}, 1)
	if st := tu.Status(); st.Plans != 2 {
		t.Fatalf("%d plans after a change of batch sizes alone, want 2", st.Plans)
	}
	runCurve(t, tu, fakes, targets, &now, 6*time.Second, []int{2, 3, 3, 2, 4, 6}, []int{4, 4, 1}, 1.2)
	if st := tu.Status(); st.Plans != 3 {
		t.Fatalf("%d plans after steps slowed by 20%%, want 3", st.Plans)
	}
}

// TestPrior: with calibrated curves the tuner keeps their shape, scaled to
// the observed steps.
func TestPrior(t *testing.T) {
	base := []sched.Policy{{}, {}}
	prior := []steptime.Curve{smallCurve.Scale(0.5), largeCurve.Scale(2)}
	tu, err := New(base, Options{Prior: prior})
	if err != nil {
		t.Fatal(err)
	}
	fakes := []*fakeTarget{{records: 8}, {records: 8}}
	now := time.Unix(1000, 0)
	// One batch size each: a fit could only give constants.
	runCurve(t, tu, fakes, []Target{fakes[0], fakes[1]}, &now, 3*time.Second, []int{6}, []int{2}, 1)
	est, _ := tu.estimate()
	for b := 1; b <= 8; b++ {
		if got, want := est.Curves[1].At(b, float64(2*b), 0), largeCurve.At(b, float64(2*b), 0); math.Abs(got-want) > 1e-6 {
			t.Fatalf("large model at %d: %v ms, want %v", b, got, want)
		}
	}
	if _, err := New(base, Options{Prior: prior[:1]}); err == nil {
		t.Fatal("one prior curve for two models accepted")
	}
}

// BenchmarkPlanBatchDependent measures one planning round of the tuner at
// N = 16 (as Tuner.plan: B* at n = 16, then the table B*(n) for n ≤ 16,
// one worker): on batch-dependent curves like the fast pair's on the cpu
// engine, under both placements, and on the paper's batch-independent step
// times. With one worker, the time per operation is the round's CPU time.
func BenchmarkPlanBatchDependent(b *testing.B) {
	real := perfmodel.R2R(0.35, 0, 0)
	real.L = nil
	real.Steps = []steptime.Curve{
		{Knots: []steptime.Knot{{Rows: 1, MS: 16}, {Rows: 2, MS: 19}, {Rows: 4, MS: 25}, {Rows: 8, MS: 38}, {Rows: 16, MS: 62}}},
		{Knots: []steptime.Knot{{Rows: 1, MS: 40}, {Rows: 4, MS: 60}, {Rows: 16, MS: 140}, {Rows: 64, MS: 480}}},
	}
	real.Extend = []float64{0.06, 1.86}
	real.Delta = 2 * perfmodel.AutoDelta(real) // as Tuner.Model sets it
	shared := real
	shared.Placement = perfmodel.TimeShared
	for _, c := range []struct {
		name string
		m    perfmodel.Model
	}{{"cpu-like-partitioned", real}, {"cpu-like-time-shared", shared}, {"paper", perfmodel.R2R(0.35, 6, 27.9)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				pl := perfmodel.NewPlanner(perfmodel.Options{Workers: 1})
				if _, err := pl.Optimize(context.Background(), c.m, 16, map[int]int{0: 1}); err != nil {
					b.Fatal(err)
				}
				if _, err := pl.Table(context.Background(), c.m, 16, map[int]int{0: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
