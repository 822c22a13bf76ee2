// Package nats carries TokenRouter's bus over NATS, so sub-servers can run
// in other processes or on other machines. Each deployment owns a subject
// prefix; every endpoint has one subject (prefix.ep.<model>, for a
// model's further replicas prefix.ep.<model>.<replica>, or prefix.ep.front)
// and model endpoints also listen on the broadcast subject (prefix.all). Events travel in the compact, versioned binary
// encoding of codec.go, per-request algorithm state included: the
// receiving sub-server's algorithm supplies the empty state it is decoded
// into (bus.StateBinder).
//
// Ordering: an endpoint's direct and broadcast subscriptions feed one
// delivery goroutine in the order the connection received them, so
// events from one sender arrive in the order it sent them (an admit
// broadcast before the request's first peer message), as on the in-memory
// bus. The guarantee across senders is causal when every endpoint
// connects to the same NATS server.
//
// Security: Options.Auth says how a connection proves itself to the NATS
// server (user and password, token, credentials file or nkey; TLS files
// for servers that require TLS). Options.Key, when set, authenticates
// every message: each carries an HMAC-SHA256 tag over its subject and
// payload keyed by the deployment's key, and messages whose tag does not
// verify are dropped and reported (ErrAuth), so a client of the NATS
// server without the key can neither inject events nor move them between
// subjects. Nor can it replay them: every event carries its origin (the
// sending connection's random identity, a per-connection sequence number
// and the send time) under the tag, and each endpoint accepts a sender's
// sequence numbers once each, within a window of WindowSize (events of
// one sender may overtake each other), and no event of a sender it does
// not know that was sent before it attached (see Options.ClockSkew).
// Dropped messages are counted by reason (Dropped). Messages are
// authenticated, not encrypted: TLS to the server protects them on the
// wire, but any client allowed to subscribe reads them.
//
// StartServer runs an embedded NATS server on loopback for single-machine
// deployments and tests; it requires credentials generated per run.
package nats

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gonats "github.com/nats-io/nats.go"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/route"
)

// DefaultPrefix is the subject prefix when Options.Prefix is empty.
const DefaultPrefix = "tokenrouter"

// Options configure a Bus.
type Options struct {
	// Prefix names the deployment's subjects (default DefaultPrefix).
	// Deployments sharing a NATS server need distinct prefixes.
	Prefix string
	// OnError, if set, is told about events that could not be decoded or
	// were dropped. It is called from a delivery goroutine and must be
	// quick.
	OnError func(error)
	// Buffer is each endpoint's delivery buffer in messages (default
	// 65536); a full buffer drops messages (NATS slow consumer).
	Buffer int
	// Name is the connection name shown by the NATS server (Connect only).
	Name string
	// Auth says how to authenticate to the server (Connect only).
	Auth Auth
	// Key, if set (at least MinKeySize bytes), authenticates every
	// message: publishers append a tag, receivers drop messages whose tag
	// does not verify. Every connection of a deployment needs the same
	// key.
	Key []byte
	// OnReconnect, if set, is called after the connection to the server
	// was lost and restored (Connect only): messages sent to this
	// connection in between are lost. It is called from a nats.go
	// goroutine and must be quick.
	OnReconnect func()
	// ClockSkew is how far the clocks of the deployment's machines may
	// disagree (default DefaultClockSkew). An endpoint drops an event of
	// a sender it has not heard from that was sent (by the sender's
	// clock) more than ClockSkew before the endpoint attached: such an
	// event is a replay. Negative: no such check, so a restarted process
	// accepts replays of events sent before it started.
	ClockSkew time.Duration
}

// DefaultClockSkew is Options.ClockSkew when it is zero.
const DefaultClockSkew = 30 * time.Second

// Bus is the bus over a NATS connection. It implements bus.Bus and
// bus.StateBinder.
type Bus struct {
	bus.Pool
	conn *gonats.Conn
	opt  Options
	seal *sealer  // nil: messages carry no tag
	subj []string // subj[i] is model i's subject
	// rsubj names the subjects of further replicas as they are used.
	rsubjMu sync.Mutex
	rsubj   map[int]string
	front   string
	all     string
	bufs    sync.Pool
	errors  atomic.Uint64
	drops   dropCounters
	sender  uint64 // this connection's identity in every event's origin

	pubMu sync.Mutex // sequence numbers go on the wire in order
	seq   uint64     // the last event's sequence number

	mu     sync.Mutex
	eps    map[int]*endpoint
	states map[int]route.Stater
	closed bool
}

