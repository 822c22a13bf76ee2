package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gonats "github.com/nats-io/nats.go"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// FrontConfig configures the front end of a deployment whose sub-servers
// run elsewhere.
type FrontConfig struct {
	// URL is the NATS server.
	URL string
	// Secrets: see MemberConfig.
	Secrets Secrets
	// Prefix is the deployment's subject prefix (default
	// bus/nats.DefaultPrefix).
	Prefix string
	// Spec is the deployment: its models (by name, in the algorithm's
	// order; every one must join), the algorithm (members must run the
	// same) and the front end's options, with which system.Remote builds
	// the front end's deployment. Its StallTimeout is the stall
	// watchdog's timeout (subserver.Stalled, read from the members'
	// heartbeats; 0: automatic, negative: none): a member found stalled
	// is marked down as one that missed its heartbeats: Watch is told,
	// and a supervisor kills and restarts it.
	Spec system.Spec
	// Heartbeat and Misses: see MemberConfig.
	Heartbeat time.Duration
	Misses    int
	// JoinTimeout bounds the wait for every replica of every model to
	// announce itself (default 30s); ctx can end it earlier. At the
	// timeout the front end starts if each model has a replica up; the
	// others join when they come (scaling up).
	JoinTimeout time.Duration
	// OnEvent, if set, is told about membership changes (for logs).
	OnEvent func(msg string, args ...any)
	// Watch, if set, is told when member slot goes up (up) or down;
	// missed says it went down because it missed its heartbeats (hung or
	// dead, not restarted). Slots number the models' replicas in model
	// order (Slots); without replicas, slot i is model i. It is called
	// from the front end's monitor and must be quick.
	Watch func(slot int, up, missed bool)
}

// Member is the front end's view of one sub-server: one replica of one
// model.
type Member struct {
	// Model and Replica say which.
	Model, Replica int
	// Up says whether the model serves requests.
	Up bool
	// Last is its last heartbeat, Seen when it arrived.
	Last Beat
	Seen time.Time
	// Restarts counts the times it came back as a new process (a new
	// incarnation) after it had joined.
	Restarts int
	joined   bool      // it has served this front end
	quiet    time.Time // its silence counts from here: its last beat, or the front end's reconnection if later
	reported bool      // its silence was reported to Watch, and no beat has come since
}

// Front is a running front end: a deployment over remote models and the
// liveness monitor that marks them down and up.
type Front struct {
	cfg    FrontConfig
	models []string // cfg.Spec's model names
	slots  Slots
	bus    *busnats.Bus
	r      *deploy.Deployment
	dep    atomic.Pointer[deploy.Deployment] // r, once built (for announce)
	inc    uint64
	seq    atomic.Uint64 // the last heartbeat's number
	sub    *gonats.Subscription
	beats  chan Beat
	lost   chan struct{} // the NATS connection was lost and restored
	poke   chan struct{} // a replica went up or down: beat now
	exits  chan exit     // member processes that exited (Exited)
	fresh  *freshness    // owned by await, then by monitor
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	members []Member
}

