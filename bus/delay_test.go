package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// arrivals records when each event id reached an endpoint.
type arrivals struct {
	mu  sync.Mutex
	at  map[uint64]time.Time
	ids []uint64
}

func (a *arrivals) handler(b bus.Bus) bus.Handler {
	return func(e *bus.Event) {
		a.mu.Lock()
		a.at[e.ID] = time.Now()
		a.ids = append(a.ids, e.ID)
		a.mu.Unlock()
		b.Put(e)
	}
}

func (a *arrivals) get(id uint64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[id]
	return t, ok
}

// TestDelayedDelays: an event from one sub-server to another, and a
// sub-server's broadcast, arrive no sooner than the delay after Send
// returned (so Send did not wait for the delay), in the order sent; events
// from and to the front end arrive at once.
func TestDelayedDelays(t *testing.T) {
	const d = 80 * time.Millisecond
	b := bus.NewDelayed(bus.NewMemory(), d)
	defer b.Close()
	if b.Delay() != d {
		t.Fatalf("delay %v, want %v", b.Delay(), d)
	}
	model1, front := &arrivals{at: map[uint64]time.Time{}}, &arrivals{at: map[uint64]time.Time{}}
	if err := b.Attach(1, model1.handler(b)); err != nil {
		t.Fatal(err)
	}
	if err := b.Attach(bus.Frontend, front.handler(b)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sent := map[uint64]time.Time{}
	send := func(id uint64, from, to int, broadcast bool) {
		sent[id] = time.Now()
		e := b.Get()
		e.Kind, e.ID, e.From = bus.Peer, id, from
		var err error
		if broadcast {
			err = b.Broadcast(ctx, e)
		} else {
			err = b.Send(ctx, to, e)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 20; id++ {
		send(id, 0, 1, id%5 == 0) // model 0 to model 1: delayed
		if _, ok := model1.get(id); ok {
			t.Fatalf("event %d arrived before Send returned: Send waited for the delay", id)
		}
	}
	send(100, 1, bus.Frontend, false) // model 1 to the front end: at once
	send(101, bus.Frontend, 1, false) // the front end to model 1: at once
	// The in-memory bus delivers inline: an event that is not delayed
	// has arrived when Send returns.
	if _, ok := front.get(100); !ok {
		t.Fatal("model 1's event to the front end was delayed")
	}
	if _, ok := model1.get(101); !ok {
		t.Fatal("the front end's event to model 1 was delayed")
	}
	testkit.Until(t, 10*time.Second, func() error {
		if _, ok := model1.get(20); !ok {
			return context.DeadlineExceeded
		}
		return nil
	})
	model1.mu.Lock()
	defer model1.mu.Unlock()
	want := uint64(1)
	for _, id := range model1.ids {
		if id == 101 {
			continue
		}
		if id != want {
			t.Fatalf("order of arrival %v, want 1..20 in order", model1.ids)
		}
		want++
		// sent is taken before Send: no event may arrive sooner than d
		// after it.
		if lag := model1.at[id].Sub(sent[id]); lag < d {
			t.Errorf("event %d arrived %v after it was sent, want at least %v", id, lag, d)
		}
	}
	if b.Dropped() != 0 {
		t.Errorf("%d events dropped", b.Dropped())
	}
}

// TestDelayedCloseDrops: Close returns without waiting for events still
// delayed, which never arrive, and the bus then refuses events.
func TestDelayedCloseDrops(t *testing.T) {
	b := bus.NewDelayed(bus.NewMemory(), time.Hour)
	got := &arrivals{at: map[uint64]time.Time{}}
	if err := b.Attach(1, got.handler(b)); err != nil {
		t.Fatal(err)
	}
	e := b.Get()
	e.Kind, e.ID, e.From = bus.Peer, 7, 0
	if err := b.Send(context.Background(), 1, e); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.get(7); ok {
		t.Error("a delayed event arrived after Close")
	}
	e = b.Get()
	e.Kind, e.From = bus.Peer, 0
	if err := b.Send(context.Background(), 1, e); err == nil {
		t.Error("Send after Close succeeded")
	}
}
