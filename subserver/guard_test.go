package subserver_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// panics records the panics a sub-server reports.
type panics struct {
	mu  sync.Mutex
	got []*subserver.Panic
}

func (p *panics) add(x *subserver.Panic) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, x)
}

func (p *panics) list() []*subserver.Panic {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// TestPanicInRouteFailsOnlyItsRequest: an algorithm whose decision for one
// request of a batch panics fails that request only; the batch's other
// requests finish with their expected tokens, the loop goes on, and the
// panic is reported once with its stack.
func TestPanicInRouteFailsOnlyItsRequest(t *testing.T) {
	alg := script(func(s *route.Step, _ []route.Decision) {
		for _, q := range s.Requests {
			if q.ID == 2 && len(q.Tokens) > q.PromptLen+1 {
				panic("route bug for request 2")
			}
		}
	})
	var p panics
	r := start(t, opts{alg: alg, policy: sched.Policy{B: sched.Static(3)}, onPanic: p.add})
	prompt := []int32{1, 2, 3}
	for id := uint64(1); id <= 3; id++ {
		r.submit(id, prompt, route.Params{MaxTokens: 6})
	}
	res := r.results(1, 2, 3)
	for _, id := range []uint64{1, 3} {
		if res[id].reason != "length" || !slices.Equal(res[id].tokens, outputs(len(prompt), 6)) {
			t.Errorf("request %d: %v (%s %s), want %v (length)", id, res[id].tokens, res[id].reason, res[id].err, outputs(len(prompt), 6))
		}
	}
	if res[2].reason != "error" || !strings.Contains(res[2].err, "internal error: panic in route") {
		t.Errorf("request 2 ended %q (%s), want an internal error naming the panic in route", res[2].reason, res[2].err)
	}
	got := p.list()
	if len(got) == 0 || got[0].Where != "route" || !strings.Contains(string(got[0].Stack), "guard_test.go") {
		t.Fatalf("reported panics %+v, want one in route with the test's stack", got)
	}
	if len(got) != 2 || got[1].Request != 2 {
		// The batch's Route panics once, then request 2's own Route.
		t.Errorf("reported %d panics (%+v), want 2: the batch's and request 2's", len(got), got)
	}
	r.idle()
	if st := r.srv.Stats(); st.Panics != 2 || st.Restarts != 0 {
		t.Errorf("stats: %d panics, %d restarts; want 2 and 0", st.Panics, st.Restarts)
	}
	// The loop still serves.
	r.submit(4, prompt, route.Params{MaxTokens: 3})
	if res := r.result(4); res.reason != "length" {
		t.Fatalf("request after the panic ended %q (%s)", res.reason, res.err)
	}
}

// TestPanicInHookFailsOnlyItsRequest: a panic in an algorithm's hand-off
// hook (Send) fails that request; another request in flight finishes.
func TestPanicInHookFailsOnlyItsRequest(t *testing.T) {
	alg := &hooked{script: toPeerAfter(2), send: func(q *route.Request, _ *route.Message) {
		if q.ID == 7 {
			panic(errors.New("send hook bug"))
		}
	}}
	r := start(t, opts{alg: alg})
	r.submit(7, []int32{1, 2}, route.Params{MaxTokens: 20})
	r.failed(7, "panic in decision on model m0: send hook bug")
	r.submit(8, []int32{1, 2}, route.Params{MaxTokens: 1})
	if res := r.result(8); res.reason != "length" {
		t.Fatalf("request 8 ended %q (%s)", res.reason, res.err)
	}
}

// panicky is a fake engine whose step panics when armed.
type panicky struct {
	*enginetest.Fake
	mu    sync.Mutex
	armed bool
}

func (p *panicky) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	p.mu.Lock()
	armed := p.armed
	p.armed = false
	p.mu.Unlock()
	if armed {
		panic("engine bug")
	}
	return p.Fake.Step(ctx, in, out)
}

func (p *panicky) arm() {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
}

