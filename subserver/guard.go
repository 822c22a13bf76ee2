package subserver

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// The failure boundary (DESIGN §8.1). A panic in one request's work — the
// algorithm's decision for it, its output schema, its hand-off hooks, stop
// and log-probability bookkeeping — fails that request only: it ends with
// an error the client sees, and the loop and the other requests of the
// batch go on. A panic in the engine (a step, a truncation, a release)
// fails the requests of that step and restarts the engine (Config.Reopen):
// the other requests keep their tokens and re-prefill on the new engine.
// A panic anywhere else in the loop ends every request the sub-server
// holds and restarts it empty. Each panic is reported once, with its
// stack, through Config.OnPanic, and counted (Stats.Panics).

// ErrPanic is wrapped by the errors of work that panicked.
var ErrPanic = errors.New("internal error")

// ErrEngineFailed is returned by Run when the engine panicked and could
// not be reopened (no Config.Reopen, or it failed): the model is down.
var ErrEngineFailed = errors.New("engine failed")

// Panic describes one recovered panic, for Config.OnPanic.
type Panic struct {
	// Model is the sub-server's model name.
	Model string
	// Where names the work that panicked: "route", "decision", "receive",
	// "schema", "engine" or "loop".
	Where string
	// Request is the request whose work panicked (0: not one request's).
	Request uint64
	// Value is what was passed to panic; Stack the goroutine's stack.
	Value any
	Stack []byte
}

// Error describes the panic without its stack.
func (p *Panic) Error() string {
	return fmt.Sprintf("%v: panic in %s on model %s: %v", ErrPanic, p.Where, p.Model, p.Value)
}

// Unwrap returns ErrPanic.
func (p *Panic) Unwrap() error { return ErrPanic }

// recovered reports a recovered panic value v (nil: none) and returns it
// as an error, or nil.
func (s *Server) recovered(v any, where string, id uint64) error {
	if v == nil {
		return nil
	}
	p := &Panic{Model: s.cfg.Name, Where: where, Request: id, Value: v, Stack: debug.Stack()}
	s.stats.panics.Add(1)
	if s.cfg.OnPanic != nil {
		s.cfg.OnPanic(p)
	}
	return p
}

// failPanicked ends r, whose work panicked, wherever it is here.
func (s *Server) failPanicked(ctx context.Context, r *rec, err error) {
	if i := slices.Index(s.run, r); i >= 0 {
		s.run = slices.Delete(s.run, i, i+1)
	}
	if r.at == finished || s.recs[r.req.ID] != r {
		return // ended already (or dropped and recycled)
	}
	s.fail(ctx, r, err)
}

// applySafe is apply behind the failure boundary.
func (s *Server) applySafe(ctx context.Context, r *rec, d route.Decision, tok int32, now time.Duration) {
	defer func() {
		if err := s.recovered(recover(), "decision", r.req.ID); err != nil {
			s.failPanicked(ctx, r, err)
		}
	}()
	s.apply(ctx, r, d, tok, now)
}

// answerSafe is answer (a verify job's reply) behind the failure boundary.
func (s *Server) answerSafe(ctx context.Context, r *rec, o *engine.Output) {
	defer func() {
		if err := s.recovered(recover(), "decision", r.req.ID); err != nil {
			s.failPanicked(ctx, r, err)
		}
	}()
	s.answer(ctx, r, o)
}

// resumeSafe is resume (a peer message's arrival) behind the failure
// boundary.
func (s *Server) resumeSafe(ctx context.Context, e *bus.Event) {
	defer func() {
		if err := s.recovered(recover(), "receive", e.ID); err != nil {
			if r := s.recs[e.ID]; r != nil {
				s.failPanicked(ctx, r, err)
			}
		}
	}()
	s.resume(ctx, e)
}

// allowSafe is allow (the output schema's masks) behind the failure
// boundary: a panic is returned as an error.
func (s *Server) allowSafe(r *rec, from int, want engine.Want) (allow [][]uint64, err error) {
	defer func() {
		if perr := s.recovered(recover(), "schema", r.req.ID); perr != nil {
			r.cons = nil // its state is suspect: compiled afresh if the request goes on
			allow, err = nil, perr
		}
	}()
	return s.allow(r, from, want)
}

