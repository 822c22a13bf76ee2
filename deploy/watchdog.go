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

// local is one model whose sub-server runs in this process: its loop's
// context and the way to replace it when it stalls (DESIGN §8.2).
type local struct {
	index    int // the model's index
	pos      int // its place in Deployment.subs
	observer subserver.Observer
	cancel   context.CancelFunc // the current loop's
	done     chan struct{}      // closed when the current loop returned
	stalls   atomic.Uint64      // times found stalled
	restarts atomic.Uint64      // times replaced after a stall
}

// newSubServer builds model l's sub-server over eng with policy pol.
func (r *Deployment) newSubServer(l *local, eng engine.Engine, pol sched.Policy) (*subserver.Server, error) {
	cfg, m := r.cfg, r.cfg.Models[l.index]
	alg, err := cfg.Registry.New(cfg.Algorithm, route.Spec{Model: l.index, Models: r.Names(), Infos: slices.Clone(r.info), Params: cfg.Params})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	s, err := subserver.New(subserver.Config{
		Index: l.index, Models: len(cfg.Models), Name: m.Name, Engine: eng, Algorithm: alg,
		Policy: pol, Bus: r.bus, MaxBatch: cfg.MaxBatch, Observer: l.observer, Vocab: m.Vocab, Speculate: cfg.Speculate,
		Reopen: m.Reopen, OnPanic: cfg.OnPanic,
	})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	return s, nil
}

// run starts model l's current sub-server loop; Close waits for it unless
// it was abandoned (stalled). A loop whose engine failed for good
// (subserver.ErrEngineFailed) leaves its model down.
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
		if errors.Is(err, subserver.ErrEngineFailed) {
			r.ModelDown(l.index, err)
			r.event("model down", "model", r.cfg.Models[l.index].Name, "err", err)
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
			if l == nil {
				continue
			}
			r.mu.Lock()
			s := r.subs[l.pos]
			r.mu.Unlock()
			if err := subserver.Stalled(s.Stats(), r.cfg.StallTimeout); err != nil {
				r.stalled(ctx, l, s, err)
			}
		}
	}
}

// stalled takes model l's stuck sub-server s out: the model goes down
// (its requests end with cause), the stuck loop is abandoned to finish
// whenever its step returns, and a new sub-server starts on a reopened
// engine; the model comes back up once it runs.
func (r *Deployment) stalled(ctx context.Context, l *local, s *subserver.Server, cause error) {
	l.stalls.Add(1)
	name := r.cfg.Models[l.index].Name
	cause = fmt.Errorf("deploy: model %s: %w", name, cause)
	n := r.ModelDown(l.index, cause)
	r.event("model stalled: its requests ended", "model", name, "ended", n, "cause", cause)
	reopen := r.cfg.Models[l.index].Reopen
	if reopen == nil {
		return // nothing to restart it with: it stays down
	}
	s.Abandon()
	r.mu.Lock()
	cancel := l.cancel
	r.mu.Unlock()
	cancel()
	r.bus.Detach(l.index)
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
	r.run(l)
	l.restarts.Add(1)
	r.ModelUp(l.index)
	r.event("model restarted", "model", name)
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

// Stalls returns how many times the watchdog found local model i stalled,
// and how many of those it restarted (0, 0 for a remote model).
func (r *Deployment) Stalls(i int) (stalls, restarts uint64) {
	if i < 0 || i >= len(r.local) || r.local[i] == nil {
		return 0, 0
	}
	return r.local[i].stalls.Load(), r.local[i].restarts.Load()
}

// slot is the tuner's handle on local sub-server pos: the current one,
// whichever that is after restarts.
type slot struct {
	r   *Deployment
	pos int
}

func (t slot) current() *subserver.Server {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.r.subs[t.pos]
}

// SetPolicy sets the current sub-server's policy.
func (t slot) SetPolicy(p sched.Policy) { t.current().SetPolicy(p) }

// Stats returns the current sub-server's counters.
func (t slot) Stats() subserver.Stats { return t.current().Stats() }
