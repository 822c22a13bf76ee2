package nats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
)

// keyedPair is a front end and a model 0 endpoint on two keyed
// connections of one deployment, and a raw client of the same server that
// holds the server's credentials but not the key and records every
// message of the deployment.
type keyedPair struct {
	srv          *busnats.Server
	key          []byte
	front, model *busnats.Bus
	fch, mch     chan *bus.Event
	raw          *gonats.Conn
	spy          *gonats.Subscription
}

func newKeyedPair(t *testing.T) *keyedPair {
	t.Helper()
	p := &keyedPair{srv: startServer(t), key: busnats.NewKey(),
		fch: make(chan *bus.Event, 16), mch: make(chan *bus.Event, 16)}
	p.front, p.model = p.connect(t), p.connect(t)
	if err := p.front.Attach(bus.Frontend, func(e *bus.Event) { p.fch <- e }); err != nil {
		t.Fatal(err)
	}
	if err := p.model.Attach(0, func(e *bus.Event) { p.mch <- e }); err != nil {
		t.Fatal(err)
	}
	auth := p.srv.ClientAuth()
	raw, err := gonats.Connect(p.srv.URL(), gonats.UserInfo(auth.User, auth.Password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	p.raw = raw
	if p.spy, err = raw.SubscribeSync("r.>"); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// connect opens a keyed bus with a clock skew of one millisecond.
func (p *keyedPair) connect(t *testing.T) *busnats.Bus {
	t.Helper()
	b, err := busnats.Connect(p.srv.URL(), busnats.Options{Prefix: "r", Auth: p.srv.ClientAuth(), Key: p.key,
		ClockSkew: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// traffic sends the events of request id that an attacker would replay:
// an admit and a peer message from the front end, a commit back, and a
// cancel. Each is received once; the raw client's copies are returned.
func (p *keyedPair) traffic(t *testing.T, id uint64) []*gonats.Msg {
	t.Helper()
	ctx := context.Background()
	a := p.front.Get()
	a.Kind, a.ID, a.From = bus.Admit, id, bus.Frontend
	pm := p.front.Get()
	pm.Kind, pm.ID, pm.From = bus.Peer, id, bus.Frontend
	pm.Msg = route.Message{ID: id, From: -1, Tokens: []int32{1, 2}, By: []int8{-1, -1}, Seen: []int{0}}
	if err := p.front.Broadcast(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := p.front.Send(ctx, 0, pm); err != nil {
		t.Fatal(err)
	}
	c := p.model.Get()
	c.Kind, c.ID, c.From, c.Tokens, c.By, c.Pos = bus.Commit, id, 0, []int32{7}, []int8{0}, 2
	if err := p.model.Send(ctx, bus.Frontend, c); err != nil {
		t.Fatal(err)
	}
	x := p.front.Get()
	x.Kind, x.ID, x.From = bus.Cancel, id, bus.Frontend
	if err := p.front.Broadcast(ctx, x); err != nil {
		t.Fatal(err)
	}
	for _, want := range []bus.Kind{bus.Admit, bus.Peer, bus.Cancel} {
		if e := recv(t, p.mch); e.Kind != want || e.ID != id {
			t.Fatalf("model got %v %d, want %v %d", e.Kind, e.ID, want, id)
		}
	}
	if e := recv(t, p.fch); e.Kind != bus.Commit || e.ID != id || len(e.Tokens) != 1 || e.Tokens[0] != 7 {
		t.Fatalf("front end got %+v", e)
	}
	var out []*gonats.Msg
	for range 4 {
		m, err := p.spy.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the captured message of kind.
func find(t *testing.T, msgs []*gonats.Msg, kind bus.Kind) *gonats.Msg {
	t.Helper()
	for _, m := range msgs {
		h, err := busnats.DecodeHeader(m.Data[:len(m.Data)-busnats.TagSize])
		if err != nil {
			t.Fatal(err)
		}
		if h.Kind == kind {
			return m
		}
	}
	t.Fatalf("no %v captured", kind)
	return nil
}

// replay re-publishes msgs verbatim, each twice, and waits until the
// server has them.
func (p *keyedPair) replay(t *testing.T, msgs []*gonats.Msg) {
	t.Helper()
	for range 2 {
		for _, m := range msgs {
			if err := p.raw.Publish(m.Subject, m.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.raw.Flush(); err != nil {
		t.Fatal(err)
	}
}

// dropped waits until front and model have together dropped want, and
// checks they dropped nothing else.
func dropped(t *testing.T, want busnats.DropCounts, buses ...*busnats.Bus) {
	t.Helper()
	sum := func() (c busnats.DropCounts) {
		for _, b := range buses {
			d := b.Dropped()
			c.BadTag += d.BadTag
			c.Replayed += d.Replayed
			c.Stale += d.Stale
			c.Version += d.Version
			c.Undecodable += d.Undecodable
		}
		return c
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return sum() == want }, "dropped %+v, want %+v", sum(), want)
}

// TestReplayedEventsDropped: a client with the NATS server's credentials
// but not the deployment's key captures genuine admit, peer, commit and
// cancel messages and re-publishes them verbatim. No endpoint sees them a
// second time, and the drops are counted as replays; the endpoints still
// exchange new events afterwards.
func TestReplayedEventsDropped(t *testing.T) {
	p := newKeyedPair(t)
	captured := p.traffic(t, 1)
	p.replay(t, captured)
	dropped(t, busnats.DropCounts{Replayed: 8}, p.front, p.model)
	testkit.Quiet(t, p.mch, 50*time.Millisecond)
	testkit.Quiet(t, p.fch, 0)
	p.traffic(t, 2)
	p.replay(t, captured) // still refused once the window has moved on
	dropped(t, busnats.DropCounts{Replayed: 16}, p.front, p.model)
	testkit.Quiet(t, p.mch, 50*time.Millisecond)
}

// TestReplayToRestartedEndpoint: captured events replayed to an endpoint
// that attached after they were sent (a restarted process, which has no
// record of them) are dropped as stale, while new events of the same
// senders reach it.
func TestReplayToRestartedEndpoint(t *testing.T) {
	p := newKeyedPair(t)
	captured := p.traffic(t, 1)
	p.model.Detach(0)
	time.Sleep(20 * time.Millisecond) // well past the one-millisecond skew
	fresh := p.connect(t)
	mch := make(chan *bus.Event, 16)
	if err := fresh.Attach(0, func(e *bus.Event) { mch <- e }); err != nil {
		t.Fatal(err)
	}
	p.replay(t, captured)
	// The admit, peer message and cancel to model 0 are stale to it, the
	// commit is a replay to the front end.
	dropped(t, busnats.DropCounts{Stale: 6}, fresh)
	dropped(t, busnats.DropCounts{Replayed: 2}, p.front)
	testkit.Quiet(t, mch, 50*time.Millisecond)
	a := p.front.Get()
	a.Kind, a.ID, a.From = bus.Admit, 2, bus.Frontend
	if err := p.front.Broadcast(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if e := recv(t, mch); e.Kind != bus.Admit || e.ID != 2 {
		t.Fatalf("restarted model got %+v", e)
	}
}

// TestForgedEventsDropped: a captured message altered anywhere (its
// sequence number, to pass as new; its body; its tag) is dropped as
// failing authentication. A keyed peer of another encoding version, and
// a keyed message that is no event, are dropped and counted too.
func TestForgedEventsDropped(t *testing.T) {
	p := newKeyedPair(t)
	errs := make(chan error, 16)
	b, err := busnats.Connect(p.srv.URL(), busnats.Options{Prefix: "r", Auth: p.srv.ClientAuth(), Key: p.key,
		OnError: func(err error) { errs <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mch := make(chan *bus.Event, 16)
	if err := b.Attach(1, func(e *bus.Event) { mch <- e }); err != nil {
		t.Fatal(err)
	}
	cancel := find(t, p.traffic(t, 1), bus.Cancel)
	if e := recv(t, mch); e.Kind != bus.Admit {
		t.Fatalf("model 1 got %+v", e)
	}
	recv(t, mch) // the cancel
	for _, at := range []int{10, 1 + busnats.OriginSize + 1, len(cancel.Data) - 1} {
		forged := append([]byte(nil), cancel.Data...)
		forged[at] ^= 1
		if err := p.raw.Publish(cancel.Subject, forged); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := testkit.Receive(t, errs, 5*time.Second); !errors.Is(err, busnats.ErrAuth) {
			t.Fatalf("reported %v, want ErrAuth", err)
		}
	}
	// Version 3's admit of request 5, sealed with the key.
	if err := p.front.Publish("r.all", []byte{3, byte(bus.Admit), 0, 5, 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.front.Publish("r.all", []byte{busnats.Version, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []error{busnats.ErrVersion, busnats.ErrDecode} {
		if err := testkit.Receive(t, errs, 5*time.Second); !errors.Is(err, want) {
			t.Fatalf("reported %v, want %v", err, want)
		}
	}
	if d := b.Dropped(); d != (busnats.DropCounts{BadTag: 3, Version: 1, Undecodable: 1}) {
		t.Fatalf("dropped %+v", d)
	}
	testkit.Quiet(t, mch, 50*time.Millisecond)
	if b.Errors() != 5 {
		t.Fatalf("%d errors, want 5", b.Errors())
	}
}