// endpoint is one attached endpoint: its subscriptions and delivery
// goroutine.
type endpoint struct {
	subs []*gonats.Subscription
	ch   chan *gonats.Msg
	quit chan struct{}
	done chan struct{}
}

// Connect dials url and returns a bus that owns the connection.
func Connect(url string, o Options) (*Bus, error) {
	b := &Bus{}
	name := o.Name
	if name == "" {
		name = "tokenrouter"
	}
	seal, err := newSealer(o.Key)
	if err != nil {
		return nil, err
	}
	auth, err := o.Auth.options()
	if err != nil {
		return nil, err
	}
	opts := append(auth, gonats.Name(name), gonats.MaxReconnects(-1),
		gonats.ReconnectWait(50*time.Millisecond), gonats.ErrorHandler(func(_ *gonats.Conn, _ *gonats.Subscription, err error) {
			b.report(fmt.Errorf("bus/nats: %w", err))
		}))
	if o.OnReconnect != nil {
		opts = append(opts, gonats.ReconnectHandler(func(*gonats.Conn) { o.OnReconnect() }))
	}
	conn, err := gonats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus/nats: connect %s: %w", url, err)
	}
	b.init(conn, o, seal)
	return b, nil
}

func (b *Bus) init(conn *gonats.Conn, o Options, seal *sealer) {
	b.seal = seal
	b.sender = incarnation()
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Buffer <= 0 {
		o.Buffer = 1 << 16
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = DefaultClockSkew
	}
	b.conn, b.opt = conn, o
	b.front, b.all = o.Prefix+".ep.front", o.Prefix+".all"
	b.subj, b.rsubj = make([]string, MaxModels), map[int]string{}
	for i := range b.subj {
		b.subj[i] = o.Prefix + ".ep." + strconv.Itoa(i)
	}
	b.eps = map[int]*endpoint{}
	b.states = map[int]route.Stater{}
}

// Conn returns the NATS connection (for heartbeats on Subject).
func (b *Bus) Conn() *gonats.Conn { return b.conn }

// Prefix returns the deployment's subject prefix.
func (b *Bus) Prefix() string { return b.opt.Prefix }

// Subject returns prefix.name, a subject of this deployment.
func (b *Bus) Subject(name string) string { return b.opt.Prefix + "." + name }

// Errors counts events that could not be encoded, decoded or delivered,
// and received messages that were dropped (Dropped).
func (b *Bus) Errors() uint64 { return b.errors.Load() }

// Dropped returns how many received messages were dropped, by reason.
func (b *Bus) Dropped() DropCounts { return b.drops.load() }

func (b *Bus) report(err error) {
	b.errors.Add(1)
	if b.opt.OnError != nil {
		b.opt.OnError(err)
	}
}

// drop counts a received message dropped for err under c and reports it.
func (b *Bus) drop(c *atomic.Uint64, err error) {
	c.Add(1)
	b.report(err)
}

func (b *Bus) subject(ep int) (string, error) {
	switch {
	case ep == bus.Frontend:
		return b.front, nil
	case ep < 0 || ep > MaxEndpoint:
		return "", fmt.Errorf("%w: %d", bus.ErrNoEndpoint, ep)
	case ep < len(b.subj):
		return b.subj[ep], nil
	}
	// A further replica of a model (DESIGN §9), named once.
	b.rsubjMu.Lock()
	defer b.rsubjMu.Unlock()
	s, ok := b.rsubj[ep]
	if !ok {
		s = b.subj[bus.ModelOf(ep)] + "." + strconv.Itoa(bus.ReplicaOf(ep))
		b.rsubj[ep] = s
	}
	return s, nil
}

// BindStates makes st supply the empty states that algorithm states
// arriving at endpoint ep are decoded into. Call it before Attach.
func (b *Bus) BindStates(ep int, st route.Stater) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states[ep] = st
}

