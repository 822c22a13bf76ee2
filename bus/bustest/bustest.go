// Package bustest is the conformance suite for bus.Bus: one set of checks
// of the contract documented in package bus, run against every
// implementation (each hooks it in with a small test that calls Run).
//
// Endpoints may sit on different handles of one bus, as they do when
// sub-servers run in different processes; what a bus legitimately does
// differently (whether it can know that nobody listens) is stated in
// Options.
package bustest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
)

// Options describe the bus under test.
type Options struct {
	// New returns n handles to one fresh bus, as n processes would hold
	// (a bus that lives in one process may return the same value n times).
	// Closing the handles when the test ends is New's job.
	New func(t testing.TB, n int) []bus.Bus
	// ReportsNoEndpoint is true when Send to an endpoint nobody attached
	// fails with bus.ErrNoEndpoint. A bus that cannot know whether anyone
	// listens (NATS) accepts such an event and drops it.
	ReportsNoEndpoint bool
}

// Timeout bounds every wait for a delivery.
const Timeout = 10 * time.Second

// Run runs the suite as subtests of t.
func Run(t *testing.T, o Options) {
	if o.New == nil {
		t.Fatal("bustest: Options.New is required")
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, Options)
	}{
		{"AttachTwice", testAttachTwice},
		{"DeliversToTheAddressee", testAddressee},
		{"FieldsArriveIntact", testFields},
		{"BroadcastReachesEveryModel", testBroadcast},
		{"OrderedPerSenderNoLoss", testOrderedNoLoss},
		{"DetachStopsDelivery", testDetach},
		{"NoEndpoint", testNoEndpoint},
		{"CancelledContext", testCancelledContext},
		{"Close", testClose},
		{"GetPut", testGetPut},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, o) })
	}
}

// ints is a route.Stater whose states are route.Ints, for buses that
// decode algorithm state (bus.StateBinder).
type ints struct{}

func (ints) NewState(*route.Request) route.State { return &route.Ints{} }

// sink is an endpoint's inbox in the suite: it keeps a deep copy of every
// event it receives and hands the event back to the bus.
type sink struct {
	b   bus.Bus
	mu  sync.Mutex
	evs []*bus.Event
	// edit, if set, is applied to each event before it is copied.
	edit func(*bus.Event)
}

func (s *sink) handle(e *bus.Event) {
	if s.edit != nil {
		s.edit(e)
	}
	c := &bus.Event{}
	bus.Copy(c, e)
	s.mu.Lock()
	s.evs = append(s.evs, c)
	s.mu.Unlock()
	s.b.Put(e)
}

// events returns a snapshot of what arrived so far.
func (s *sink) events() []*bus.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.evs)
}

// wait waits until n events arrived and returns them.
func (s *sink) wait(t *testing.T, what string, n int) []*bus.Event {
	t.Helper()
	testkit.Until(t, Timeout, func() error {
		if got := len(s.events()); got < n {
			return fmt.Errorf("%s: %d of %d events arrived", what, got, n)
		}
		return nil
	})
	return s.events()
}

// attach attaches a sink for ep on b (binding algorithm states first when
// b decodes them).
func attach(t *testing.T, b bus.Bus, ep int) *sink {
	t.Helper()
	if sb, ok := b.(bus.StateBinder); ok && ep != bus.Frontend {
		sb.BindStates(ep, ints{})
	}
	s := &sink{b: b}
	if err := b.Attach(ep, s.handle); err != nil {
		t.Fatalf("attach %d: %v", ep, err)
	}
	return s
}

// send sends an event of kind k and id from b to ep, failing on error.
func send(t *testing.T, b bus.Bus, ep int, k bus.Kind, id uint64, from int) {
	t.Helper()
	e := b.Get()
	e.Kind, e.ID, e.From = k, id, from
	if err := b.Send(context.Background(), ep, e); err != nil {
		t.Fatalf("send %v %d to %d: %v", k, id, ep, err)
	}
}

// marker is the id of the events that close a test's traffic: a sender's
// marker arriving means all it sent before to that endpoint arrived.
const marker = 1<<63 - 1

// untilMarkers waits until ep's sink got one marker from each of senders.
func untilMarkers(t *testing.T, s *sink, what string, senders int) []*bus.Event {
	t.Helper()
	testkit.Until(t, Timeout, func() error {
		n := 0
		for _, e := range s.events() {
			if e.ID == marker {
				n++
			}
		}
		if n < senders {
			return fmt.Errorf("%s: %d of %d markers arrived", what, n, senders)
		}
		return nil
	})
	return slices.DeleteFunc(s.events(), func(e *bus.Event) bool { return e.ID == marker })
}

