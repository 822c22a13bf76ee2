package bus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Delayed wraps a Bus for experiments on split deployments (a small model
// on the user's machine, the large one remote): every event between
// sub-servers, that is sent by a model endpoint (Event.From ≥ 0) to a
// model endpoint or broadcast by one, reaches the inner bus a fixed delay
// after it was sent. Events from or to the front end pass at once. Send
// and Broadcast never block on the delay. While events wait, one goroutine
// hands them on in the order they were sent, so each sender's events to
// an endpoint keep their order; it ends when none is left or at Close, so
// a Delayed that nobody closes holds no goroutine once it is quiet.
//
// A delayed event's delivery error (no such endpoint, a closed inner bus)
// has no sender left to return it to: the event is dropped and counted
// (Dropped), as a bus that cannot know whether anyone listens does.
type Delayed struct {
	inner Bus
	delay time.Duration

	mu      sync.Mutex
	queue   []delayedEvent
	closed  bool
	running bool          // the delivery goroutine runs
	stop    chan struct{} // closed by Close
	wg      sync.WaitGroup
	dropped atomic.Uint64
}

// delayedEvent is an event waiting for its time: to < Frontend marks a
// broadcast.
type delayedEvent struct {
	due time.Time
	to  int
	e   *Event
}

// broadcastTo marks a delayed broadcast.
const broadcastTo = Frontend - 1

// NewDelayed returns inner with a one-way delay d on every event between
// sub-servers. Close stops its goroutine, drops the events still waiting
// and closes inner.
func NewDelayed(inner Bus, d time.Duration) *Delayed {
	return &Delayed{inner: inner, delay: d, stop: make(chan struct{})}
}

// Delay returns the one-way delay.
func (b *Delayed) Delay() time.Duration { return b.delay }

// Dropped returns the number of delayed events the inner bus refused.
func (b *Delayed) Dropped() uint64 { return b.dropped.Load() }

// Attach registers an endpoint on the inner bus.
func (b *Delayed) Attach(ep int, h Handler) error {
	if b.isClosed() {
		return ErrClosed
	}
	return b.inner.Attach(ep, h)
}

// Detach removes an endpoint from the inner bus; a delayed event for it
// that comes due later finds no endpoint.
func (b *Delayed) Detach(ep int) { b.inner.Detach(ep) }

// Send hands e to endpoint to: at once from or to the front end, after
// the delay between sub-servers.
func (b *Delayed) Send(ctx context.Context, to int, e *Event) error {
	if to < Frontend {
		b.inner.Put(e)
		return fmt.Errorf("%w: %d", ErrNoEndpoint, to)
	}
	if e.From < 0 || to == Frontend {
		if b.isClosed() {
			b.inner.Put(e)
			return ErrClosed
		}
		return b.inner.Send(ctx, to, e)
	}
	return b.later(to, e)
}

// Broadcast sends e to every model endpoint: at once from the front end,
// after the delay from a sub-server (its own copy included).
func (b *Delayed) Broadcast(ctx context.Context, e *Event) error {
	if e.From < 0 {
		if b.isClosed() {
			b.inner.Put(e)
			return ErrClosed
		}
		return b.inner.Broadcast(ctx, e)
	}
	return b.later(broadcastTo, e)
}

// later queues e for delivery after the delay, starting the delivery
// goroutine when it is not running.
func (b *Delayed) later(to int, e *Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		b.inner.Put(e)
		return ErrClosed
	}
	b.queue = append(b.queue, delayedEvent{due: time.Now().Add(b.delay), to: to, e: e})
	if !b.running {
		b.running = true
		b.wg.Go(b.run)
	}
	return nil
}

// run hands each queued event to the inner bus when it comes due, in the
// order queued (the delay is fixed, so due times never decrease and an
// event queued while run sleeps is due after the one it sleeps for); it
// returns when the queue is empty or at Close.
func (b *Delayed) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.closed || len(b.queue) == 0 {
			b.running = false
			b.queue = b.queue[:0:0] // let the drained backing array go
			b.mu.Unlock()
			return
		}
		if wait := time.Until(b.queue[0].due); wait > 0 {
			b.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-b.stop:
			case <-timer.C:
			}
			continue
		}
		d := b.queue[0]
		b.queue[0] = delayedEvent{}
		b.queue = b.queue[1:]
		b.mu.Unlock()
		b.deliver(d)
	}
}

// deliver hands a due event to the inner bus.
func (b *Delayed) deliver(d delayedEvent) {
	var err error
	if d.to == broadcastTo {
		err = b.inner.Broadcast(context.Background(), d.e)
	} else {
		err = b.inner.Send(context.Background(), d.to, d.e)
	}
	if err != nil {
		b.dropped.Add(1)
	}
}

// isClosed reports whether Close was called.
func (b *Delayed) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Get returns an empty event from the inner bus.
func (b *Delayed) Get() *Event { return b.inner.Get() }

// Put returns an event to the inner bus.
func (b *Delayed) Put(e *Event) { b.inner.Put(e) }

// Close stops the delivery goroutine, drops the events still waiting and
// closes the inner bus. Closing twice is fine.
func (b *Delayed) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()
	b.mu.Lock()
	for _, d := range b.queue {
		b.inner.Put(d.e)
	}
	b.queue = nil
	b.mu.Unlock()
	return b.inner.Close()
}

var _ Bus = (*Delayed)(nil)
