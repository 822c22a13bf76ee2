package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// local is one replica of a model whose sub-server runs in this process:
// its loop's context and the way to replace it when it stalls (DESIGN
// §8.2).
type local struct {
	index    int // the model's index
	replica  int // the replica (0 for a model without replicas)
	ep       int // its bus endpoint
	pos      int // its place in Deployment.subs
	observer subserver.Observer
	cancel   context.CancelFunc // the current loop's
	done     chan struct{}      // closed when the current loop returned
	stalls   atomic.Uint64      // times found stalled
	restarts atomic.Uint64      // times replaced after a stall
	// sub is the current sub-server; up says whether it takes requests;
	// since is the last request id admitted before it joined (it knows
	// only later ones).
	sub   atomic.Pointer[subserver.Server]
	up    atomic.Bool
	since atomic.Uint64
}

// newSubServer builds model l's sub-server over eng with policy pol.
func (r *Deployment) newSubServer(l *local, eng engine.Engine, pol sched.Policy) (*subserver.Server, error) {
	cfg, m := r.cfg, r.cfg.Models[l.index]
	alg, err := cfg.Registry.New(cfg.Algorithm, route.Spec{Model: l.index, Models: r.Names(), Infos: slices.Clone(r.info), Params: cfg.Params})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	var pl subserver.Placer
	if r.placer != nil {
		pl = r.placer
	}
	s, err := subserver.New(subserver.Config{
		Index: l.index, Models: len(cfg.Models), Name: m.Name, Engine: eng, Algorithm: alg,
		Policy: pol, Bus: r.bus, MaxBatch: cfg.MaxBatch, Observer: l.observer, Vocab: m.Vocab, Speculate: cfg.Speculate,
		Reopen: m.Reopen, OnPanic: cfg.OnPanic, Replica: l.replica, Placer: pl,
	})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	return s, nil
}

// run starts replica l's current sub-server loop; Close waits for it
// unless it was abandoned (stalled). A loop whose engine failed for good
// (subserver.ErrEngineFailed) leaves its replica down: its requests go on
// on the model's other replicas, or, with none up, the model is down.
func (r *Deployment) run(l *local) {
	r.mu.Lock()
	s := r.subs[l.pos]
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	r.mu.Unlock()
	go func() {
		defer close(done)
		err := s.Run(ctx)
		if errors.Is(err, subserver.ErrEngineFailed) && l.up.Swap(false) {
			r.replicaLost(l.index, l.replica, err)
		}
		if err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}
	}()
}

// watchEvery is how often the watchdog reads the loops' counters.
const watchEvery = time.Second

// watch is the stall watchdog of the local sub-servers: a loop stuck in
// one iteration past the stall timeout (subserver.Stalled) has its model
// marked down, which ends every request in flight with the reason, and is
// replaced by a new sub-server on a reopened engine.
func (r *Deployment) watch(ctx context.Context) {
	defer r.wg.Done()
	every := watchEvery
	if r.cfg.StallTimeout > 0 {
		every = min(every, max(r.cfg.StallTimeout/4, 10*time.Millisecond))
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, l := range r.local {
			s := l.sub.Load()
			if !l.up.Load() {
				continue // stopped, or failed for good: nothing to watch
			}
			if err := subserver.Stalled(s.Stats(), r.cfg.StallTimeout); err != nil {
				r.stalled(ctx, l, s, err)
			}
		}
	}
}

// stalled takes replica l's stuck sub-server s out. With other replicas
// of the model up, its requests go on there (replicaLost); otherwise the
// model goes down (its requests end with cause). The stuck loop is
// abandoned to finish whenever its step returns, and a new sub-server
// starts on a reopened engine; the model comes back up once it runs.
func (r *Deployment) stalled(ctx context.Context, l *local, s *subserver.Server, cause error) {
	l.stalls.Add(1)
	name := r.cfg.Models[l.index].Name
	cause = fmt.Errorf("deploy: model %s: %w", name, cause)
	l.up.Store(false)
	s.Abandon()
	r.mu.Lock()
	cancel := l.cancel
	r.mu.Unlock()
	cancel()
	r.bus.Detach(l.ep)
	modelDown := r.ReplicasUp(l.index) == 0
	if modelDown {
		n := r.ModelDown(l.index, cause)
		r.event("model stalled: its requests ended", "model", name, "ended", n, "cause", cause)
	} else {
		r.replicaLost(l.index, l.replica, cause)
	}
	reopen := r.cfg.Models[l.index].Reopen
	if reopen == nil {
		return // nothing to restart it with: it stays down
	}
	eng, err := reopen(ctx)
	if err != nil {
		r.event("model restart failed", "model", name, "err", err)
		return
	}
	r.mu.Lock()
	pos := l.pos
	r.mu.Unlock()
	ns, err := r.newSubServer(l, eng, s.Policy())
	if err != nil {
		_ = eng.Close()
		r.event("model restart failed", "model", name, "err", err)
		return
	}
	r.mu.Lock()
	l.pos = pos
	r.subs[pos] = ns
	r.mu.Unlock()
	l.since.Store(r.nextID.Load())
	l.sub.Store(ns)
	r.run(l)
	l.restarts.Add(1)
	l.up.Store(true)
	if modelDown {
		r.ModelUp(l.index)
	}
	r.event("model restarted", "model", name, "replica", l.replica)
}

// event tells Config.OnEvent.
func (r *Deployment) event(msg string, args ...any) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(msg, args...)
	}
}

// Unavailable returns why model i is down, or nil while it serves.
func (r *Deployment) Unavailable(i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down[i]
}

// Stalls returns how many times the watchdog found local model i's
// replicas stalled, and how many of those it restarted (0, 0 for a remote
// model).
func (r *Deployment) Stalls(i int) (stalls, restarts uint64) {
	if i < 0 || i >= len(r.models) {
		return 0, 0
	}
	for _, l := range r.models[i] {
		stalls, restarts = stalls+l.stalls.Load(), restarts+l.restarts.Load()
	}
	return stalls, restarts
}