func testAttachTwice(t *testing.T, o Options) {
	bs := o.New(t, 2)
	for _, ep := range []int{bus.Frontend, 0, 3} {
		attach(t, bs[0], ep)
		if err := bs[0].Attach(ep, func(*bus.Event) {}); err == nil {
			t.Errorf("endpoint %d attached twice on one handle", ep)
		}
	}
}

// TestAddressee: each event reaches the endpoint it was sent to and no
// other, from whichever handle it was sent.
func testAddressee(t *testing.T, o Options) {
	bs := o.New(t, 3)
	eps := []int{bus.Frontend, 0, 1, 2, bus.Endpoint(1, 1), bus.Endpoint(2, bus.MaxReplicas-1)} // replicas have endpoints of their own
	sinks := map[int]*sink{}
	for i, ep := range eps {
		sinks[ep] = attach(t, bs[i%len(bs)], ep)
	}
	for si, b := range bs {
		for _, to := range eps {
			for k := range 5 {
				send(t, b, to, bus.Commit, uint64(1000*(to+2)+10*si+k), si)
			}
		}
	}
	for si, b := range bs {
		for _, to := range eps {
			send(t, b, to, bus.Commit, marker, si)
		}
	}
	for _, ep := range eps {
		got := untilMarkers(t, sinks[ep], fmt.Sprintf("endpoint %d", ep), len(bs))
		if len(got) != 5*len(bs) {
			t.Errorf("endpoint %d got %d events, want %d", ep, len(got), 5*len(bs))
		}
		for _, e := range got {
			if int(e.ID/1000)-2 != ep {
				t.Errorf("endpoint %d got event %d, sent to endpoint %d", ep, e.ID, e.ID/1000-2)
			}
		}
	}
}

// fullEvent is an event with every field set.
func fullEvent(k bus.Kind) *bus.Event {
	return &bus.Event{
		Kind: k, ID: 1<<40 + 7, From: bus.Endpoint(1, 3), Endpoint: bus.Endpoint(2, 1),
		Msg: route.Message{ID: 1<<40 + 7, From: 1, To: 2, Anchor: 3, Tokens: []int32{9, 8, 1 << 20}, By: []int8{1, 1, -1},
			PromptLen: 2, Committed: 4, Seen: []int{3, 5, 0}, Placed: []int{0, 3, -1}, Finished: true,
			Params: route.Params{MaxTokens: 99, IgnoreEOS: true, Seed: 1 << 50, Schema: `{"type":"object"}`, Speculate: -3,
				Sampling: engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, Seed: 12345, MinP: 0.05, Logprobs: true, TopLogprobs: 5,
					Penalties: engine.Penalties{Frequency: 0.5, Presence: -0.25, Repetition: 1.3,
						Bias: []engine.TokenBias{{Token: 3, Bias: -100}, {Token: 1 << 20, Bias: 2.5}}}}},
			Logprobs: []engine.Logprob{{Pos: 4, Token: 8, Logprob: -0.5, Top: []engine.TokenLogprob{{Token: 8, Logprob: -0.5}, {Token: 1 << 20, Logprob: -3}}}},
			State:    &route.Ints{4, -5, 1 << 40}, Verify: []int32{7, 12}, Verdict: []int32{40, 1 << 20}, Epoch: 1<<32 - 1},
		Tokens: []int32{5, 6}, By: []int8{0, 1}, Pos: 17, Reason: "error", Err: "engine on fire",
		Logprobs: []engine.Logprob{{Pos: 17, Token: 5, Logprob: -1.25}, {Pos: 18, Token: 6, Logprob: -0.125}},
	}
}

// TestFields: every field of every kind of event arrives as sent
// (algorithm state included).
func testFields(t *testing.T, o Options) {
	bs := o.New(t, 2)
	to := attach(t, bs[1], 2)
	kinds := []bus.Kind{bus.Peer, bus.Admit, bus.Finish, bus.Cancel, bus.Commit, bus.Done, bus.Released, bus.Lost}
	for _, k := range kinds {
		e := bs[0].Get()
		bus.Copy(e, fullEvent(k))
		if err := bs[0].Send(context.Background(), 2, e); err != nil {
			t.Fatal(err)
		}
	}
	got := to.wait(t, "model 2", len(kinds))
	for i, k := range kinds {
		if !sameEvent(got[i], fullEvent(k)) {
			t.Errorf("%v event arrived as\n%+v\nsent\n%+v", k, got[i], fullEvent(k))
		}
	}
}

