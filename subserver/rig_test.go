package subserver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for the loop under test.
const wait = 10 * time.Second

// ctxLen is the fake engine's context length.
const ctxLen = 256

// count is the fake model used unless a test says otherwise: the token
// after a sequence of n tokens is 10 + n%50, so every output is known.
func count(s []int32) int32 { return int32(10 + len(s)%50) }

// testBus is the in-memory bus with two controls for tests: it can hold
// the finish broadcasts (so a request stays finished on its sub-server
// while a message for it arrives), and it records BindStates.
type testBus struct {
	*bus.Memory
	mu    sync.Mutex
	hold  bool
	held  []*bus.Event
	bound map[int]route.Stater
}

func newTestBus() *testBus { return &testBus{Memory: bus.NewMemory(), bound: map[int]route.Stater{}} }

// Broadcast holds finish events while hold is set.
func (b *testBus) Broadcast(ctx context.Context, e *bus.Event) error {
	b.mu.Lock()
	if b.hold && e.Kind == bus.Finish {
		b.held = append(b.held, e)
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	return b.Memory.Broadcast(ctx, e)
}

// setHold starts or stops holding finish events; stopping delivers the
// held ones.
func (b *testBus) setHold(on bool) {
	b.mu.Lock()
	b.hold = on
	held := b.held
	b.held = nil
	b.mu.Unlock()
	for _, e := range held {
		_ = b.Memory.Broadcast(context.Background(), e)
	}
}

// BindStates records the binding.
func (b *testBus) BindStates(ep int, st route.Stater) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bound[ep] = st
}

func (b *testBus) boundTo(ep int) route.Stater {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bound[ep]
}

// inbox collects one endpoint's events in arrival order.
type inbox struct {
	ch chan *bus.Event
}

func listen(t *testing.T, b bus.Bus, ep int) *inbox {
	t.Helper()
	in := &inbox{ch: make(chan *bus.Event, 4096)}
	if err := b.Attach(ep, func(e *bus.Event) {
		c := &bus.Event{}
		bus.Copy(c, e)
		b.Put(e)
		in.ch <- c
	}); err != nil {
		t.Fatal(err)
	}
	return in
}

// next returns the next event of one of kinds, dropping others.
func (in *inbox) next(t *testing.T, kinds ...bus.Kind) *bus.Event {
	t.Helper()
	for {
		e := testkit.Receive(t, in.ch, wait)
		if e == nil || slices.Contains(kinds, e.Kind) {
			return e
		}
	}
}

// script is a routing algorithm run by a function of the test (default:
// keep the token, commit, stay).
type script func(s *route.Step, d []route.Decision)

// Route calls the script.
func (f script) Route(s *route.Step, d []route.Decision) {
	if f != nil {
		f(s, d)
	}
}

// hooked is a script with every optional algorithm hook.
type hooked struct {
	script
	want    engine.Want
	send    func(r *route.Request, m *route.Message)
	receive func(r *route.Request, m *route.Message)
}

func (h *hooked) Want(int, *route.Request) engine.Want { return h.want }

func (h *hooked) Send(r *route.Request, m *route.Message) {
	if h.send != nil {
		h.send(r, m)
	}
}

func (h *hooked) Receive(r *route.Request, m *route.Message) {
	if h.receive != nil {
		h.receive(r, m)
	}
}

func (h *hooked) NewState(*route.Request) route.State { return &route.Ints{} }

// stepIn is what one input of a step asked of the engine.
type stepIn struct {
	seq    engine.SeqID
	held   []int32 // the sequence's tokens before the step
	tokens []int32 // the tokens appended
	want   engine.Want
}

// trunc is one Truncate call.
type trunc struct {
	seq engine.SeqID
	n   int
}

// opts configure a rig; zero values take the defaults.
type opts struct {
	alg      route.Algorithm // default: stay and commit
	models   int             // default 2
	policy   sched.Policy
	maxBatch int
	observer subserver.Observer
	next     func([]int32) int32 // default count
	// onStep and onTrunc run in the loop goroutine before each step or
	// truncation the engine accepts; an error fails it.
	onStep  func(ctx context.Context, in []engine.Input) error
	onTrunc func(seq engine.SeqID, n int) error
	// wrap, if set, wraps the fake engine the sub-server steps.
	wrap func(*enginetest.Fake) engine.Engine
	// reopen and onPanic are the sub-server's Config.Reopen and OnPanic.
	reopen  func(context.Context) (engine.Engine, error)
	onPanic func(*subserver.Panic)
}

// rig runs the sub-server of model 0 on a fake engine and the in-memory
// bus; the test plays the front end and model 1.
type rig struct {
	t      *testing.T
	models int
	bus    *testBus
	eng    *enginetest.Fake
	srv    *subserver.Server
	front  *inbox
	peer   *inbox
	steps  chan []stepIn
	truncs chan trunc
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, o opts) *rig {
	t.Helper()
	if o.alg == nil {
		o.alg = script(nil)
	}
	if o.models == 0 {
		o.models = 2
	}
	if o.next == nil {
		o.next = count
	}
	r := &rig{t: t, models: o.models, bus: newTestBus(), eng: enginetest.NewFake(ctxLen),
		steps: make(chan []stepIn, 4096), truncs: make(chan trunc, 4096), done: make(chan error, 1)}
	r.eng.Next = o.next
	r.eng.StepHook = func(ctx context.Context, in []engine.Input) error {
		rec := make([]stepIn, len(in))
		for i, ip := range in {
			rec[i] = stepIn{seq: ip.Seq, held: r.eng.Tokens(ip.Seq), tokens: slices.Clone(ip.Tokens), want: ip.Want}
		}
		r.steps <- rec
		if o.onStep != nil {
			return o.onStep(ctx, in)
		}
		return nil
	}
	r.eng.TruncateHook = func(seq engine.SeqID, n int) error {
		r.truncs <- trunc{seq, n}
		if o.onTrunc != nil {
			return o.onTrunc(seq, n)
		}
		return nil
	}
	r.front = listen(t, r.bus, bus.Frontend)
	r.peer = listen(t, r.bus, 1)
	var eng engine.Engine = r.eng
	if o.wrap != nil {
		eng = o.wrap(r.eng)
	}
	srv, err := subserver.New(subserver.Config{Index: 0, Models: o.models, Name: "m0", Engine: eng, Algorithm: o.alg,
		Policy: o.policy, Bus: r.bus, MaxBatch: o.maxBatch, Observer: o.observer, Reopen: o.reopen, OnPanic: o.onPanic})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		r.stop()
		_ = r.bus.Close()
	})
	return r
}

