package subserver

import (
	"sync"
	"sync/atomic"

	"github.com/tokenrouter/tokenrouter/bus"
)

// queue is a sub-server's inbox: a mutex-guarded slice drained as a batch,
// with a one-slot signal channel to wake the owner.
type queue struct {
	mu    sync.Mutex
	buf   []*bus.Event
	wake  chan struct{}
	peers atomic.Int64 // peer messages queued (Server.Load)
}

func newQueue() *queue { return &queue{wake: make(chan struct{}, 1)} }

// push adds e and wakes the owner. It never blocks.
func (q *queue) push(e *bus.Event) {
	if e.Kind == bus.Peer {
		q.peers.Add(1)
	}
	q.mu.Lock()
	q.buf = append(q.buf, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// drain swaps the queued events into spare (which must be empty) and
// returns them; the caller passes the returned slice back next time.
func (q *queue) drain(spare []*bus.Event) []*bus.Event {
	q.mu.Lock()
	out := q.buf
	q.buf = spare[:0]
	q.mu.Unlock()
	n := 0
	for _, e := range out {
		if e.Kind == bus.Peer {
			n++
		}
	}
	q.peers.Add(int64(-n))
	return out
}