// Join connects to NATS, waits until every replica of every model serves
// this front end (or, at JoinTimeout, one of each), and returns the
// running front end.
func Join(ctx context.Context, cfg FrontConfig) (*Front, error) {
	models := cfg.Spec.Names()
	if len(models) == 0 || cfg.Spec.Registry == nil {
		return nil, errors.New("cluster: front end needs models and an algorithm registry")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = busnats.DefaultPrefix
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Misses <= 0 {
		cfg.Misses = DefaultMisses
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 30 * time.Second
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(string, ...any) {}
	}
	if cfg.Watch == nil {
		cfg.Watch = func(int, bool, bool) {}
	}
	if len(cfg.Secrets.Key) < busnats.MinKeySize {
		return nil, fmt.Errorf("cluster: front end needs the deployment's message key (at least %d bytes)", busnats.MinKeySize)
	}
	lost := make(chan struct{}, 1)
	b, err := busnats.Connect(cfg.URL, busnats.Options{Prefix: cfg.Prefix, Name: "tokenrouter-front",
		Auth: cfg.Secrets.Auth, Key: cfg.Secrets.Key, OnReconnect: func() { signal(lost) }})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	slots := SlotsOf(cfg.Spec)
	f := &Front{cfg: cfg, models: models, slots: slots, bus: b, inc: incarnation(), beats: make(chan Beat, 1024), lost: lost,
		poke: make(chan struct{}, 1), exits: make(chan exit, 64), fresh: newFreshness(slots.Len()), members: make([]Member, slots.Len())}
	for k := range f.members {
		f.members[k].Model, f.members[k].Replica = slots.Of(k)
	}
	f.sub, err = b.Subscribe(cfg.Prefix+".hb.*", func(_ string, data []byte) {
		if mb, err := decodeBeat(data); err == nil && slots.Slot(mb.Index, mb.Replica) >= 0 {
			select {
			case f.beats <- mb:
			default: // beats are periodic: a dropped one is replaced
			}
		}
	})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(1)
	go f.announce(mctx)
	infos, err := f.await(ctx)
	if err != nil {
		f.shutdown()
		return nil, err
	}
	f.r, err = system.Remote(cfg.Spec, infos, b)
	if err != nil {
		f.shutdown()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for k, m := range f.Members() {
		if m.Up {
			f.r.ReplicaUp(slots.Of(k))
		}
	}
	f.dep.Store(f.r)
	signal(f.poke)
	f.wg.Add(1)
	go f.monitor(mctx)
	return f, nil
}

// check says why a member's beat does not fit this deployment.
func (f *Front) check(b Beat) error {
	if !slices.Equal(b.Models, f.models) || b.Algorithm != f.cfg.Spec.Algorithm {
		return fmt.Errorf("cluster: model %d runs models %v with %q; this front end has %v with %q",
			b.Index, b.Models, b.Algorithm, f.models, f.cfg.Spec.Algorithm)
	}
	return nil
}

// await waits until every replica of every model beats for this front
// end. At JoinTimeout, a deployment with at least one replica of each
// model starts without the others, which join when they come (scaling
// up); one without is refused.
func (f *Front) await(parent context.Context) ([]engine.Info, error) {
	ctx, cancel := context.WithTimeout(parent, f.cfg.JoinTimeout)
	defer cancel()
	infos := make([]engine.Info, len(f.models))
	joined := make([]bool, f.slots.Len())
	left := len(joined)
	var last error
	for left > 0 {
		select {
		case <-ctx.Done():
			var missing []string
			for k, ok := range joined {
				if !ok {
					missing = append(missing, f.slots.Name(f.models, k))
				}
			}
			if parent.Err() == nil && f.everyModel(joined) {
				f.cfg.OnEvent("starting without some replicas: they join when they come", "missing", missing)
				return infos, nil
			}
			return nil, fmt.Errorf("cluster: models %v did not join (%w; last problem: %v)", missing, ctx.Err(), last)
		case b := <-f.beats:
			k := f.slots.Slot(b.Index, b.Replica)
			if !f.fresh.accept(k, b.Incarnation, b.Seq) {
				continue
			}
			if err := f.check(b); err != nil {
				last = err
				continue
			}
			f.note(k, b, b.Front == f.inc)
			if b.Front == f.inc && !joined[k] {
				joined[k], infos[b.Index] = true, b.Info
				left--
				f.cfg.OnEvent("model joined", "model", f.models[b.Index], "index", b.Index, "replica", b.Replica)
				f.cfg.Watch(k, true, false)
			}
		}
	}
	return infos, nil
}

// everyModel reports whether at least one replica of every model joined.
func (f *Front) everyModel(joined []bool) bool {
	for i := range f.models {
		ok := false
		for rep := range f.slots.Count(i) {
			ok = ok || joined[f.slots.Slot(i, rep)]
		}
		if !ok {
			return false
		}
	}
	return true
}

// note records beat b of member slot k, up or not.
func (f *Front) note(k int, b Beat, up bool) {
	f.mu.Lock()
	m := &f.members[k]
	if m.Last.Incarnation != 0 && m.Last.Incarnation != b.Incarnation && m.joined {
		m.Restarts++
	}
	m.joined = m.joined || up
	m.Up, m.Last, m.Seen = up, b, time.Now()
	m.quiet, m.reported = m.Seen, false
	f.mu.Unlock()
}

// announce publishes the front end's heartbeats.
func (f *Front) announce(ctx context.Context) {
	defer f.wg.Done()
	beat := Beat{Index: -1, Incarnation: f.inc, Models: f.models, Algorithm: f.cfg.Spec.Algorithm}
	subject := beatSubject(f.cfg.Prefix, -1)
	tick := time.NewTicker(f.cfg.Heartbeat)
	defer tick.Stop()
	for {
		beat.Seq = f.seq.Add(1)
		beat.Up = f.upReplicas(beat.Up[:0])
		beat.Placing = f.dep.Load() != nil
		_ = f.bus.Publish(subject, beat.encode()) // a lost beat is replaced by the next
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-f.poke: // the members learn of a replica up or down now
		}
	}
}

// monitor marks models down when they miss heartbeats, restart or lose
// their state, and up when they serve this front end again.
func (f *Front) monitor(ctx context.Context) {
	defer f.wg.Done()
	tick := time.NewTicker(f.cfg.Heartbeat / 2)
	defer tick.Stop()
	limit := time.Duration(f.cfg.Misses) * f.cfg.Heartbeat
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.lost:
			// Events sent to this front end while it was disconnected are
			// lost: every request in flight ends; the models come back up
			// with their next heartbeat. Their silence counts from now: a
			// model that beats no more (hung, stopped) is reported below.
			now := time.Now()
			f.mu.Lock()
			for i := range f.members {
				f.members[i].quiet = now
			}
			f.mu.Unlock()
			for k := range f.members {
				f.down(k, errors.New("the front end's NATS connection was lost and restored; events in flight may be lost"), false)
			}
		case b := <-f.beats:
			f.memberBeat(b)
		case x := <-f.exits:
			f.mu.Lock()
			m := f.members[x.slot]
			f.mu.Unlock()
			if m.Up && m.Seen.Before(x.at) { // no beat of a new process yet
				f.down(x.slot, x.cause, false)
			}
		case now := <-tick.C:
			for i := range f.members {
				f.mu.Lock()
				m := f.members[i]
				silent := m.joined && !m.reported && now.Sub(m.quiet) > limit
				f.members[i].reported = m.reported || silent
				f.mu.Unlock()
				switch {
				case silent && m.Up:
					f.down(i, fmt.Errorf("sub-server missed %d heartbeats (none for %v)", f.cfg.Misses, now.Sub(m.Seen).Round(time.Millisecond)), true)
				case silent:
					// Down already (the front end's connection was lost
					// and restored), and silent since: hung or stopped.
					f.cfg.OnEvent("model silent", "member", f.slots.Name(f.models, i), "for", now.Sub(m.quiet).Round(time.Millisecond))
					f.cfg.Watch(i, false, true)
				}
			}
		}
	}
}