// sameEvent compares events field by field (nil and empty slices alike,
// states by value).
func sameEvent(a, b *bus.Event) bool {
	ma, mb := a.Msg, b.Msg
	if !reflect.DeepEqual(ma.State, mb.State) || !slices.Equal(ma.Tokens, mb.Tokens) || !slices.Equal(ma.By, mb.By) ||
		!slices.Equal(ma.Seen, mb.Seen) || !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.By, b.By) ||
		!slices.Equal(ma.Verify, mb.Verify) || !slices.Equal(ma.Verdict, mb.Verdict) || !slices.Equal(ma.Placed, mb.Placed) {
		return false
	}
	ma.State, ma.Tokens, ma.By, ma.Seen, ma.Verify, ma.Verdict, ma.Placed = nil, nil, nil, nil, nil, nil, nil
	mb.State, mb.Tokens, mb.By, mb.Seen, mb.Verify, mb.Verdict, mb.Placed = nil, nil, nil, nil, nil, nil, nil
	return a.Kind == b.Kind && a.ID == b.ID && a.From == b.From && reflect.DeepEqual(ma, mb) && reflect.DeepEqual(a.Logprobs, b.Logprobs) &&
		a.Pos == b.Pos && a.Reason == b.Reason && a.Err == b.Err && a.Endpoint == b.Endpoint
}

