package timeshare

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// recorder wraps fake engines so that their steps write what happens to
// one shared log: which model stepped, and how many steps ran at once.
type recorder struct {
	mu      sync.Mutex
	order   []int
	inside  atomic.Int32
	overlap atomic.Int32
}

// engine returns a fake engine for model whose steps record themselves;
// hold, if not nil, is received from inside every step before it ends.
func (r *recorder) engine(model int, hold <-chan struct{}) *enginetest.Fake {
	f := enginetest.NewFake(1 << 12)
	f.StepHook = func(ctx context.Context, _ []engine.Input) error {
		if r.inside.Add(1) > 1 {
			r.overlap.Add(1)
		}
		defer r.inside.Add(-1)
		r.mu.Lock()
		r.order = append(r.order, model)
		r.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	return f
}

func (r *recorder) steps() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// waiting is how many steps wait at g.
func waiting(g *Gate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

func step(ctx context.Context, e engine.Engine, seq engine.SeqID) error {
	out := make([]engine.Output, 1)
	return e.Step(ctx, []engine.Input{{Seq: seq, Tokens: []int32{1}}}, out)
}

// TestNoOverlap steps four gated engines from four goroutines and checks
// that no two steps ever ran at once, and that every step ran.
func TestNoOverlap(t *testing.T) {
	var r recorder
	g := New()
	var wg sync.WaitGroup
	const models, steps = 4, 200
	for m := range models {
		e := Wrap(r.engine(m, nil), g.Join(m))
		wg.Go(func() {
			for i := range steps {
				if err := step(context.Background(), e, engine.SeqID(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := r.overlap.Load(); n != 0 {
		t.Fatalf("%d steps ran while another was running", n)
	}
	if got := len(r.steps()); got != models*steps {
		t.Fatalf("%d steps ran, want %d", got, models*steps)
	}
	if g.busy || waiting(g) != 0 {
		t.Fatalf("gate left busy=%v with %d waiting", g.busy, waiting(g))
	}
}

// TestFIFO holds the gate with model 0's step, lets models 3, 1, 2 arrive
// in that order, and checks that they step in that order once it ends.
func TestFIFO(t *testing.T) {
	var r recorder
	g := New()
	hold := make(chan struct{})
	done := make(chan int, 4)
	start := func(m int, h <-chan struct{}) {
		e := Wrap(r.engine(m, h), g.Join(m))
		go func() {
			if err := step(context.Background(), e, 1); err != nil {
				t.Error(err)
			}
			done <- m
		}()
	}
	start(0, hold)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(r.steps()) == 1 }, "model 0 never stepped")
	for i, m := range []int{3, 1, 2} {
		start(m, nil)
		testkit.Eventually(t, 5*time.Second, func() bool { return waiting(g) == i+1 }, "model %d never queued", m)
	}
	if got := r.steps(); !slices.Equal(got, []int{0}) {
		t.Fatalf("steps while the gate was held: %v", got)
	}
	close(hold)
	for range 4 {
		testkit.Receive(t, done, 5*time.Second)
	}
	if got := r.steps(); !slices.Equal(got, []int{0, 3, 1, 2}) {
		t.Fatalf("steps ran in order %v, want 0 3 1 2 (arrival order)", got)
	}
	if r.overlap.Load() != 0 {
		t.Fatal("steps overlapped")
	}
}

// TestCancelWhileWaiting cancels a step waiting at the gate: it returns
// the context's error at once, without stepping, and leaves its place to
// the steps behind it.
func TestCancelWhileWaiting(t *testing.T) {
	var r recorder
	g := New()
	hold := make(chan struct{})
	holder := Wrap(r.engine(0, hold), g.Join(0))
	fake1 := r.engine(1, nil)
	waiter := Wrap(fake1, g.Join(1))
	after := Wrap(r.engine(2, nil), g.Join(2))
	held := make(chan error, 1)
	go func() { held <- step(context.Background(), holder, 1) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return len(r.steps()) == 1 }, "model 0 never stepped")

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { cancelled <- step(ctx, waiter, 1) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return waiting(g) == 1 }, "model 1 never queued")
	third := make(chan error, 1)
	go func() { third <- step(context.Background(), after, 1) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return waiting(g) == 2 }, "model 2 never queued")

	cancel()
	if err := testkit.Receive(t, cancelled, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait returned %v", err)
	}
	if waiting(g) != 1 || fake1.Sequences() != 0 {
		t.Fatalf("after the cancel: %d waiting, model 1 holds %d sequences", waiting(g), fake1.Sequences())
	}
	close(hold)
	for _, c := range []chan error{held, third} {
		if err := testkit.Receive(t, c, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.steps(); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("steps %v, want 0 then 2", got)
	}
	// The gate is open again: a new step runs at once.
	if err := step(context.Background(), waiter, 1); err != nil || waiting(g) != 0 || g.busy {
		t.Fatalf("step after the cancel: %v, %d waiting, busy %v", err, waiting(g), g.busy)
	}
}

// TestCancelRacingHandOver cancels waiting steps while the gate is handed
// on, many times: whichever wins, the gate ends open and nothing overlaps.
func TestCancelRacingHandOver(t *testing.T) {
	var r recorder
	g := New()
	a := Wrap(r.engine(0, nil), g.Join(0))
	b := Wrap(r.engine(1, nil), g.Join(1))
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 2)
		go func() { errs <- step(context.Background(), a, engine.SeqID(i)) }()
		go func() { errs <- step(ctx, b, engine.SeqID(i)) }()
		cancel()
		for range 2 {
			if err := testkit.Receive(t, errs, 5*time.Second); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
	}
	if r.overlap.Load() != 0 || g.busy || waiting(g) != 0 {
		t.Fatalf("overlap %d, busy %v, %d waiting", r.overlap.Load(), g.busy, waiting(g))
	}
}

func TestNextIsFirstCome(t *testing.T) {
	if i := Next([]Waiter{{Model: 1, Arrival: 4}, {Model: 0, Arrival: 5}}); i != 0 {
		t.Fatalf("Next picked %d", i)
	}
}

// TestConformance runs the engine suite on gated engines: the gate keeps
// the engine contract and the wrapped engine's Embedder.
func TestConformance(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		g := New()
		enginetest.Run(t, enginetest.Options{
			New:                  func(testing.TB) engine.Engine { return Wrap(enginetest.NewFake(enginetest.MinContext), g.Join(0)) },
			Simulated:            true,
			RejectsUnknownTokens: true,
			SamplesLogits:        true,
			InUse:                func(e engine.Engine) int { return e.(Engine).Unwrap().(*enginetest.Fake).Sequences() },
		})
	})
	t.Run("sim", func(t *testing.T) {
		g := New()
		enginetest.Run(t, enginetest.Options{
			New: func(testing.TB) engine.Engine {
				return Wrap(sim.New(sim.Config{Name: "s", Seed: 1, ContextLength: 256}), g.Join(1))
			},
			Simulated: true,
			Embedder:  true,
			AllocFree: true,
			InUse:     func(e engine.Engine) int { return e.(Engine).Unwrap().(*sim.Engine).Sequences() },
		})
	})
}

// TestTurnHoldsTheGate: steps inside a turn pass straight through, and
// another member's step waits until the turn ends.
func TestTurnHoldsTheGate(t *testing.T) {
	var r recorder
	g := New()
	a := Wrap(r.engine(0, nil), g.Join(0))
	b := Wrap(r.engine(1, nil), g.Join(1))
	end, err := a.Turn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- step(context.Background(), b, 1) }()
	testkit.Until(t, 5*time.Second, func() error {
		if waiting(g) != 1 {
			return errors.New("model 1's step is not waiting at the gate")
		}
		return nil
	})
	for i := range 3 {
		if err := step(context.Background(), a, engine.SeqID(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	end()
	if err := testkit.Receive(t, done, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.steps(); !slices.Equal(got, []int{0, 0, 0, 1}) {
		t.Fatalf("steps by model %v, want the turn's three, then model 1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	end, err = b.Turn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := a.Turn(ctx); err == nil {
		t.Fatal("a turn was taken while another held the gate and its context had ended")
	}
	end()
	if g.busy || waiting(g) != 0 {
		t.Fatalf("gate left busy=%v with %d waiting", g.busy, waiting(g))
	}
}