// exit is a member process's exit, as its supervisor saw it.
type exit struct {
	slot  int
	at    time.Time
	cause error
}

// Exited tells the front end that the process of member slot exited at
// time at (its supervisor saw it): it goes down now rather than after its
// missed heartbeats, unless a new process beat since.
func (f *Front) Exited(slot int, at time.Time, cause error) {
	if slot < 0 || slot >= len(f.members) {
		return
	}
	select {
	case f.exits <- exit{slot, at, cause}:
	default: // its missed heartbeats tell the same, later
	}
}

// memberBeat takes member beat b in: a member that restarted or dropped
// its requests goes down (and up again when it serves this front end), one
// that serves this front end again goes up, and its load is recorded.
func (f *Front) memberBeat(b Beat) {
	k := f.slots.Slot(b.Index, b.Replica)
	if !f.fresh.accept(k, b.Incarnation, b.Seq) {
		return // replayed, or from an incarnation that was replaced
	}
	f.mu.Lock()
	was := f.members[k]
	f.mu.Unlock()
	if f.stalled(k, b, was.Up) {
		return
	}
	fits := f.check(b) == nil && b.Front == f.inc
	switch {
	case b.Leaving:
		f.note(k, b, false)
		if was.Up {
			f.down(k, errors.New("sub-server left (it was asked to stop)"), false)
		}
		return
	case was.Up && (!fits || b.Incarnation != was.Last.Incarnation):
		// Restarted, or dropped its requests: they are lost.
		f.down(k, fmt.Errorf("sub-server restarted or lost its state (incarnation %x, serving front end %x)", b.Incarnation, b.Front), false)
		if fits {
			f.up(k, b)
		} else {
			f.note(k, b, false)
		}
	case !was.Up && fits:
		f.up(k, b)
	default:
		f.note(k, b, was.Up)
	}
	if fits {
		f.r.ReplicaLoad(b.Index, b.Replica, b.Load)
		if f.r.ReplicaDraining(b.Index, b.Replica, b.Draining) {
			signal(f.poke)
			f.cfg.OnEvent("replica draining", "model", f.models[b.Index], "replica", b.Replica, "draining", b.Draining)
		}
	}
	if b.Placements != nil {
		f.memberPlacements()
	}
}

