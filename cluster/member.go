package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// MemberConfig configures one model's sub-server running on its own.
type MemberConfig struct {
	// URL is the NATS server (nats://host:port).
	URL string
	// Secrets are the NATS credentials and the deployment's message key
	// (required: front end and members must share it).
	Secrets Secrets
	// Prefix is the deployment's subject prefix (default
	// bus/nats.DefaultPrefix).
	Prefix string
	// Member is the model, opened, that builds the sub-server
	// (system.OpenMember): its index, the deployment's model names and
	// algorithm, its launch policy and the rest of its Spec. RunMember
	// closes its engine (or the one that replaced it) when it returns.
	Member *system.Member
	// Heartbeat is the heartbeat interval (default DefaultHeartbeat) and
	// Misses the number of missed front-end heartbeats after which the
	// member drops every request (default DefaultMisses). Front end and
	// members must agree on both.
	Heartbeat time.Duration
	Misses    int
	// OnEvent, if set, is told about membership changes (for logs).
	OnEvent func(msg string, args ...any)
	// Drain bounds the draining of a replica whose model has other
	// replicas when ctx ends: it takes no new request (its heartbeats say
	// it drains), finishes those it holds, then leaves; whatever it still
	// holds after Drain goes on on the other replicas. 0: leave at once.
	Drain time.Duration
}

func (c *MemberConfig) defaults() error {
	if c.Member == nil {
		return errors.New("cluster: member needs its model (system.OpenMember)")
	}
	if len(c.Secrets.Key) < busnats.MinKeySize {
		return fmt.Errorf("cluster: member needs the deployment's message key (at least %d bytes)", busnats.MinKeySize)
	}
	if c.Prefix == "" {
		c.Prefix = busnats.DefaultPrefix
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Misses <= 0 {
		c.Misses = DefaultMisses
	}
	if c.OnEvent == nil {
		c.OnEvent = func(string, ...any) {}
	}
	return nil
}

// RunMember runs one model's sub-server on the NATS bus until ctx ends,
// announcing it with heartbeats. It serves one front end at a time: when
// the front end stops beating (Misses intervals) or a new one appears, the
// sub-server restarts empty, freeing every request it held; so it does
// when its connection to NATS was lost and restored (events may have been
// lost), and it announces that by beating for no front end until the
// front end's next heartbeat.
func RunMember(ctx context.Context, cfg MemberConfig) (err error) {
	if err := cfg.defaults(); err != nil {
		if cfg.Member != nil {
			err = errors.Join(err, cfg.Member.Engine().Close())
		}
		return err
	}
	spec := cfg.Member.Spec()
	m := &member{cfg: cfg, index: cfg.Member.Index(), replica: cfg.Member.Replica(), models: spec.Names(), algorithm: spec.Algorithm,
		eng: cfg.Member.Engine(), inc: incarnation()}
	m.ep = bus.Endpoint(m.index, m.replica)
	if counts := cfg.Member.Replicas(); slices.Max(counts) > 1 {
		m.view = newView(counts, m.inc)
	}
	defer func() { err = errors.Join(err, m.eng.Close()) }()
	lost := make(chan struct{}, 1)
	b, err := busnats.Connect(cfg.URL, busnats.Options{Prefix: cfg.Prefix, Name: fmt.Sprintf("tokenrouter-model-%d-%d", m.index, m.replica),
		Auth: cfg.Secrets.Auth, Key: cfg.Secrets.Key, OnReconnect: func() { signal(lost) }})
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", m.index, err)
	}
	defer b.Close()
	fronts := make(chan Beat, 64)
	unsubscribe, err := subscribeFronts(b, cfg.Prefix, fronts)
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", m.index, err)
	}
	defer unsubscribe()

	m.bus = b
	if err := m.start(); err != nil {
		return err
	}
	defer m.stop()
	return m.serve(ctx, lost, fronts)
}