// TestEnginePanicRestartsEngine: a step that panics fails that step's
// requests; the engine is reopened, and a request that was parked at a
// peer when it happened resumes on the new engine, recomputing its KV from
// its tokens, with the output it would have had.
func TestEnginePanicRestartsEngine(t *testing.T) {
	var mu sync.Mutex
	var engines []*panicky
	reopen := func(context.Context) (engine.Engine, error) {
		e := &panicky{Fake: enginetest.NewFake(ctxLen)}
		e.Next = count
		mu.Lock()
		engines = append(engines, e)
		mu.Unlock()
		return e, nil
	}
	var first *panicky
	r := start(t, opts{alg: toPeerAfter(2), reopen: reopen, wrap: func(f *enginetest.Fake) engine.Engine {
		first = &panicky{Fake: f}
		return first
	}})
	prompt := []int32{1, 2, 3}
	// Request 1 goes to model 1 after two tokens and is parked there.
	m := r.handOff(1, route.Params{MaxTokens: 6})
	// Request 2's step panics.
	first.arm()
	r.submit(2, prompt, route.Params{MaxTokens: 6})
	before := r.results(2) // with request 1's commits before the hand-off
	if res := before[2]; res.reason != "error" || !strings.Contains(res.err, "internal error: panic in engine on model m0: engine bug") {
		t.Fatalf("request 2 ended %q (%s), want the engine's panic", res.reason, res.err)
	}
	r.stats("restarted", func(s subserver.Stats) bool { return s.Restarts == 1 && s.Records == 1 })
	// Request 1 comes back: model 0's KV is gone; it recomputes.
	r.message(1, back(m, false, 40))
	res := r.results(1)[1]
	res.tokens = append(before[1].tokens, res.tokens...)
	n := len(m.Tokens) - m.PromptLen // the tokens model 0 wrote before the hand-off
	want := append(append(slices.Clone(m.Tokens[m.PromptLen:]), 40), outputs(len(m.Tokens)+1, 6-n-1)...)
	if res.reason != "length" || !slices.Equal(res.tokens, want) {
		t.Fatalf("request 1 after the restart: %v (%s %s), want %v", res.tokens, res.reason, res.err, want)
	}
	r.idle()
	r.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(engines) != 1 || engines[0].Sequences() != 0 {
		t.Fatalf("%d engines reopened; want 1 holding no sequence once the request ended", len(engines))
	}
}

// TestEnginePanicWithoutReopen: with no way to reopen the engine, Run
// returns ErrEngineFailed and every request held ends with an error.
func TestEnginePanicWithoutReopen(t *testing.T) {
	var first *panicky
	r := start(t, opts{alg: toPeerAfter(2), wrap: func(f *enginetest.Fake) engine.Engine {
		first = &panicky{Fake: f}
		return first
	}})
	r.handOff(1, route.Params{MaxTokens: 6})
	first.arm()
	r.submit(2, []int32{1, 2, 3}, route.Params{MaxTokens: 6})
	for id, res := range r.results(1, 2) {
		if res.reason != "error" {
			t.Errorf("request %d ended %q, want an error", id, res.reason)
		}
	}
	r.cancel()
	select {
	case err := <-r.done:
		if !errors.Is(err, subserver.ErrEngineFailed) {
			t.Fatalf("Run returned %v, want ErrEngineFailed", err)
		}
		r.done = nil
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
}

// TestStalled: the watchdog's rule on counters.
func TestStalled(t *testing.T) {
	for _, c := range []struct {
		busy, maxStep, configured time.Duration
		stalled                   bool
	}{
		{0, 0, 0, false},
		{9 * time.Second, 0, 0, false},
		{11 * time.Second, 0, 0, true},
		{11 * time.Second, 3 * time.Second, 0, false}, // 5 steps of 3s: 15s
		{16 * time.Second, 3 * time.Second, 0, true},
		{2 * time.Second, time.Second, time.Second, true},
		{time.Second, time.Hour, 2 * time.Second, false},
	} {
		err := subserver.Stalled(subserver.Stats{Busy: c.busy, MaxStep: c.maxStep}, c.configured)
		if (err != nil) != c.stalled || (err != nil && !errors.Is(err, subserver.ErrStalled)) {
			t.Errorf("busy %v, max step %v, configured %v: %v, want stalled %v", c.busy, c.maxStep, c.configured, err, c.stalled)
		}
	}
}

// TestBusyWhileStepping: Busy grows while a step runs and is 0 while the
// loop waits for work.
func TestBusyWhileStepping(t *testing.T) {
	release := make(chan struct{})
	r := start(t, opts{onStep: func(ctx context.Context, _ []engine.Input) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	r.idle()
	if b := r.srv.Stats().Busy; b != 0 {
		t.Fatalf("idle loop busy for %v", b)
	}
	r.submit(1, []int32{1}, route.Params{MaxTokens: 1})
	r.step()
	st := r.stats("busy", func(s subserver.Stats) bool { return s.Busy >= 50*time.Millisecond })
	if err := subserver.Stalled(st, 20*time.Millisecond); !errors.Is(err, subserver.ErrStalled) {
		t.Fatalf("a step stuck for %v is not stalled at a 20ms timeout: %v", st.Busy, err)
	}
	close(release)
	if res := r.result(1); res.reason != "length" {
		t.Fatalf("ended %q", res.reason)
	}
	r.stats("waiting", func(s subserver.Stats) bool { return s.Busy == 0 })
}

// results reads the front end's events until every one of ids is done.
func (r *rig) results(ids ...uint64) map[uint64]result {
	r.t.Helper()
	out := map[uint64]result{}
	done := 0
	for done < len(ids) {
		e := r.front.next(r.t, bus.Commit, bus.Done)
		if e == nil {
			r.t.Fatalf("results so far %+v, want %v done", out, ids)
		}
		res := out[e.ID]
		if e.Kind == bus.Done {
			res.reason, res.err = e.Reason, e.Err
			if slices.Contains(ids, e.ID) {
				done++
			}
		} else {
			res.tokens = append(res.tokens, e.Tokens...)
			res.by = append(res.by, e.By...)
		}
		out[e.ID] = res
	}
	return out
}
