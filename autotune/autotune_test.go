package autotune

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTarget records pushed policies and reports fed commit counts.
type fakeTarget struct {
	mu      sync.Mutex
	pol     sched.Policy
	sets    int
	tokens  uint64
	records int
	reads   int // Stats calls
}

func (f *fakeTarget) SetPolicy(p sched.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pol, f.sets = p, f.sets+1
}

func (f *fakeTarget) Stats() subserver.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return subserver.Stats{Tokens: f.tokens, Records: f.records}
}

func (f *fakeTarget) statsReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *fakeTarget) addTokens(n int) {
	f.mu.Lock()
	f.tokens += uint64(n)
	f.mu.Unlock()
}

// feed reports one tick's worth of R2R observations with routing
// probability p (per 100 small-model request-steps): 10 small steps of
// batch 10 at 6 ms, and the routed requests as large steps of batch 7 at
// 27.9 ms.
func feed(tu *Tuner, tg []*fakeTarget, pPercent int) {
	stay, move := 100-pPercent, pPercent
	for range 10 {
		tu.Step(0, 10, 10, 6*time.Millisecond)
	}
	tu.Routed(0, []int{stay, move})
	tg[0].addTokens(stay)
	left := move
	for left > 0 {
		b := min(7, left)
		tu.Step(1, b, b, 27900*time.Microsecond)
		tu.Routed(1, []int{b, 0})
		left -= b
	}
	tg[1].addTokens(move)
}