// Attach subscribes endpoint ep (its subject, and the broadcast subject
// for a model) and starts its delivery goroutine. When Attach returns, the
// server knows the subscriptions.
func (b *Bus) Attach(ep int, h bus.Handler) error {
	subject, err := b.subject(ep)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return bus.ErrClosed
	}
	if _, dup := b.eps[ep]; dup {
		b.mu.Unlock()
		return fmt.Errorf("bus: endpoint %d attached twice", ep)
	}
	x := &endpoint{ch: make(chan *gonats.Msg, b.opt.Buffer), quit: make(chan struct{}), done: make(chan struct{})}
	// Before subscribing: nothing sent earlier can reach the endpoint.
	guard := newReplayGuard(time.Now().UnixMilli(), b.opt.ClockSkew.Milliseconds())
	subjects := []string{subject}
	if ep != bus.Frontend {
		subjects = append(subjects, b.all)
	}
	for _, s := range subjects {
		sub, err := b.conn.ChanSubscribe(s, x.ch)
		if err != nil {
			for _, s := range x.subs {
				_ = s.Unsubscribe()
			}
			b.mu.Unlock()
			return fmt.Errorf("bus/nats: subscribe %s: %w", s, err)
		}
		x.subs = append(x.subs, sub)
	}
	var newState NewStateFunc
	if st := b.states[ep]; st != nil {
		newState = func(m *route.Message) route.State {
			return st.NewState(&route.Request{ID: m.ID, Params: m.Params, PromptLen: m.PromptLen, Committed: m.Committed})
		}
	}
	b.eps[ep] = x
	b.mu.Unlock()
	go b.dispatch(x, h, guard, newState)
	if err := b.conn.Flush(); err != nil {
		b.Detach(ep)
		return fmt.Errorf("bus/nats: attach %d: %w", ep, err)
	}
	return nil
}

// dispatch decodes and delivers one endpoint's messages in arrival order.
func (b *Bus) dispatch(x *endpoint, h bus.Handler, guard *replayGuard, newState NewStateFunc) {
	defer close(x.done)
	for {
		select {
		case <-x.quit:
			return
		case m := <-x.ch:
			if e := b.receive(m, guard, newState); e != nil {
				h(e)
			}
		}
	}
}

// receive checks and decodes one message; it returns nil for a message
// it dropped (and counted).
func (b *Bus) receive(m *gonats.Msg, guard *replayGuard, newState NewStateFunc) *bus.Event {
	data, err := b.open(m.Subject, m.Data)
	if err != nil {
		b.drop(&b.drops.badTag, err) // unauthenticated: nothing in it can be trusted
		return nil
	}
	hd, err := DecodeHeader(data)
	if err != nil {
		if errors.Is(err, ErrVersion) {
			b.drop(&b.drops.version, err)
		} else {
			b.drop(&b.drops.undecodable, err)
		}
		return nil
	}
	switch guard.accept(hd.Origin) {
	case fresh:
	case stale:
		early := time.Duration(guard.horizon-hd.Origin.Time) * time.Millisecond
		b.drop(&b.drops.stale, fmt.Errorf("%w: %v %d on %s from unknown sender %x sent %v before the endpoint could receive it (or the sender's clock is behind by more than %v)",
			ErrReplay, hd.Kind, hd.ID, m.Subject, hd.Origin.Sender, early, b.opt.ClockSkew))
		return nil
	default:
		b.drop(&b.drops.replayed, fmt.Errorf("%w: %v %d on %s from sender %x: sequence number %d already seen or too old",
			ErrReplay, hd.Kind, hd.ID, m.Subject, hd.Origin.Sender, hd.Origin.Seq))
		return nil
	}
	e := b.Get()
	if _, err := DecodeEvent(data, e, newState); err != nil {
		b.Put(e)
		b.undecodable(data, err)
		return nil
	}
	return e
}

// undecodable reports a message that could not be decoded. When it was a
// peer message whose request can be named, the request ends with an error
// (done to the front end, finish to every model) instead of vanishing.
func (b *Bus) undecodable(data []byte, err error) {
	b.drop(&b.drops.undecodable, err)
	hd, herr := DecodeHeader(data)
	if herr != nil || hd.Kind != bus.Peer {
		return
	}
	ctx := context.Background()
	d := b.Get()
	d.Kind, d.ID, d.From, d.Reason = bus.Done, hd.ID, hd.From, "error"
	d.Err = fmt.Sprintf("request %d: undecodable peer message: %v", hd.ID, err)
	_ = b.Send(ctx, bus.Frontend, d)
	f := b.Get()
	f.Kind, f.ID, f.From = bus.Finish, hd.ID, hd.From
	_ = b.Broadcast(ctx, f)
}

