// Package bus is the only thing TokenRouter's sub-servers share: a channel
// for events between endpoints. Each model's sub-server is one endpoint and
// the front end (which admits requests and streams their tokens) is another.
// Events are peer messages (a request moving between models), admit, finish
// and cancel broadcasts (which keep every sub-server's view of the active
// requests current), and commit and done events for the front end.
//
// This package defines the Bus interface and the in-memory implementation
// used inside one process; bus/nats carries the same events across
// processes and machines.
package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// Frontend is the endpoint of the front end.
const Frontend = -1

// Endpoints of replicas (DESIGN §9). A model with several replicas has one
// endpoint per replica: replica r of model m is endpoint
// m + r·ReplicaStride. Replica 0 is the model index itself, so a deployment
// without replicas addresses its models as before, and every replica's
// endpoint is a distinct number on any bus (bus/nats gives it its own
// subject).
const (
	// ReplicaStride separates the endpoints of one model's replicas: the
	// most models a deployment has.
	ReplicaStride = 128
	// MaxReplicas bounds the replicas of one model.
	MaxReplicas = 64
)

// Endpoint returns the endpoint of replica replica of model model.
func Endpoint(model, replica int) int { return model + replica*ReplicaStride }

// ModelOf returns the model an endpoint belongs to (Frontend for the front
// end).
func ModelOf(ep int) int {
	if ep < 0 {
		return ep
	}
	return ep % ReplicaStride
}

// ReplicaOf returns the replica an endpoint is (0 for the front end).
func ReplicaOf(ep int) int {
	if ep < 0 {
		return 0
	}
	return ep / ReplicaStride
}

// Kind says what an event means.
type Kind uint8

const (
	// Peer carries a request to a model (Msg). The first peer message of a
	// request comes from the front end with the whole prompt.
	Peer Kind = iota + 1
	// Admit announces a new request to every sub-server.
	Admit
	// Finish announces that a request ended; every sub-server frees it.
	Finish
	// Cancel asks every sub-server to drop a request wherever it is.
	Cancel
	// Commit carries newly committed tokens to the front end.
	Commit
	// Done tells the front end that a request ended (Reason, Err).
	Done
	// Released tells the endpoint a request last arrived from that it
	// moved on elsewhere: the sender no longer answers for the hand-off it
	// made (DESIGN §9).
	Released
	// Lost announces that a replica is gone (Endpoint): whoever answers
	// for a hand-off to it sends the request again to another replica of
	// the model (DESIGN §9).
	Lost
)

// ReasonUnavailable is the Done reason of a request that ended because a
// model it was handed to had no replica up; the front end ends it with an
// error saying the model is unavailable (other Done reasons are the
// stream's: "length", "stop", "cancelled", "error").
const ReasonUnavailable = "unavailable"

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Peer:
		return "peer"
	case Admit:
		return "admit"
	case Finish:
		return "finish"
	case Cancel:
		return "cancel"
	case Commit:
		return "commit"
	case Done:
		return "done"
	case Released:
		return "released"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one message on the bus. Ownership passes with Send: the receiver
// hands it back with Bus.Put when done, so steady-state traffic allocates
// nothing.
type Event struct {
	// Kind says what the event means.
	Kind Kind
	// ID names the request.
	ID uint64
	// From is the sending endpoint.
	From int
	// Msg is the peer message (Peer).
	Msg route.Message
	// Tokens are newly committed tokens (Commit), starting at output
	// position Pos.
	Tokens []int32
	// By[i] is the model that produced Tokens[i] (Commit).
	By []int8
	// Logprobs[i] is Tokens[i]'s log-probability by the model that
	// produced it (Commit, when the request asked for them).
	Logprobs []engine.Logprob
	// Pos is the output position of Tokens[0] (Commit).
	Pos int
	// Reason says why a request ended (Done): "length", "stop",
	// "cancelled" or "error".
	Reason string
	// Err describes a failure (Done with Reason "error").
	Err string
	// Endpoint is the replica that is gone (Lost).
	Endpoint int
}

// Reset clears e for reuse, keeping slice capacity.
func (e *Event) Reset() {
	tok, by, msgTok, seen := e.Tokens[:0], e.By[:0], e.Msg.Tokens[:0], e.Msg.Seen[:0]
	msgBy, verify, verdict, placed := e.Msg.By[:0], e.Msg.Verify[:0], e.Msg.Verdict[:0], e.Msg.Placed[:0]
	*e = Event{Tokens: tok, By: by}
	e.Msg.Tokens, e.Msg.Seen, e.Msg.By = msgTok, seen, msgBy
	e.Msg.Verify, e.Msg.Verdict, e.Msg.Placed = verify, verdict, placed
}

// Handler receives events for one endpoint. It must not block: it queues
// the event for the endpoint's owner goroutine.
type Handler func(*Event)

