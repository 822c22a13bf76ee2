package lockstep_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/baseline/lockstep"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// nextOf is model m's fake language: the token after a sequence of n
// tokens is 10 + 10m + n%10, so each token tells which model made it.
func nextOf(m int) func([]int32) int32 {
	return func(s []int32) int32 { return int32(10 + 10*m + len(s)%10) }
}

// step is one engine step as the engines saw it.
type step struct {
	model int
	seqs  []engine.SeqID
	toks  [][]int32
}

// world is a lockstep system over fake engines that record every step,
// release and close, and notice two models stepping at once.
type world struct {
	sys      *lockstep.System
	mu       sync.Mutex
	steps    []step
	released map[int][]engine.SeqID
	closed   []int
	running  atomic.Int32
	overlaps atomic.Int32
}

// recEngine records releases and closes of one fake engine.
type recEngine struct {
	*enginetest.Fake
	w     *world
	model int
}

func (e *recEngine) Release(seq engine.SeqID) {
	e.w.mu.Lock()
	e.w.released[e.model] = append(e.w.released[e.model], seq)
	e.w.mu.Unlock()
	e.Fake.Release(seq)
}

func (e *recEngine) Close() error {
	e.w.mu.Lock()
	e.w.closed = append(e.w.closed, e.model)
	e.w.mu.Unlock()
	return e.Fake.Close()
}

// setup configures a world.
type setup struct {
	models int                             // default 2
	alg    func(model int) route.Algorithm // per model (-1: the front end's instance); default stay
	// hook, if set, runs inside each step of model m after it is
	// recorded; an error fails the step.
	hook func(ctx context.Context, m int, in []engine.Input) error
}