// Detach unsubscribes endpoint ep and stops its delivery goroutine.
// Detaching an endpoint that is not attached does nothing.
func (b *Bus) Detach(ep int) {
	b.mu.Lock()
	x := b.eps[ep]
	delete(b.eps, ep)
	b.mu.Unlock()
	if x == nil {
		return
	}
	for _, s := range x.subs {
		_ = s.Unsubscribe()
	}
	close(x.quit)
	<-x.done
}

// Send publishes e to endpoint to. Ownership of e passes to the bus. A
// model that nobody serves does not make Send fail: NATS does not know,
// and the front end's liveness checks end such requests.
func (b *Bus) Send(_ context.Context, to int, e *bus.Event) error {
	subject, err := b.subject(to)
	if err != nil {
		b.Put(e)
		return err
	}
	return b.publish(subject, e)
}

// Broadcast publishes e to every model endpoint.
func (b *Bus) Broadcast(_ context.Context, e *bus.Event) error {
	return b.publish(b.all, e)
}

func (b *Bus) publish(subject string, e *bus.Event) error {
	bp, _ := b.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	buf, err := AppendEvent((*bp)[:0], Origin{Sender: b.sender, Time: time.Now().UnixMilli()}, e)
	b.Put(e)
	if err != nil {
		b.bufs.Put(bp)
		b.report(err)
		return err
	}
	// Numbered, sealed and published under one lock, so the connection
	// sends this bus's events in sequence order.
	b.pubMu.Lock()
	b.seq++
	binary.LittleEndian.PutUint64(buf[seqOffset:], b.seq)
	if b.seal != nil {
		buf = b.seal.seal(subject, buf)
	}
	err = b.conn.Publish(subject, buf)
	b.pubMu.Unlock()
	*bp = buf
	b.bufs.Put(bp)
	if err != nil {
		if errors.Is(err, gonats.ErrConnectionClosed) {
			return fmt.Errorf("%w: %w", bus.ErrClosed, err)
		}
		return fmt.Errorf("bus/nats: publish %s: %w", subject, err)
	}
	return nil
}

// open returns a received message's payload, checking its tag when the
// bus has a key.
func (b *Bus) open(subject string, data []byte) ([]byte, error) {
	if b.seal == nil {
		return data, nil
	}
	return b.seal.open(subject, data)
}

// Publish publishes data on subject (one of the deployment's, see
// Subject) outside the event encoding, with an authentication tag when
// the bus has a key. Heartbeats travel this way.
func (b *Bus) Publish(subject string, data []byte) error {
	if b.seal != nil {
		data = b.seal.seal(subject, append(make([]byte, 0, len(data)+TagSize), data...))
	}
	if err := b.conn.Publish(subject, data); err != nil {
		return fmt.Errorf("bus/nats: publish %s: %w", subject, err)
	}
	return nil
}

// Subscribe calls h with the payload of every message on subject (a
// wildcard subject is allowed) whose tag verifies when the bus has a key;
// other messages are dropped and reported. h runs on a nats.go goroutine
// and must be quick. Unsubscribe with the returned subscription.
func (b *Bus) Subscribe(subject string, h func(subject string, payload []byte)) (*gonats.Subscription, error) {
	sub, err := b.conn.Subscribe(subject, func(m *gonats.Msg) {
		data, err := b.open(m.Subject, m.Data)
		if err != nil {
			b.drop(&b.drops.badTag, err)
			return
		}
		h(m.Subject, data)
	})
	if err != nil {
		return nil, fmt.Errorf("bus/nats: subscribe %s: %w", subject, err)
	}
	return sub, nil
}

// Flush waits until the server has received everything published so far.
func (b *Bus) Flush(ctx context.Context) error {
	if err := b.conn.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("bus/nats: flush: %w", err)
	}
	return nil
}

// Close detaches every endpoint, then flushes and closes the connection.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	eps := make([]int, 0, len(b.eps))
	for ep := range b.eps {
		eps = append(eps, ep)
	}
	b.mu.Unlock()
	for _, ep := range eps {
		b.Detach(ep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = b.conn.FlushWithContext(ctx) // best effort: the server may be gone
	cancel()
	b.conn.Close()
	return nil
}

var (
	_ bus.Bus         = (*Bus)(nil)
	_ bus.StateBinder = (*Bus)(nil)
)

// incarnation returns a random non-zero identifier.
func incarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}