// route runs the algorithm's decisions for the step. When Route panics,
// the batch's requests are decided one at a time so that only those whose
// decision panics fail; it returns the indices of the failed ones in
// s.failed.
func (s *Server) route(ctx context.Context) {
	s.failed = s.failed[:0]
	if s.routeAll() == nil {
		return
	}
	n := len(s.reqs)
	for i := range n {
		s.dec[i] = route.Decision{Next: s.cfg.Index, Cut: -1, Token: s.out[i].Token, Commit: true}
		one := route.Step{Model: s.cfg.Index, Requests: s.reqs[i : i+1], Outputs: s.out[i : i+1], Embed: s.embed}
		if err := s.routeOne(&one, s.dec[i:i+1], s.reqs[i].ID); err != nil {
			s.failed = append(s.failed, i)
			s.failPanicked(ctx, s.batch[i], err)
		}
	}
}

// routeAll runs Route over the whole step, recovering a panic.
func (s *Server) routeAll() (err error) {
	defer func() { err = s.recovered(recover(), "route", 0) }()
	s.cfg.Algorithm.Route(&s.view, s.dec)
	return nil
}

// routeOne runs Route over one request's step, recovering a panic.
func (s *Server) routeOne(v *route.Step, dec []route.Decision, id uint64) (err error) {
	defer func() { err = s.recovered(recover(), "route", id) }()
	s.cfg.Algorithm.Route(v, dec)
	return nil
}

// stepEngine runs one engine step, recovering a panic as an error.
func (s *Server) stepEngine(ctx context.Context) (err error) {
	defer func() {
		if perr := s.recovered(recover(), "engine", 0); perr != nil {
			s.engineBroken = true
			err = perr
		}
	}()
	return s.cfg.Engine.Step(ctx, s.in, s.out)
}

// truncate cuts a sequence's KV, recovering a panic of the engine as an
// error.
func (s *Server) truncate(id uint64, n int) (err error) {
	defer func() {
		if perr := s.recovered(recover(), "engine", id); perr != nil {
			s.engineBroken = true
			err = perr
		}
	}()
	return s.cfg.Engine.Truncate(engine.SeqID(id), n)
}

// release frees a sequence's KV, recovering a panic of the engine.
func (s *Server) release(id uint64) {
	defer func() {
		if s.recovered(recover(), "engine", id) != nil {
			s.engineBroken = true
		}
	}()
	s.cfg.Engine.Release(engine.SeqID(id))
}

// restartEngine replaces an engine that panicked: it closes it (a panic
// there is reported and ignored), opens a new one with Config.Reopen, and
// makes every request held here re-prefill on it from its tokens.
func (s *Server) restartEngine(ctx context.Context) error {
	if s.cfg.Reopen == nil {
		return fmt.Errorf("subserver %s: %w: no way to reopen it", s.cfg.Name, ErrEngineFailed)
	}
	s.closeEngine()
	e, err := s.cfg.Reopen(ctx)
	if err != nil {
		return fmt.Errorf("subserver %s: %w: reopen: %w", s.cfg.Name, ErrEngineFailed, err)
	}
	s.engMu.Lock()
	s.cfg.Engine = e
	s.engMu.Unlock()
	s.bindEngine()
	s.engineBroken = false
	for _, r := range s.recs {
		r.hasKV = false
		r.seen[s.cfg.Index] = 0
	}
	s.stats.restarts.Add(1)
	return nil
}

// closeEngine closes the engine, recovering a panic.
func (s *Server) closeEngine() {
	defer func() { _ = s.recovered(recover(), "engine", 0) }()
	_ = s.cfg.Engine.Close() // a broken engine's close error says nothing more
}

// loopSafe runs one iteration of the loop behind the last failure
// boundary: a panic not caught closer to its cause ends every request held
// here (their KV is freed as their finish broadcasts arrive) and the loop
// goes on. An engine that panicked is reopened. A non-nil error means the
// model is down (ErrEngineFailed).
func (s *Server) loopSafe(ctx context.Context) (err error) {
	defer func() {
		if perr := s.recovered(recover(), "loop", 0); perr != nil {
			s.run = s.run[:0]
			for _, r := range s.recs {
				if r.at != finished {
					s.fail(ctx, r, perr)
				}
			}
		}
		if s.engineBroken && ctx.Err() == nil {
			err = s.restartEngine(ctx)
		}
	}()
	s.iterate(ctx)
	return nil
}

// Abandon gives up on a sub-server whose loop is stuck (a stalled engine
// step): once its context ends and the step returns, Run neither detaches
// from the bus (a successor may hold its endpoint) nor frees KV; it only
// closes its engine. Safe from any goroutine.
func (s *Server) Abandon() { s.abandoned.Store(true) }