// stop ends Run and waits for it; safe to call twice.
func (r *rig) stop() {
	r.t.Helper()
	if r.done == nil {
		return
	}
	r.cancel()
	if err := testkit.Receive(r.t, r.done, wait); err != nil {
		r.t.Errorf("Run: %v", err)
	}
	r.done = nil
}

// admit broadcasts the admission of id.
func (r *rig) admit(id uint64) {
	r.t.Helper()
	e := r.bus.Get()
	e.Kind, e.ID, e.From = bus.Admit, id, bus.Frontend
	if err := r.bus.Broadcast(context.Background(), e); err != nil {
		r.t.Fatal(err)
	}
}

// event sends an event of kind k for id from endpoint from to model 0.
func (r *rig) event(k bus.Kind, id uint64, from int) {
	r.t.Helper()
	e := r.bus.Get()
	e.Kind, e.ID, e.From = k, id, from
	if err := r.bus.Send(context.Background(), 0, e); err != nil {
		r.t.Fatal(err)
	}
}

// message sends peer message m from endpoint from to model 0.
func (r *rig) message(from int, m route.Message) {
	r.t.Helper()
	e := r.bus.Get()
	bus.Copy(e, &bus.Event{Kind: bus.Peer, ID: m.ID, From: from, Msg: m})
	if err := r.bus.Send(context.Background(), 0, e); err != nil {
		r.t.Fatal(err)
	}
}

// entry is the front end's first message of a request, as the router
// builds it.
func entry(id uint64, prompt []int32, p route.Params, models int) route.Message {
	by := make([]int8, len(prompt))
	for i := range by {
		by[i] = -1
	}
	return route.Message{ID: id, From: bus.Frontend, To: 0, Tokens: prompt, By: by, PromptLen: len(prompt),
		Committed: len(prompt), Seen: make([]int, models), Params: p}
}

// submit admits a request and sends its entry message.
func (r *rig) submit(id uint64, prompt []int32, p route.Params) {
	r.t.Helper()
	r.admit(id)
	r.message(bus.Frontend, entry(id, prompt, p, r.models))
}

// result is what the front end heard about one request.
type result struct {
	tokens []int32
	by     []int8
	reason string
	err    string
}

// result reads the front end's events until id is done (skipping other
// requests'); commits of id must come in order.
func (r *rig) result(id uint64) result {
	r.t.Helper()
	var res result
	for {
		e := r.front.next(r.t, bus.Commit, bus.Done)
		if e == nil {
			return res
		}
		if e.ID != id {
			continue
		}
		if e.Kind == bus.Done {
			res.reason, res.err = e.Reason, e.Err
			return res
		}
		if e.Pos != len(res.tokens) {
			r.t.Fatalf("request %d: commit at output position %d after %d tokens", id, e.Pos, len(res.tokens))
		}
		res.tokens = append(res.tokens, e.Tokens...)
		res.by = append(res.by, e.By...)
	}
}

// failed waits for id to end with an error whose text contains want, and
// for the finish broadcast that frees it everywhere.
func (r *rig) failed(id uint64, want string) {
	r.t.Helper()
	res := r.result(id)
	if res.reason != "error" || !strings.Contains(res.err, want) {
		r.t.Fatalf("request %d ended %q (%s), want an error about %q", id, res.reason, res.err, want)
	}
	for { // earlier requests' finishes may come first
		if f := r.peer.next(r.t, bus.Finish); f == nil || f.ID == id {
			break
		}
	}
	r.idle()
}

// step returns the next step the engine ran.
func (r *rig) step() []stepIn {
	r.t.Helper()
	return testkit.Receive(r.t, r.steps, wait)
}

// truncated returns the next Truncate call.
func (r *rig) truncated() trunc {
	r.t.Helper()
	return testkit.Receive(r.t, r.truncs, wait)
}

// stats waits until the sub-server's counters satisfy ok.
func (r *rig) stats(what string, ok func(subserver.Stats) bool) subserver.Stats {
	r.t.Helper()
	var st subserver.Stats
	testkit.Until(r.t, wait, func() error {
		if st = r.srv.Stats(); !ok(st) {
			return fmt.Errorf("%s: stats %+v", what, st)
		}
		return nil
	})
	return st
}

// idle waits until the sub-server holds no request and no KV.
func (r *rig) idle() {
	r.t.Helper()
	r.stats("idle", func(s subserver.Stats) bool {
		return s.Records == 0 && s.Runnable == 0 && s.Pending == 0 && s.KVSequences == 0
	})
}

// outputs is what the count model produces after a prompt of n tokens.
func outputs(n, k int) []int32 {
	out := make([]int32, k)
	for i := range out {
		out[i] = count(make([]int32, n+i))
	}
	return out
}

var errInjected = errors.New("injected failure")