// memberPlacements sums the placements the members reported, per model,
// into the deployment's (deploy.Deployment.SetMemberPlacements).
func (f *Front) memberPlacements() {
	sums := make([]deploy.Placements, len(f.models))
	f.mu.Lock()
	for _, m := range f.members {
		for i, p := range m.Last.Placements {
			if i < len(sums) {
				sums[i] = sums[i].Plus(p)
			}
		}
	}
	f.mu.Unlock()
	for i, p := range sums {
		f.r.SetMemberPlacements(i, p)
	}
}

// stalled reports whether member slot k's loop is stalled by its beat b
// (subserver.Stalled); a stalled member that was up (was) goes down, as
// one that missed its heartbeats, and Watch is told again at each of its
// beats until it is replaced.
func (f *Front) stalled(k int, b Beat, was bool) bool {
	if f.cfg.Spec.StallTimeout < 0 {
		return false
	}
	err := subserver.Stalled(b.Stats, f.cfg.Spec.StallTimeout)
	if err == nil {
		return false
	}
	f.note(k, b, false)
	if was {
		f.down(k, err, true)
	} else {
		f.cfg.Watch(k, false, true)
	}
	return true
}

// down marks member slot k down; missed says it missed its heartbeats.
// Its requests go on on the model's other replicas, or, when none is
// left, end (deploy.Deployment.ReplicaDown).
func (f *Front) down(k int, cause error, missed bool) {
	f.mu.Lock()
	f.members[k].Up = false
	f.mu.Unlock()
	i, rep := f.slots.Of(k)
	n := f.r.ReplicaDown(i, rep, cause)
	signal(f.poke)
	f.cfg.OnEvent("model down", "model", f.models[i], "index", i, "replica", rep, "ended", n, "cause", cause)
	f.cfg.Watch(k, false, missed)
}

// up marks member slot k up after its beat b.
func (f *Front) up(k int, b Beat) {
	f.note(k, b, true)
	f.r.ReplicaUp(b.Index, b.Replica)
	signal(f.poke)
	f.cfg.OnEvent("model up", "model", f.models[b.Index], "index", b.Index, "replica", b.Replica)
	f.cfg.Watch(k, true, false)
}

// upReplicas appends the replicas up, for the front end's heartbeat
// (none without replicas, or before the deployment is built).
func (f *Front) upReplicas(dst []UpReplica) []UpReplica {
	r := f.dep.Load()
	if r == nil || f.slots.Len() == len(f.models) {
		return dst
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.models {
		for _, st := range r.RemoteReplicas(i) {
			if st.Up {
				inc := f.members[f.slots.Slot(i, st.Replica)].Last.Incarnation
				dst = append(dst, UpReplica{Model: i, Replica: st.Replica, Incarnation: inc, Since: st.Since, Load: st.Load,
					Draining: st.Draining})
			}
		}
	}
	return dst
}

// Deployment returns the front end's deployment: Submit, streams, cancellation.
func (f *Front) Deployment() *deploy.Deployment { return f.r }

// Members returns the front end's view of every model.
func (f *Front) Members() []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

// Submit admits a request (bench.System).
func (f *Front) Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error) {
	return f.r.Submit(ctx, prompt, p)
}

// Close ends every request, stops the monitor and closes the connection.
// The members notice the front end is gone and free what they hold.
func (f *Front) Close() error {
	err := f.r.Close()
	f.shutdown()
	return err
}

func (f *Front) shutdown() {
	f.cancel()
	f.wg.Wait()
	_ = f.sub.Unsubscribe()
	_ = f.bus.Close()
}

// Dropped returns the messages dropped by the buses of the front end and
// of every member (as of its last heartbeat), by reason.
func (f *Front) Dropped() busnats.DropCounts {
	d := f.bus.Dropped()
	for _, m := range f.Members() {
		d = d.Plus(m.Last.BusDropped)
	}
	return d
}
