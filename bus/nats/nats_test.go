package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type intsStater struct{}

func (intsStater) NewState(*route.Request) route.State { return &route.Ints{} }

func startServer(t *testing.T) *busnats.Server {
	t.Helper()
	s, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
		t.Fatalf("server URL %s is not loopback", s.URL())
	}
	return s
}

func connect(t *testing.T, srv *busnats.Server, prefix string) *busnats.Bus {
	t.Helper()
	b, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: prefix, Auth: srv.ClientAuth()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func recv(t *testing.T, ch <-chan *bus.Event) *bus.Event {
	t.Helper()
	return testkit.Receive(t, ch, 5*time.Second)
}

// TestAcrossConnections sends every kind of event between two connections
// (two processes, in effect) and checks order, broadcast fan-out and
// algorithm state decoding.
func TestAcrossConnections(t *testing.T) {
	srv := startServer(t)
	front, models := connect(t, srv, "t1"), connect(t, srv, "t1")
	other := connect(t, srv, "t2") // another deployment on the same server
	fch := make(chan *bus.Event, 100)
	mch := [2]chan *bus.Event{make(chan *bus.Event, 100), make(chan *bus.Event, 100)}
	if err := front.Attach(bus.Frontend, func(e *bus.Event) { fch <- e }); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		models.BindStates(i, intsStater{})
		if err := models.Attach(i, func(e *bus.Event) { mch[i] <- e }); err != nil {
			t.Fatal(err)
		}
	}
	if err := models.Attach(0, func(*bus.Event) {}); err == nil {
		t.Fatal("attached model 0 twice")
	}
	stray := make(chan *bus.Event, 10)
	if err := other.Attach(0, func(e *bus.Event) { stray <- e }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for id := uint64(1); id <= 50; id++ {
		a := front.Get()
		a.Kind, a.ID, a.From = bus.Admit, id, bus.Frontend
		if err := front.Broadcast(ctx, a); err != nil {
			t.Fatal(err)
		}
		p := front.Get()
		p.Kind, p.ID, p.From = bus.Peer, id, bus.Frontend
		p.Msg = route.Message{ID: id, From: -1, To: 0, Tokens: []int32{1, int32(id)}, By: []int8{-1, -1}, Seen: []int{0, 0},
			State: &route.Ints{int64(id)}}
		if err := front.Send(ctx, 0, p); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 50; id++ {
		// Model 0 sees each admit before that request's peer message.
		a, p := recv(t, mch[0]), recv(t, mch[0])
		if a.Kind != bus.Admit || a.ID != id || p.Kind != bus.Peer || p.ID != id {
			t.Fatalf("request %d: got %v %d then %v %d", id, a.Kind, a.ID, p.Kind, p.ID)
		}
		st, ok := p.Msg.State.(*route.Ints)
		if !ok || len(*st) != 1 || (*st)[0] != int64(id) {
			t.Fatalf("request %d: state %#v", id, p.Msg.State)
		}
		if b := recv(t, mch[1]); b.Kind != bus.Admit || b.ID != id {
			t.Fatalf("model 1 got %v %d, want admit %d", b.Kind, b.ID, id)
		}
		models.Put(a)
		models.Put(p)
	}
	c := models.Get()
	c.Kind, c.ID, c.From, c.Tokens, c.By, c.Pos = bus.Commit, 3, 1, []int32{9, 8}, []int8{1, 1}, 4
	if err := models.Send(ctx, bus.Frontend, c); err != nil {
		t.Fatal(err)
	}
	if e := recv(t, fch); e.Kind != bus.Commit || e.ID != 3 || len(e.Tokens) != 2 || e.Tokens[1] != 8 || e.Pos != 4 {
		t.Fatalf("front end got %+v", e)
	}
	testkit.Quiet(t, stray, 50*time.Millisecond) // another deployment's endpoint gets nothing
	if front.Errors()+models.Errors() != 0 {
		t.Fatalf("%d errors", front.Errors()+models.Errors())
	}
}

// TestUndecodablePeerEndsRequest publishes a corrupt peer message: the
// receiver reports it and ends the request (done with an error to the
// front end, finish to every model) instead of dropping it silently.
func TestUndecodablePeerEndsRequest(t *testing.T) {
	srv := startServer(t)
	errs := make(chan error, 10)
	b, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: "t3", Auth: srv.ClientAuth(), OnError: func(err error) { errs <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fch, mch := make(chan *bus.Event, 10), make(chan *bus.Event, 10)
	if err := b.Attach(bus.Frontend, func(e *bus.Event) { fch <- e }); err != nil {
		t.Fatal(err)
	}
	// Model 1 has no state factory, so a message with state cannot decode.
	if err := b.Attach(1, func(e *bus.Event) { mch <- e }); err != nil {
		t.Fatal(err)
	}
	p := b.Get()
	p.Kind, p.ID, p.From = bus.Peer, 77, 0
	p.Msg = route.Message{ID: 77, To: 1, Tokens: []int32{5}, By: []int8{0}, Seen: []int{1, 0}, State: &route.Ints{1}}
	if err := b.Send(context.Background(), 1, p); err != nil {
		t.Fatal(err)
	}
	d := recv(t, fch)
	if d.Kind != bus.Done || d.ID != 77 || d.Reason != "error" || !strings.Contains(d.Err, "undecodable") {
		t.Fatalf("front end got %+v", d)
	}
	if f := recv(t, mch); f.Kind != bus.Finish || f.ID != 77 {
		t.Fatalf("model got %+v", f)
	}
	if err := <-errs; !errors.Is(err, busnats.ErrDecode) {
		t.Fatalf("reported %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(context.Background(), 1, b.Get()); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
}