// TestBroadcast: a broadcast reaches every model endpoint on every handle,
// the sender's own included, and not the front end; each gets its own
// copy.
func testBroadcast(t *testing.T, o Options) {
	bs := o.New(t, 2)
	front := attach(t, bs[0], bus.Frontend)
	models := []*sink{attach(t, bs[0], 0), attach(t, bs[1], 1), attach(t, bs[1], 2), attach(t, bs[0], bus.Endpoint(1, 1))}
	// The first endpoint to see an event scribbles over it: no other may
	// see the change.
	models[0].edit = func(e *bus.Event) {
		if len(e.Tokens) > 0 && len(e.Msg.Tokens) > 0 {
			e.Tokens[0], e.Msg.Tokens[0] = -9, -9
		}
	}
	models[2].edit = models[0].edit
	for i := range 3 {
		e := bs[1].Get()
		bus.Copy(e, fullEvent(bus.Finish))
		e.ID = uint64(i)
		if err := bs[1].Broadcast(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	for m, s := range models {
		got := s.wait(t, fmt.Sprintf("model %d", m), 3)
		for i, e := range got {
			want := fullEvent(bus.Finish)
			want.ID = uint64(i)
			if s.edit != nil {
				s.edit(want)
			}
			if len(got) != 3 || !sameEvent(e, want) {
				t.Errorf("model %d: broadcast %d arrived as %+v (of %d events)", m, i, e, len(got))
			}
		}
	}
	send(t, bs[1], bus.Frontend, bus.Done, marker, 1)
	if got := untilMarkers(t, front, "front end", 1); len(got) != 0 {
		t.Errorf("the front end got %d broadcasts", len(got))
	}
}

// TestOrderedNoLoss: senders on several handles and goroutines send at
// once, each an admit broadcast then a peer message per request: every
// event arrives, and each sender's arrive in the order sent.
func testOrderedNoLoss(t *testing.T, o Options) {
	bs := o.New(t, 2)
	const senders, per = 4, 300
	dst := attach(t, bs[1], 0)
	other := attach(t, bs[0], 1)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		b := bs[s%len(bs)]
		wg.Go(func() {
			ctx := context.Background()
			for k := range per {
				id := uint64(s)<<32 | uint64(k)
				a := b.Get()
				a.Kind, a.ID, a.From = bus.Admit, id, s
				p := b.Get()
				p.Kind, p.ID, p.From = bus.Peer, id, s
				p.Msg = route.Message{ID: id, From: s, To: 0, Tokens: []int32{int32(k)}, By: []int8{-1}, Seen: []int{0, 0}}
				if err := errors.Join(b.Broadcast(ctx, a), b.Send(ctx, 0, p)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := dst.wait(t, "model 0", 2*senders*per)
	next := make([]int, senders) // per sender: events seen
	for _, e := range got {
		s, k := int(e.ID>>32), int(e.ID&(1<<32-1))
		if s >= senders {
			t.Fatalf("event %d from no sender", e.ID)
		}
		want := bus.Admit
		if next[s]%2 == 1 {
			want = bus.Peer
		}
		if e.From != s || k != next[s]/2 || e.Kind != want {
			t.Fatalf("from sender %d: %v for request %d, want %v for %d", s, e.Kind, k, want, next[s]/2)
		}
		next[s]++
	}
	if got := other.wait(t, "model 1", senders*per); len(got) != senders*per {
		t.Fatalf("model 1 got %d events, want the %d broadcasts", len(got), senders*per)
	}
}

// TestDetach: after Detach returns, the endpoint's handler is not called
// again; detaching an unknown endpoint does nothing, and the endpoint can
// attach again.
func testDetach(t *testing.T, o Options) {
	bs := o.New(t, 2)
	old := attach(t, bs[1], 0)
	keep := attach(t, bs[1], 1)
	send(t, bs[0], 0, bus.Commit, 1, 0)
	old.wait(t, "model 0", 1)
	bs[1].Detach(0)
	bs[1].Detach(5) // never attached
	// Nothing more reaches the detached handler, from either handle, by
	// a message or a broadcast.
	for i, b := range bs {
		e := b.Get()
		e.Kind, e.ID = bus.Commit, uint64(2+i)
		if err := b.Send(context.Background(), 0, e); err != nil && !errors.Is(err, bus.ErrNoEndpoint) {
			t.Fatalf("send to a detached endpoint: %v", err)
		}
		a := b.Get()
		a.Kind, a.ID = bus.Admit, uint64(10+i)
		if err := b.Broadcast(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	keep.wait(t, "model 1", 2) // the broadcasts went out
	again := attach(t, bs[1], 0)
	send(t, bs[0], 0, bus.Commit, marker, 0)
	untilMarkers(t, again, "model 0 attached again", 1)
	if n := len(old.events()); n != 1 {
		t.Fatalf("the detached handler got %d events, want only the one before Detach", n)
	}
}

// TestNoEndpoint: an endpoint index no bus can serve is ErrNoEndpoint; one
// nobody attached is ErrNoEndpoint on a bus that knows (Options).
func testNoEndpoint(t *testing.T, o Options) {
	b := o.New(t, 1)[0]
	attach(t, b, 0)
	e := b.Get()
	e.Kind = bus.Commit
	if err := b.Send(context.Background(), -7, e); !errors.Is(err, bus.ErrNoEndpoint) {
		t.Errorf("send to endpoint -7: %v, want ErrNoEndpoint", err)
	}
	e = b.Get()
	e.Kind = bus.Commit
	err := b.Send(context.Background(), 3, e)
	if o.ReportsNoEndpoint && !errors.Is(err, bus.ErrNoEndpoint) {
		t.Errorf("send to an endpoint nobody attached: %v, want ErrNoEndpoint", err)
	}
	if !o.ReportsNoEndpoint && err != nil {
		t.Errorf("send to an endpoint nobody attached: %v, want nil (Options.ReportsNoEndpoint is false)", err)
	}
}

// TestCancelledContext: an event sent under an ended context is either
// refused with the context's error or delivered, never lost silently.
func testCancelledContext(t *testing.T, o Options) {
	bs := o.New(t, 2)
	dst := attach(t, bs[1], 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	delivered := 0
	for i := range 2 {
		e := bs[0].Get()
		e.Kind, e.ID = bus.Commit, uint64(i)
		var err error
		if i == 0 {
			err = bs[0].Send(ctx, 0, e)
		} else {
			e.Kind = bus.Admit
			err = bs[0].Broadcast(ctx, e)
		}
		switch {
		case err == nil:
			delivered++
		case !errors.Is(err, context.Canceled):
			t.Fatalf("send under a cancelled context: %v, want nil or context.Canceled", err)
		}
	}
	send(t, bs[0], 0, bus.Commit, marker, 0)
	if got := untilMarkers(t, dst, "model 0", 1); len(got) != delivered {
		t.Fatalf("%d events accepted under a cancelled context, %d delivered", delivered, len(got))
	}
}

// TestClose: a closed bus refuses everything with ErrClosed and calls no
// handler; closing twice is fine.
func testClose(t *testing.T, o Options) {
	b := o.New(t, 1)[0]
	s := attach(t, b, 0)
	send(t, b, 0, bus.Commit, marker, 0)
	untilMarkers(t, s, "model 0", 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	e := b.Get()
	e.Kind = bus.Commit
	if err := b.Send(context.Background(), 0, e); !errors.Is(err, bus.ErrClosed) {
		t.Errorf("send after Close: %v, want ErrClosed", err)
	}
	e = b.Get()
	e.Kind = bus.Admit
	if err := b.Broadcast(context.Background(), e); !errors.Is(err, bus.ErrClosed) {
		t.Errorf("broadcast after Close: %v, want ErrClosed", err)
	}
	if err := b.Attach(1, func(*bus.Event) {}); !errors.Is(err, bus.ErrClosed) {
		t.Errorf("attach after Close: %v, want ErrClosed", err)
	}
	b.Detach(0) // harmless
	if n := len(s.events()); n != 1 {
		t.Errorf("handler called %d times, want once (before Close)", n)
	}
}

// TestGetPut: Get returns an empty event, also after events came back
// with Put.
func testGetPut(t *testing.T, o Options) {
	b := o.New(t, 1)[0]
	for range 3 {
		e := b.Get()
		if !sameEvent(e, &bus.Event{}) {
			t.Fatalf("Get returned a used event: %+v", e)
		}
		bus.Copy(e, fullEvent(bus.Peer))
		b.Put(e)
	}
}