// Bus moves events between endpoints.
type Bus interface {
	// Attach registers h as the inbox of endpoint ep (a model index, a
	// replica's Endpoint, or Frontend). Attaching an endpoint twice is an
	// error.
	Attach(ep int, h Handler) error
	// Detach removes endpoint ep.
	Detach(ep int)
	// Send hands e to endpoint to. Ownership of e passes to the bus.
	Send(ctx context.Context, to int, e *Event) error
	// Broadcast sends a copy of e to every model endpoint, every replica's
	// (not the front end). Ownership of e passes to the bus.
	Broadcast(ctx context.Context, e *Event) error
	// Get returns an empty event.
	Get() *Event
	// Put returns an event the caller owns for reuse.
	Put(e *Event)
	// Close releases the bus.
	Close() error
}

// StateBinder is implemented by buses that carry events in encoded form
// (bus/nats): an algorithm state arriving at endpoint ep is decoded into
// an empty state from the receiving endpoint's algorithm. Sub-servers bind
// their algorithm before they attach.
type StateBinder interface {
	// BindStates makes st supply the empty states decoded at endpoint ep.
	BindStates(ep int, st route.Stater)
}

// ErrNoEndpoint reports a Send to an endpoint nobody attached.
var ErrNoEndpoint = errors.New("bus: no such endpoint")

// ErrClosed reports use of a closed bus.
var ErrClosed = errors.New("bus: closed")

// Pool recycles events. The zero value is ready to use.
type Pool struct{ p sync.Pool }

// Get returns an empty event.
func (p *Pool) Get() *Event {
	if e, ok := p.p.Get().(*Event); ok {
		return e
	}
	return &Event{}
}

// Put resets e and keeps it for reuse.
func (p *Pool) Put(e *Event) {
	if e == nil {
		return
	}
	e.Reset()
	p.p.Put(e)
}

// Copy makes dst a deep copy of src, reusing dst's slices.
func Copy(dst, src *Event) {
	tok, by := append(dst.Tokens[:0], src.Tokens...), append(dst.By[:0], src.By...)
	mt, ms, mb := append(dst.Msg.Tokens[:0], src.Msg.Tokens...), append(dst.Msg.Seen[:0], src.Msg.Seen...), append(dst.Msg.By[:0], src.Msg.By...)
	mv, md := append(dst.Msg.Verify[:0], src.Msg.Verify...), append(dst.Msg.Verdict[:0], src.Msg.Verdict...)
	mp := append(dst.Msg.Placed[:0], src.Msg.Placed...)
	*dst = *src
	dst.Tokens, dst.By = tok, by
	dst.Msg.Tokens, dst.Msg.Seen, dst.Msg.By = mt, ms, mb
	dst.Msg.Verify, dst.Msg.Verdict, dst.Msg.Placed = mv, md, mp
	dst.Logprobs, dst.Msg.Logprobs = slices.Clone(src.Logprobs), slices.Clone(src.Msg.Logprobs)
}

// Memory is the in-process bus: Send calls the receiver's handler directly.
type Memory struct {
	Pool
	mu     sync.RWMutex
	eps    map[int]Handler
	models []int
	closed bool
}

// NewMemory returns an in-memory bus.
func NewMemory() *Memory { return &Memory{eps: map[int]Handler{}} }

// Attach registers an endpoint.
func (m *Memory) Attach(ep int, h Handler) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, dup := m.eps[ep]; dup {
		return fmt.Errorf("bus: endpoint %d attached twice", ep)
	}
	m.eps[ep] = h
	if ep != Frontend {
		m.models = append(m.models, ep)
	}
	return nil
}

// Detach removes an endpoint.
func (m *Memory) Detach(ep int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.eps, ep)
	for i, x := range m.models {
		if x == ep {
			m.models = append(m.models[:i], m.models[i+1:]...)
			break
		}
	}
}

// Send delivers e to endpoint to.
func (m *Memory) Send(_ context.Context, to int, e *Event) error {
	m.mu.RLock()
	h, ok := m.eps[to]
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		m.Put(e)
		return ErrClosed
	}
	if !ok {
		m.Put(e)
		return fmt.Errorf("%w: %d", ErrNoEndpoint, to)
	}
	h(e)
	return nil
}

// Broadcast delivers a copy of e to every model endpoint.
func (m *Memory) Broadcast(_ context.Context, e *Event) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	defer m.Put(e)
	if m.closed {
		return ErrClosed
	}
	for _, ep := range m.models {
		c := m.Get()
		Copy(c, e)
		m.eps[ep](c)
	}
	return nil
}

// Close stops delivery.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	clear(m.eps)
	m.models = nil
	return nil
}

var _ Bus = (*Memory)(nil)