// subscribeFronts forwards the front ends' heartbeats to fronts, dropping
// those it has no room for; it returns the function that unsubscribes.
func subscribeFronts(b *busnats.Bus, prefix string, fronts chan<- Beat) (func(), error) {
	sub, err := b.Subscribe(beatSubject(prefix, -1), func(_ string, data []byte) {
		if fb, err := decodeBeat(data); err == nil && fb.Index == -1 {
			select {
			case fronts <- fb:
			default: // beats are periodic: a dropped one is replaced
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// frontEnd is the front end a member serves, as its heartbeats tell.
type frontEnd struct {
	inc   uint64    // its incarnation; 0 for none
	last  time.Time // when its last fresh heartbeat arrived
	fresh *freshness
}

// serve beats and follows the front end until ctx ends or the sub-server
// fails, restarting the sub-server empty whenever the front end changes
// or the connection to NATS was restored.
func (m *member) serve(ctx context.Context, lost <-chan struct{}, fronts <-chan Beat) error {
	cfg := m.cfg
	tick := time.NewTicker(cfg.Heartbeat)
	defer tick.Stop()
	f := frontEnd{fresh: newFreshness(1)}
	m.beat(f.inc)
	stop, drain := ctx.Done(), time.Time{}
	for {
		var err error
		select {
		case <-stop:
			if m.view == nil || cfg.Drain <= 0 || f.inc == 0 {
				m.leave(f.inc)
				return nil
			}
			cfg.OnEvent("draining: finishing the requests held before stopping", "model", m.index, "replica", m.replica)
			stop, drain, m.draining = nil, time.Now().Add(cfg.Drain), true
			m.beat(f.inc)
		case err := <-m.done:
			m.cancel()
			m.eng, m.s = m.s.Engine(), nil
			return fmt.Errorf("cluster: model %d: %w", m.index, err)
		case <-lost:
			cfg.OnEvent("NATS connection restored: dropping every request", "model", m.index)
			err = m.restart()
			f.inc = 0
			if err == nil {
				m.beat(f.inc)
			}
		case fb := <-fronts:
			err = m.frontBeat(&f, fb)
		case <-tick.C:
			if m.draining && (m.idle() || time.Now().After(drain)) {
				m.leave(f.inc)
				return nil
			}
			err = m.tick(&f)
		}
		if err != nil {
			return err
		}
	}
}

// idle reports whether the sub-server holds no request: none queued,
// runnable, or holding KV.
func (m *member) idle() bool {
	l := m.s.Load()
	return l.Queued+l.Runnable+l.KV == 0
}

// leave stops the sub-server and sends the last heartbeat, Leaving: the
// front end takes this replica down at once, and whatever it still held
// goes on on the model's other replicas.
func (m *member) leave(front uint64) {
	m.stop()
	b := m.next(front)
	b.Leaving = true
	_ = m.bus.Publish(beatSubject(m.cfg.Prefix, m.ep), b.encode())
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Heartbeat)
	defer cancel()
	_ = m.bus.Flush(ctx) // the front end notices the silence anyway
}

// frontBeat takes a front end's heartbeat: a new front end restarts the
// sub-server (unless none was served) and is announced.
func (m *member) frontBeat(f *frontEnd, fb Beat) error {
	if !f.fresh.accept(0, fb.Incarnation, fb.Seq) {
		return nil // replayed, or from a front end that was replaced
	}
	f.last = time.Now()
	if m.view != nil && fb.Placing && (fb.Incarnation == f.inc || f.inc == 0) {
		m.view.apply(fb.Up)
	}
	if fb.Incarnation == f.inc {
		return nil
	}
	if f.inc != 0 {
		m.cfg.OnEvent("new front end: dropping every request", "model", m.index)
		if err := m.restart(); err != nil {
			return err
		}
	} else {
		m.cfg.OnEvent("serving front end", "model", m.index)
	}
	f.inc = fb.Incarnation
	m.beat(f.inc)
	return nil
}

// tick beats, after restarting the sub-server when the front end missed
// too many heartbeats.
func (m *member) tick(f *frontEnd) error {
	if f.inc != 0 && time.Since(f.last) > time.Duration(m.cfg.Misses)*m.cfg.Heartbeat {
		m.cfg.OnEvent("front end lost: dropping every request", "model", m.index)
		if err := m.restart(); err != nil {
			return err
		}
		f.inc = 0
	}
	m.beat(f.inc)
	return nil
}

// member is RunMember's running state.
type member struct {
	cfg       MemberConfig
	index     int      // the model's index
	replica   int      // its replica
	ep        int      // its bus endpoint
	view      *view    // the replicas, for the hand-offs (nil: one each)
	draining  bool     // asked to stop: drains before it leaves
	models    []string // the deployment's model names
	algorithm string
	bus       *busnats.Bus
	eng       engine.Engine // the engine now (a reopened one after a panic)
	inc       uint64
	seq       uint64
	s         *subserver.Server
	cancel    context.CancelFunc
	done      chan error
}

// start builds a fresh algorithm instance and sub-server and runs it.
func (m *member) start() error {
	var pl subserver.Placer
	if m.view != nil {
		pl = m.view
	}
	s, err := m.cfg.Member.SubServer(m.eng, m.bus, pl)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.s, m.cancel, m.done = s, cancel, make(chan error, 1)
	go func() { m.done <- s.Run(ctx) }()
	return nil
}

// stop stops the sub-server; it detaches and frees every request's KV.
func (m *member) stop() {
	if m.s == nil {
		return
	}
	m.cancel()
	<-m.done
	m.eng = m.s.Engine()
	m.s = nil
}

func (m *member) restart() error {
	m.stop()
	return m.start()
}

// beat publishes a heartbeat.
func (m *member) beat(front uint64) {
	b := m.next(front)
	b.Stats, b.Load, b.Goroutines, b.BusDropped, b.Draining = m.s.Stats(), m.s.Load(), runtime.NumGoroutine(), m.bus.Dropped(), m.draining
	if m.view != nil {
		b.Placements = m.view.placements()
	}
	_ = m.bus.Publish(beatSubject(m.cfg.Prefix, m.ep), b.encode()) // a lost beat is replaced by the next
}

// next returns the member's next heartbeat, serving front end front, with
// what identifies it and nothing of its sub-server.
func (m *member) next(front uint64) Beat {
	m.seq++
	return Beat{Index: m.index, Replica: m.replica, Models: m.models, Algorithm: m.algorithm, Incarnation: m.inc, Seq: m.seq,
		Front: front, Info: m.eng.Info()}
}

// signal wakes the receiver of ch (capacity 1) without blocking.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already signalled
	}
}