func newTest(t *testing.T) (*Tuner, []*fakeTarget, []Target) {
	t.Helper()
	base := []sched.Policy{{MaxWait: 50 * time.Millisecond}, {MaxWait: 50 * time.Millisecond}}
	// The tests step simulated time while planning takes real time: no
	// budget here (TestPlanBudget checks it).
	tu, err := New(base, Options{Budget: time.Hour, PlanTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fakes := []*fakeTarget{{records: 8}, {records: 8}}
	return tu, fakes, []Target{fakes[0], fakes[1]}
}

func wantTables(t *testing.T, p float64, n int) []sched.Table {
	t.Helper()
	tabs, err := perfmodel.NewPlanner(perfmodel.Options{}).Table(context.Background(), perfmodel.R2R(p, 6, 27.9), n, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tabs
}

func TestEstimateAndOneReplanOnDrift(t *testing.T) {
	tu, fakes, targets := newTest(t)
	ctx := context.Background()
	if p := tu.Initial(1); !slices.Equal(p.B, sched.Static(1)) || p.MaxWait != 50*time.Millisecond {
		t.Fatalf("initial policy %+v, want B=1 with the max-wait guard", p)
	}
	now := time.Unix(1000, 0)
	step := func(pPercent int, d time.Duration) {
		for end := now.Add(d); now.Before(end); now = now.Add(100 * time.Millisecond) {
			feed(tu, fakes, pPercent)
			tu.tick(ctx, targets, now)
		}
	}
	step(35, 1500*time.Millisecond)
	if st := tu.Status(); st.Plans != 1 || st.Planned.Span >= 2*time.Second {
		t.Fatalf("after 1.5s: %d plans over %v, want 1 provisional plan", st.Plans, st.Planned.Span)
	}
	step(35, 3500*time.Millisecond)
	st := tu.Status()
	if st.Plans != 2 || st.Err != nil || st.Planned.Span < 2*time.Second {
		t.Fatalf("after 5s of p=0.35: %d plans (err %v) over %v, want the provisional one and one over the full window",
			st.Plans, st.Err, st.Planned.Span)
	}
	est, ok := tu.estimate()
	if !ok {
		t.Fatal("no estimate")
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if d := got - want; d > 1e-9 || d < -1e-9 {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
	near("P[0][1]", est.P[0][1], 0.35)
	near("P[1][0]", est.P[1][0], 1)
	near("L[0]", est.L[0], 6)
	near("L[1]", est.L[1], 27.9)
	near("tokens/step 0", est.TokensPerStep[0], 0.65)
	near("tokens/step 1", est.TokensPerStep[1], 1)
	if st.MaxN != 8 || est.Active != 8 {
		t.Fatalf("planned for n ≤ %d with %d active, want 8", st.MaxN, est.Active)
	}
	want := wantTables(t, 0.35, 8)
	for i, f := range fakes {
		if !slices.Equal(f.pol.B, want[i]) || f.pol.MaxWait != 50*time.Millisecond {
			t.Fatalf("model %d policy %+v, want B=%v with the guard", i, f.pol, want[i])
		}
	}

	step(10, 6*time.Second)
	st = tu.Status()
	if st.Plans != 3 {
		t.Fatalf("after p moved to 0.10: %d plans, want exactly 3", st.Plans)
	}
	near("planned P[0][1]", st.Planned.P[0][1], 0.10)
	want = wantTables(t, 0.10, 8)
	for i, f := range fakes {
		if !slices.Equal(f.pol.B, want[i]) {
			t.Fatalf("model %d table %v, want %v", i, f.pol.B, want[i])
		}
	}
	if fakes[0].sets != 3 || fakes[1].sets != 3 {
		t.Fatalf("policies pushed %d and %d times, want 3", fakes[0].sets, fakes[1].sets)
	}
}

func TestSmallDriftNoReplan(t *testing.T) {
	tu, fakes, targets := newTest(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	for k := range 100 {
		p := 35
		if k >= 40 {
			p = 33 // 6% drift: below the threshold
		}
		feed(tu, fakes, p)
		tu.tick(ctx, targets, now)
		now = now.Add(100 * time.Millisecond)
	}
	// The provisional plan and the full-window one; no re-plan for 6%.
	if st := tu.Status(); st.Plans != 2 {
		t.Fatalf("%d plans, want 2", st.Plans)
	}
}

func TestMoreActiveReplans(t *testing.T) {
	tu, fakes, targets := newTest(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	for _, f := range fakes {
		f.records = 3
	}
	for k := range 60 {
		if k == 30 {
			for _, f := range fakes {
				f.records = 6
			}
		}
		feed(tu, fakes, 35)
		tu.tick(ctx, targets, now)
		now = now.Add(100 * time.Millisecond)
	}
	st := tu.Status()
	// Provisional, full window, then more active requests.
	if st.Plans != 3 || st.MaxN != 8 {
		t.Fatalf("%d plans up to n=%d, want 3 plans up to 8", st.Plans, st.MaxN)
	}
}

func TestNoPlanUntilMeasured(t *testing.T) {
	tu, fakes, targets := newTest(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	// Model 0 routes to model 1, which has not stepped yet.
	for range 30 {
		for range 10 {
			tu.Step(0, 10, 10, 6*time.Millisecond)
		}
		tu.Routed(0, []int{65, 35})
		fakes[0].addTokens(65)
		tu.tick(ctx, targets, now)
		now = now.Add(100 * time.Millisecond)
	}
	if st := tu.Status(); st.Plans != 0 || fakes[0].sets != 0 {
		t.Fatalf("planned without measuring model 1: %+v", st)
	}
}

func TestUnreachedModel(t *testing.T) {
	tu, fakes, targets := newTest(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	for range 30 {
		feed(tu, fakes, 0)
		tu.tick(ctx, targets, now)
		now = now.Add(100 * time.Millisecond)
	}
	st := tu.Status()
	if st.Plans != 2 || st.Err != nil {
		t.Fatalf("%d plans, err %v", st.Plans, st.Err)
	}
	if st.Model.P[1][1] != 1 || st.Model.P[0][1] != 0 {
		t.Fatalf("model %+v", st.Model)
	}
}

func TestObserverDoesNotAllocate(t *testing.T) {
	tu, _, _ := newTest(t)
	moved := []int{3, 2}
	if n := testing.AllocsPerRun(100, func() {
		tu.Step(0, 5, 5, time.Millisecond)
		tu.Routed(0, moved)
		tu.Step(7, 1, 1, time.Millisecond) // out of range: ignored
	}); n != 0 {
		t.Fatalf("%v allocations per observation", n)
	}
}

func TestRunStops(t *testing.T) {
	tu, fakes, targets := newTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tu.Run(ctx, targets) }()
	// Run samples on entry: once it has, it runs.
	testkit.Eventually(t, 10*time.Second, func() bool { return fakes[0].statsReads() > 0 }, "Run never sampled the targets")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := tu.Run(context.Background(), targets[:1]); err == nil {
		t.Fatal("Run with one target for two models: no error")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	base := []sched.Policy{{}, {}}
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("no models: no error")
	}
	if _, err := New(base, Options{Fixed: map[int]int{2: 1}}); err == nil {
		t.Fatal("fixed threshold of a missing model: no error")
	}
	if _, err := New(base, Options{C: [][]float64{{1, 0}}}); err == nil {
		t.Fatal("short commit matrix: no error")
	}
}

// runFor feeds R2R observations with routing probability pPercent and
// ticks every 100 ms of simulated time for d.
func runFor(tu *Tuner, fakes []*fakeTarget, targets []Target, now *time.Time, pPercent int, d time.Duration) {
	for end := now.Add(d); now.Before(end); *now = now.Add(100 * time.Millisecond) {
		feed(tu, fakes, pPercent)
		tu.tick(context.Background(), targets, *now)
	}
}

// TestPlanCacheByLoadLevel: a load level planned before reuses its tables
// instead of planning again, and the cost counters say so.
func TestPlanCacheByLoadLevel(t *testing.T) {
	tu, fakes, targets := newTest(t)
	now := time.Unix(1000, 0)
	runFor(tu, fakes, targets, &now, 35, 5*time.Second)
	c := tu.Status().Cost
	if c.Computed != 1 || c.CacheHits != 1 || c.Seconds <= 0 {
		t.Fatalf("p=0.35 for 5s: cost %+v, want the provisional plan computed and the full-window one cached", c)
	}
	runFor(tu, fakes, targets, &now, 10, 6*time.Second)
	runFor(tu, fakes, targets, &now, 35, 6*time.Second)
	st := tu.Status()
	if st.Cost.Computed != 2 || st.Cost.CacheHits != 2 {
		t.Fatalf("0.35, 0.10, 0.35: cost %+v, want 2 computed and the return to 0.35 cached", st.Cost)
	}
	if want := wantTables(t, 0.35, st.MaxN); !slices.EqualFunc(st.Tables, want, slices.Equal) {
		t.Fatalf("cached tables %v, want %v", st.Tables, want)
	}
}

// TestPlanBudget: once the planning budget is spent, due plans wait; a
// plan over its time limit is cut off and pushes nothing.
func TestPlanBudget(t *testing.T) {
	base := []sched.Policy{{}, {}}
	fakes := []*fakeTarget{{records: 8}, {records: 8}}
	targets := []Target{fakes[0], fakes[1]}
	tu, err := New(base, Options{Budget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	runFor(tu, fakes, targets, &now, 35, 5*time.Second)
	if c := tu.Status().Cost; c.Computed != 1 || c.CacheHits != 0 || c.Deferred == 0 {
		t.Fatalf("1ns budget: cost %+v, want one plan, then the next deferred", c)
	}
	tu, err = New(base, Options{PlanTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	fakes[0].sets, fakes[1].sets = 0, 0
	runFor(tu, fakes, targets, &now, 35, 3*time.Second)
	if st := tu.Status(); st.Cost.TimedOut == 0 || st.Plans != 0 || fakes[1].sets != 0 {
		t.Fatalf("1ns plan limit: %d plans, cost %+v, %d pushes", st.Plans, st.Cost, fakes[1].sets)
	}
}

// idlingTarget answers the next busy Stats calls with records, then
// reports idle.
type idlingTarget struct {
	fakeTarget
	busy int
}

func (f *idlingTarget) Stats() subserver.Stats {
	st := f.fakeTarget.Stats()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy == 0 {
		st.Records = 0
	} else {
		f.busy--
	}
	return st
}

// TestPlanAbandonedWhenIdle: a plan whose load goes away while it runs
// (every sub-server idle) is given up, pushes nothing and says so.
func TestPlanAbandonedWhenIdle(t *testing.T) {
	base := []sched.Policy{{}, {}}
	fakes := []*idlingTarget{{fakeTarget: fakeTarget{records: 32}}, {fakeTarget: fakeTarget{records: 32}}}
	targets := []Target{fakes[0], fakes[1]}
	tu, err := New(base, Options{Budget: time.Hour, PlanTimeout: time.Hour, Tick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	for tu.Status().Cost == (Cost{}) {
		feed(tu, []*fakeTarget{&fakes[0].fakeTarget, &fakes[1].fakeTarget}, 35)
		for _, f := range fakes {
			f.mu.Lock()
			f.busy = 1 // the tick's own sample sees 32 requests; a plan it starts sees them gone
			f.mu.Unlock()
		}
		tu.tick(context.Background(), targets, now)
		now = now.Add(100 * time.Millisecond)
	}
	st := tu.Status()
	if st.Cost.Abandoned != 1 || st.Cost.Computed != 0 || st.Plans != 0 || st.Tables != nil {
		t.Fatalf("load gone during the plan: cost %+v, %d plans, tables %v; want it abandoned", st.Cost, st.Plans, st.Tables)
	}
	if fakes[0].sets+fakes[1].sets != 0 {
		t.Fatalf("%d policy pushes, want none from an abandoned plan", fakes[0].sets+fakes[1].sets)
	}
}
