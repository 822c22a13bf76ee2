package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
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
	// Index is this model's index in Models.
	Index int
	// Models are the deployment's model names, in the algorithm's order.
	Models []string
	// Engine runs the model; RunMember closes it when it returns.
	Engine engine.Engine
	// Registry, Algorithm and Params build this model's algorithm
	// instance, as the front end builds its own.
	Registry  *route.Registry
	Algorithm string
	Params    map[string]string
	// Policy is the model's launch policy.
	Policy sched.Policy
	// MaxBatch bounds a step's batch (0: the sub-server default).
	MaxBatch int
	// Vocab returns the model's vocabulary for structured output
	// (subserver.Config.Vocab; nil refuses requests with a schema).
	Vocab func() *constrain.Vocab
	// Heartbeat is the heartbeat interval (default DefaultHeartbeat) and
	// Misses the number of missed front-end heartbeats after which the
	// member drops every request (default DefaultMisses). Front end and
	// members must agree on both.
	Heartbeat time.Duration
	Misses    int
	// Speculate configures the sub-server's speculative continuation.
	Speculate subserver.Speculation
	// Reopen and OnPanic: see subserver.Config. Without Reopen, an engine
	// that panicked ends RunMember with an error (a supervisor restarts
	// the process).
	Reopen  func(context.Context) (engine.Engine, error)
	OnPanic func(*subserver.Panic)
	// OnEvent, if set, is told about membership changes (for logs).
	OnEvent func(msg string, args ...any)
}

func (c *MemberConfig) defaults() error {
	if c.Engine == nil || c.Registry == nil {
		return errors.New("cluster: member needs an engine and an algorithm registry")
	}
	if len(c.Secrets.Key) < busnats.MinKeySize {
		return fmt.Errorf("cluster: member needs the deployment's message key (at least %d bytes)", busnats.MinKeySize)
	}
	if c.Index < 0 || c.Index >= len(c.Models) {
		return fmt.Errorf("cluster: model index %d of %d models", c.Index, len(c.Models))
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
		return err
	}
	m := &member{cfg: cfg, eng: cfg.Engine, inc: incarnation()}
	defer func() { err = errors.Join(err, m.eng.Close()) }()
	lost := make(chan struct{}, 1)
	b, err := busnats.Connect(cfg.URL, busnats.Options{Prefix: cfg.Prefix, Name: fmt.Sprintf("tokenrouter-model-%d", cfg.Index),
		Auth: cfg.Secrets.Auth, Key: cfg.Secrets.Key, OnReconnect: func() { signal(lost) }})
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", cfg.Index, err)
	}
	defer b.Close()
	fronts := make(chan Beat, 64)
	unsubscribe, err := subscribeFronts(b, cfg.Prefix, fronts)
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", cfg.Index, err)
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
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case err := <-m.done:
			m.cancel()
			m.eng, m.s = m.s.Engine(), nil
			return fmt.Errorf("cluster: model %d: %w", cfg.Index, err)
		case <-lost:
			cfg.OnEvent("NATS connection restored: dropping every request", "model", cfg.Index)
			err = m.restart()
			f.inc = 0
			if err == nil {
				m.beat(f.inc)
			}
		case fb := <-fronts:
			err = m.frontBeat(&f, fb)
		case <-tick.C:
			err = m.tick(&f)
		}
		if err != nil {
			return err
		}
	}
}

// frontBeat takes a front end's heartbeat: a new front end restarts the
// sub-server (unless none was served) and is announced.
func (m *member) frontBeat(f *frontEnd, fb Beat) error {
	if !f.fresh.accept(0, fb.Incarnation, fb.Seq) {
		return nil // replayed, or from a front end that was replaced
	}
	f.last = time.Now()
	if fb.Incarnation == f.inc {
		return nil
	}
	if f.inc != 0 {
		m.cfg.OnEvent("new front end: dropping every request", "model", m.cfg.Index)
		if err := m.restart(); err != nil {
			return err
		}
	} else {
		m.cfg.OnEvent("serving front end", "model", m.cfg.Index)
	}
	f.inc = fb.Incarnation
	m.beat(f.inc)
	return nil
}

// tick beats, after restarting the sub-server when the front end missed
// too many heartbeats.
func (m *member) tick(f *frontEnd) error {
	if f.inc != 0 && time.Since(f.last) > time.Duration(m.cfg.Misses)*m.cfg.Heartbeat {
		m.cfg.OnEvent("front end lost: dropping every request", "model", m.cfg.Index)
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
	cfg    MemberConfig
	bus    *busnats.Bus
	eng    engine.Engine // the engine now (a reopened one after a panic)
	inc    uint64
	seq    uint64
	s      *subserver.Server
	cancel context.CancelFunc
	done   chan error
}

// start builds a fresh algorithm instance and sub-server and runs it.
func (m *member) start() error {
	c := m.cfg
	alg, err := c.Registry.New(c.Algorithm, route.Spec{Model: c.Index, Models: c.Models, Params: c.Params})
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", c.Index, err)
	}
	s, err := subserver.New(subserver.Config{Index: c.Index, Models: len(c.Models), Name: c.Models[c.Index], Engine: m.eng,
		Algorithm: alg, Policy: c.Policy, Bus: m.bus, MaxBatch: c.MaxBatch, Vocab: c.Vocab, Speculate: c.Speculate,
		Reopen: c.Reopen, OnPanic: c.OnPanic})
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", c.Index, err)
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
	m.seq++
	b := Beat{Index: m.cfg.Index, Models: m.cfg.Models, Algorithm: m.cfg.Algorithm, Incarnation: m.inc, Seq: m.seq, Front: front,
		Info: m.eng.Info(), Stats: m.s.Stats(), Goroutines: runtime.NumGoroutine(),
		BusDropped: m.bus.Dropped()}
	_ = m.bus.Publish(beatSubject(m.cfg.Prefix, m.cfg.Index), b.encode()) // a lost beat is replaced by the next
}

// signal wakes the receiver of ch (capacity 1) without blocking.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already signalled
	}
}