func newWorld(t *testing.T, s setup) *world {
	t.Helper()
	if s.models == 0 {
		s.models = 2
	}
	if s.alg == nil {
		s.alg = func(int) route.Algorithm { return script(nil) }
	}
	w := &world{released: map[int][]engine.SeqID{}}
	reg := route.NewRegistry()
	if err := reg.Register("script", func(sp route.Spec) (route.Algorithm, error) { return s.alg(sp.Model), nil }); err != nil {
		t.Fatal(err)
	}
	var es []engine.Engine
	var names []string
	for m := range s.models {
		f := enginetest.NewFake(256)
		f.Next = nextOf(m)
		f.StepHook = func(ctx context.Context, in []engine.Input) error {
			if w.running.Add(1) > 1 {
				w.overlaps.Add(1)
			}
			defer w.running.Add(-1)
			st := step{model: m}
			for _, ip := range in {
				st.seqs = append(st.seqs, ip.Seq)
				st.toks = append(st.toks, slices.Clone(ip.Tokens))
			}
			w.mu.Lock()
			w.steps = append(w.steps, st)
			w.mu.Unlock()
			if s.hook != nil {
				return s.hook(ctx, m, in)
			}
			return nil
		}
		es = append(es, &recEngine{Fake: f, w: w, model: m})
		names = append(names, fmt.Sprintf("m%d", m))
	}
	sys, err := lockstep.New(lockstep.Config{Engines: es, Names: names, Algorithm: "script", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	w.sys = sys
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

func (w *world) log() []step {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.steps)
}

// script is an algorithm run by a function of the test (default: keep,
// commit, stay).
type script func(s *route.Step, d []route.Decision)

// Route calls the script.
func (f script) Route(s *route.Step, d []route.Decision) {
	if f != nil {
		f(s, d)
	}
}

// to routes every request to model next after each step.
func to(next int) script {
	return func(_ *route.Step, d []route.Decision) {
		for i := range d {
			d[i].Next = next
		}
	}
}

// submit starts a request and returns its stream.
func (w *world) submit(t *testing.T, prompt []int32, maxTokens int) *stream.Stream {
	t.Helper()
	s, err := w.sys.Submit(context.Background(), prompt, route.Params{MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func result(t *testing.T, s *stream.Stream) (stream.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return s.Wait(ctx)
}

func TestNewValidates(t *testing.T) {
	reg := route.NewRegistry()
	one := []engine.Engine{enginetest.NewFake(64)}
	for _, c := range []struct {
		name string
		cfg  lockstep.Config
	}{
		{"no engines", lockstep.Config{Registry: reg}},
		{"names do not match", lockstep.Config{Engines: one, Names: []string{"a", "b"}, Registry: reg}},
		{"no registry", lockstep.Config{Engines: one, Names: []string{"a"}}},
		{"unknown algorithm", lockstep.Config{Engines: one, Names: []string{"a"}, Registry: reg, Algorithm: "nope"}},
	} {
		if _, err := lockstep.New(c.cfg); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestSingleModelIsPlainDecoding: with one model and an algorithm that
// stays, lockstep serving is greedy decoding to the token limit.
func TestSingleModelIsPlainDecoding(t *testing.T) {
	w := newWorld(t, setup{models: 1})
	st := w.submit(t, []int32{1, 5}, 4)
	res, err := result(t, st)
	if err != nil || !slices.Equal(res.Tokens, []int32{12, 13, 14, 15}) || !slices.Equal(res.By, []int8{0, 0, 0, 0}) || res.Reason != stream.Length {
		t.Fatalf("got %+v, %v; want [12 13 14 15] by model 0 (length)", res, err)
	}
	if _, err := w.sys.Submit(context.Background(), nil, route.Params{MaxTokens: 3}); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := w.sys.Submit(context.Background(), []int32{1}, route.Params{}); err == nil {
		t.Error("no token limit accepted")
	}
	// The request's KV was freed when it finished.
	testkit.Eventually(t, wait, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Contains(w.released[0], engine.SeqID(st.ID))
	}, "the finished request released")
}

// TestGlobalSteps: each global step runs model 0 for the requests it
// holds, then model 1 for those routed to it (in the same global step);
// a request routed back to model 0 waits for the next global step. All
// requests advance together, one token per model per global step.
func TestGlobalSteps(t *testing.T) {
	gate := make(chan struct{})
	w := newWorld(t, setup{
		alg: func(m int) route.Algorithm { return to(1 - max(m, 0)) }, // ping-pong
		hook: func(_ context.Context, m int, _ []engine.Input) error {
			<-gate // the first step waits until every request is in
			return nil
		},
	})
	var ss []*stream.Stream
	for i := range 4 {
		ss = append(ss, w.submit(t, []int32{1, int32(3 + i)}, 6))
	}
	close(gate)
	for i, s := range ss {
		res, err := result(t, s)
		if err != nil || !slices.Equal(res.By, []int8{0, 1, 0, 1, 0, 1}) {
			t.Fatalf("request %d: %+v, %v; want tokens alternating between the models", i, res, err)
		}
		if want := []int32{12, 23, 14, 25, 16, 27}; !slices.Equal(res.Tokens, want) {
			t.Fatalf("request %d: tokens %v, want %v", i, res.Tokens, want)
		}
	}
	log := w.log()
	for k, st := range log {
		if st.model != k%2 {
			t.Fatalf("step %d ran model %d; the models must alternate 0, 1, 0, ...: %+v", k, st.model, log)
		}
		if k%2 == 1 && !slices.Equal(st.seqs, log[k-1].seqs) {
			t.Fatalf("global step %d: model 1 ran %v, model 0 handed it %v: %+v", k/2, st.seqs, log[k-1].seqs, log)
		}
	}
	// Six tokens are three global steps; a request submitted while the
	// first ran joins the second, and then all advance together.
	if len(log) > 2*4 {
		t.Fatalf("%d global steps for 4 requests of 3 global steps each: %+v", len(log)/2, log)
	}
}

// TestEveryoneWaitsForTheSlowest: a request that stays on the fast model
// gets its next step only after the slow model's step of the same global
// step; no two models ever step at once.
func TestEveryoneWaitsForTheSlowest(t *testing.T) {
	gate := make(chan struct{}) // the first step waits until both requests are in
	w := newWorld(t, setup{
		alg: func(m int) route.Algorithm {
			return script(func(s *route.Step, d []route.Decision) {
				for i, q := range s.Requests {
					if q.Params.Seed == 1 && m == 0 { // request B moves to model 1 and stays
						d[i].Next = 1
					}
				}
			})
		},
		hook: func(_ context.Context, m int, _ []engine.Input) error {
			<-gate
			if m == 1 {
				time.Sleep(2 * time.Millisecond) // deliberate: the slow model's compute
			}
			return nil
		},
	})
	a, err := w.sys.Submit(context.Background(), []int32{1, 3}, route.Params{MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.sys.Submit(context.Background(), []int32{1, 4}, route.Params{MaxTokens: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	close(gate)
	for _, s := range []*stream.Stream{a, b} {
		if _, err := result(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.overlaps.Load(); n != 0 {
		t.Fatalf("models stepped at once %d times", n)
	}
	// While request A (on model 0) runs, model 1 runs B in every global
	// step: from B's first step on model 1 to A's last, the models
	// alternate and each model-0 step advances A.
	log := w.log()
	first := slices.IndexFunc(log, func(st step) bool { return st.model == 1 })
	last := -1
	for k, st := range log {
		if slices.Contains(st.seqs, engine.SeqID(a.ID)) {
			last = k
		}
	}
	if first < 0 || last <= first {
		t.Fatalf("model 1 ran no step while A was active: %+v", log)
	}
	for k := first; k <= last; k++ {
		if want := (k - first + 1) % 2; log[k].model != want || want == 0 && !slices.Contains(log[k].seqs, engine.SeqID(a.ID)) {
			t.Fatalf("step %d ran model %d with %v; want model %d, A on model 0: %+v", k, log[k].model, log[k].seqs, want, log)
		}
	}
}

// TestFailuresEndRequests: an engine error ends the requests of that
// model's batch; a cut below the committed tokens or a route to no model
// ends the request; other requests go on.
func TestFailuresEndRequests(t *testing.T) {
	var failOnce atomic.Bool
	w := newWorld(t, setup{
		alg: func(m int) route.Algorithm {
			return script(func(s *route.Step, d []route.Decision) {
				for i, q := range s.Requests {
					switch q.Params.Seed {
					case 1:
						d[i].Next = 1 // to the failing model
					case 2:
						d[i].Cut = q.PromptLen - 1
					case 3:
						d[i].Next = 7
					}
				}
			})
		},
		hook: func(_ context.Context, m int, _ []engine.Input) error {
			if m == 1 && failOnce.CompareAndSwap(false, true) {
				return errors.New("engine on fire")
			}
			return nil
		},
	})
	var ss []*stream.Stream
	for seed := range uint64(4) {
		s, err := w.sys.Submit(context.Background(), []int32{1, 3}, route.Params{MaxTokens: 5, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	wants := []string{"", "engine on fire", "below", "routed to model 7"}
	for seed, s := range ss {
		res, err := result(t, s)
		switch {
		case wants[seed] == "" && (err != nil || len(res.Tokens) != 5):
			t.Errorf("request %d: %+v, %v; want 5 tokens", seed, res, err)
		case wants[seed] != "" && (err == nil || !strings.Contains(err.Error(), wants[seed]) || res.Reason != stream.Error):
			t.Errorf("request %d: %+v, %v; want an error about %q", seed, res, err, wants[seed])
		}
	}
}

// TestDroppedTokenRecomputes: a dropped token with a stay re-runs the
// last position, as a sub-server does.
func TestDroppedTokenRecomputes(t *testing.T) {
	dropped := false // used by the loop goroutine alone
	w := newWorld(t, setup{models: 1, alg: func(int) route.Algorithm {
		return script(func(_ *route.Step, d []route.Decision) {
			if !dropped {
				dropped = true
				d[0].Token = route.NoToken
			}
		})
	}})
	res, err := result(t, w.submit(t, []int32{1, 5, 6}, 2))
	if err != nil || !slices.Equal(res.Tokens, []int32{13, 14}) {
		t.Fatalf("got %+v, %v", res, err)
	}
	if log := w.log(); len(log) < 2 || !slices.Equal(log[1].toks[0], []int32{6}) {
		t.Fatalf("the step after the drop appended %v, want the last prompt token again", log[1].toks)
	}
}

// handed is what a Receiver hook saw of a hand-off.
type handed struct {
	from, to, anchor int
	state            int64
}

// hooked is an algorithm with Entrant, Stater, Sender and Receiver hooks.
type hooked struct {
	script
	received chan handed
}

func (h *hooked) Entry(*route.Request) int            { return 1 }
func (h *hooked) NewState(*route.Request) route.State { return &route.Ints{0} }
func (h *hooked) Send(r *route.Request, m *route.Message) {
	*(m.State.(*route.Ints)) = route.Ints{int64(m.From) + 100}
}
func (h *hooked) Receive(r *route.Request, m *route.Message) {
	h.received <- handed{m.From, m.To, m.Anchor, (*m.State.(*route.Ints))[0]}
	if m.Anchor > 0 {
		m.Anchor-- // resend one token: the receiver's KV is cut back
		m.Tokens = r.Tokens[m.Anchor:]
		m.By = r.By[m.Anchor:]
	}
}

// TestHandOffHooks: the entry model comes from the algorithm, and a
// hand-off runs the Sender and Receiver hooks; a re-anchored message cuts
// the receiver's KV back.
func TestHandOffHooks(t *testing.T) {
	received := make(chan handed, 64)
	w := newWorld(t, setup{alg: func(m int) route.Algorithm {
		return &hooked{script: to(1 - max(m, 0)), received: received}
	}})
	res, err := result(t, w.submit(t, []int32{1, 5}, 4))
	if err != nil || !slices.Equal(res.By, []int8{1, 0, 1, 0}) {
		t.Fatalf("got %+v, %v; want tokens by model 1 first, then alternating", res, err)
	}
	if h := testkit.Receive(t, received, wait); h != (handed{1, 0, 0, 101}) {
		t.Fatalf("first hand-off %+v, want 1 to 0 at anchor 0 carrying the sender's state 101", h)
	}
	if h := testkit.Receive(t, received, wait); h != (handed{0, 1, 2, 100}) {
		t.Fatalf("second hand-off %+v, want 0 to 1 at anchor 2 carrying the sender's state 100", h)
	}
	// Model 1 held 3 tokens when the request came back (anchor 2 after
	// the receiver's re-anchoring): its next step resends one token.
	log := w.log()
	if log[0].model != 1 || len(log) < 3 || log[2].model != 1 || len(log[2].toks[0]) != 3 {
		t.Fatalf("steps %+v: want model 1 first, and its second step to append 3 tokens", log)
	}
}

// TestCancelAndClose: a cancelled request ends as cancelled and its KV is
// freed in every engine; Close ends the rest as cancelled and closes the
// engines.
func TestCancelAndClose(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	// How steps run: 0 at once, 1 held until released, 2 until the system
	// closes.
	var phase atomic.Int32
	w := newWorld(t, setup{alg: func(m int) route.Algorithm { return to(1 - max(m, 0)) },
		hook: func(ctx context.Context, m int, in []engine.Input) error {
			select {
			case started <- struct{}{}:
			default:
			}
			switch phase.Load() {
			case 1:
				<-release
			case 2:
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}})
	phase.Store(1)
	s := w.submit(t, []int32{1, 3}, 200)
	testkit.Receive(t, started, wait)
	s.Close() // cancels the request: it ends at the next global step
	phase.Store(0)
	close(release)
	if _, err := result(t, s); !errors.Is(err, stream.ErrCancelled) {
		t.Fatalf("cancelled request: %v", err)
	}
	testkit.Eventually(t, wait, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Contains(w.released[0], engine.SeqID(s.ID)) && slices.Contains(w.released[1], engine.SeqID(s.ID))
	}, "the cancelled request freed on both models")

	// Close while a step runs: every open request ends as cancelled.
	phase.Store(2)
	select {
	case <-started: // a signal from before
	default:
	}
	open := make([]*stream.Stream, 3)
	for i := range open {
		open[i] = w.submit(t, []int32{1, int32(4 + i)}, 200)
	}
	testkit.Receive(t, started, wait)
	if err := w.sys.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range open {
		if res, err := result(t, s); !errors.Is(err, stream.ErrCancelled) || res.Reason != stream.Cancelled {
			t.Errorf("request %d after Close: %+v, %v; want cancelled", i, res, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Sort(w.closed); !slices.Equal(w.closed, []int{0, 1}) {
		t.Errorf("closed engines %v, want both", w.closed)
	}
	if _, err := w.sys.Submit(context.Background(), []int32{1}, route.Params{MaxTokens: 1}); err == nil {
		t.Error("Submit after Close accepted")
	}
}

// TestCutTruncatesEveryModel: a verifier's cut through the drafts rolls
// back the KV of every model that held the cut tokens.
func TestCutTruncatesEveryModel(t *testing.T) {
	w := newWorld(t, setup{alg: func(m int) route.Algorithm {
		return script(func(s *route.Step, d []route.Decision) {
			for i, q := range s.Requests {
				switch {
				case m == 1: // the verifier rejects every draft
					d[i].Cut, d[i].Next = q.PromptLen, 0
				case q.Committed == q.PromptLen: // model 0 drafts two tokens
					d[i].Commit = false
					if q.Output()+1 == 2 {
						d[i].Next = 1
					}
				}
			}
		})
	}})
	res, err := result(t, w.submit(t, []int32{1, 5}, 4))
	if err != nil || !slices.Equal(res.Tokens, []int32{24, 13, 14, 15}) || !slices.Equal(res.By, []int8{1, 0, 0, 0}) {
		t.Fatalf("got %+v, %v; want [24 13 14 15] by [1 0 0 0]", res, err)
	}
	// Model 0 held the prompt and its first draft; after the cut it
	// appends the verifier's token to the prompt alone.
	if log := w.log(); len(log) < 4 || log[3].model != 0 || !slices.Equal(log[3].toks[0], []int32{24}) {
		t.Fatalf("steps %+v: want model 0's third step to append [24]", log)
	}
}
