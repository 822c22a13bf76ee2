// Package lockstep is the baseline that serves token-level routing the way
// R2R's official implementation does: all active requests advance together
// in global steps. Each global step runs the first model for every request
// it holds, then each later model, in index order, for the requests routed
// to it; everyone waits for the slowest. Models never step concurrently and
// a routed request always waits for the next global step, so it shows the
// cost of step synchrony that TokenRouter's sub-servers remove. It runs the
// same engines and the same routing algorithms as the routed runtime.
package lockstep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// Config describes a lockstep deployment.
type Config struct {
	// Engines, one per model, in the algorithm's order. Owned and closed.
	Engines []engine.Engine
	// Names of the models.
	Names []string
	// Algorithm names the routing algorithm in Registry.
	Algorithm string
	// Params are its parameters.
	Params map[string]string
	// Registry resolves Algorithm.
	Registry *route.Registry
	// Observer, if set, is told about every engine step (its Routed is
	// not called). It is called from the step loop and must be quick.
	Observer subserver.Observer
}

// req is one request's state: one sequence shared by all models.
type req struct {
	q      route.Request
	seen   []int
	next   int
	s      *stream.Stream
	cancel bool
}

// System is a running lockstep deployment.
type System struct {
	cfg   Config
	algs  []route.Algorithm
	front route.Algorithm
	eos   []int32

	mu     sync.Mutex
	inbox  []*req
	cancel map[uint64]bool
	closed bool
	wake   chan struct{}
	nextID atomic.Uint64

	stop context.CancelFunc
	done chan struct{}
}

// New starts a lockstep system.
func New(cfg Config) (*System, error) {
	if len(cfg.Engines) == 0 || len(cfg.Engines) != len(cfg.Names) || cfg.Registry == nil {
		return nil, errors.New("lockstep: engines, names and a registry are required")
	}
	s := &System{cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{}), cancel: map[uint64]bool{}}
	var err error
	infos := s.Models()
	if s.front, err = cfg.Registry.New(cfg.Algorithm, route.Spec{Model: -1, Models: cfg.Names, Infos: infos, Params: cfg.Params}); err != nil {
		return nil, fmt.Errorf("lockstep: %w", err)
	}
	for i, e := range cfg.Engines {
		a, err := cfg.Registry.New(cfg.Algorithm, route.Spec{Model: i, Models: cfg.Names, Infos: slices.Clone(infos), Params: cfg.Params})
		if err != nil {
			return nil, fmt.Errorf("lockstep: %w", err)
		}
		s.algs = append(s.algs, a)
		s.eos = append(s.eos, e.Info().EOS)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.loop(ctx)
	return s, nil
}

// Models reports the models' facts, in index order.
func (s *System) Models() []engine.Info {
	out := make([]engine.Info, len(s.cfg.Engines))
	for i, e := range s.cfg.Engines {
		out[i] = e.Info()
	}
	return out
}

// Submit admits a request.
func (s *System) Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error) {
	if len(prompt) == 0 || p.MaxTokens <= 0 {
		return nil, errors.New("lockstep: empty prompt or non-positive max tokens")
	}
	id := s.nextID.Add(1)
	r := &req{next: 0, seen: make([]int, len(s.cfg.Engines))}
	r.q = route.Request{ID: id, Params: p, Tokens: slices.Clone(prompt), PromptLen: len(prompt), Committed: len(prompt)}
	r.q.By = make([]int8, len(prompt))
	for i := range r.q.By {
		r.q.By[i] = -1
	}
	if e, ok := s.front.(route.Entrant); ok {
		r.next = e.Entry(&r.q)
	}
	if st, ok := s.front.(route.Stater); ok {
		r.q.State = st.NewState(&r.q)
	}
	r.s = stream.New(id, func() { s.cancelReq(id) })
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("lockstep: closed")
	}
	s.inbox = append(s.inbox, r)
	s.mu.Unlock()
	context.AfterFunc(ctx, func() { s.cancelReq(id) })
	s.signal()
	return r.s, nil
}

func (s *System) cancelReq(id uint64) {
	s.mu.Lock()
	s.cancel[id] = true
	s.mu.Unlock()
	s.signal()
}

func (s *System) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop runs global steps until ctx ends.
func (s *System) loop(ctx context.Context) {
	defer close(s.done)
	var active []*req
	var b stepBufs
	for {
		active = s.collect(active)
		if len(active) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		if ctx.Err() != nil {
			for _, r := range active {
				r.s.Finish(stream.Cancelled, errors.New("lockstep: closed"))
			}
			return
		}
		for m, e := range s.cfg.Engines {
			if !s.stepModel(ctx, m, e, active, &b) {
				break // closing: the open requests end as cancelled
			}
		}
	}
}

// collect adds the newly submitted requests to active, marks the cancelled
// ones and returns those still open.
func (s *System) collect(active []*req) []*req {
	s.mu.Lock()
	active = append(active, s.inbox...)
	s.inbox = s.inbox[:0]
	for _, r := range active {
		if s.cancel[r.q.ID] {
			r.cancel = true
		}
	}
	clear(s.cancel)
	s.mu.Unlock()
	return s.sweep(active)
}

// stepBufs are a step's buffers, reused from step to step.
type stepBufs struct {
	batch []*req
	in    []engine.Input
	out   []engine.Output
	reqs  []*route.Request
	dec   []route.Decision
}

// form fills the buffers with the active requests that are on model m.
func (b *stepBufs) form(s *System, m int, e engine.Engine, active []*req) {
	b.batch, b.in, b.reqs, b.dec = b.batch[:0], b.in[:0], b.reqs[:0], b.dec[:0]
	for _, r := range active {
		if r.next != m || r.cancel || r.q.Committed < 0 {
			continue
		}
		if r.seen[m] >= len(r.q.Tokens) {
			r.seen[m] = len(r.q.Tokens) - 1
			_ = e.Truncate(engine.SeqID(r.q.ID), r.seen[m])
		}
		toks := r.q.Tokens[r.seen[m]:]
		r.q.Appended = len(toks)
		var want engine.Want
		if w, ok := s.algs[m].(route.Wanter); ok {
			want = w.Want(m, &r.q)
		}
		b.batch = append(b.batch, r)
		b.in = append(b.in, engine.Input{Seq: engine.SeqID(r.q.ID), Tokens: toks, Want: want, Sampling: r.q.StepSampling()})
		b.reqs = append(b.reqs, &r.q)
		b.dec = append(b.dec, route.Decision{})
	}
}

// stepModel steps model m (engine e) over its active requests and applies
// its algorithm's decisions; false when the step failed because ctx ended.
func (s *System) stepModel(ctx context.Context, m int, e engine.Engine, active []*req, b *stepBufs) bool {
	b.form(s, m, e, active)
	if len(b.batch) == 0 {
		return true
	}
	b.out = slices.Grow(b.out[:0], len(b.batch))[:len(b.batch)]
	start := time.Now()
	err := e.Step(ctx, b.in, b.out)
	if err == nil && s.cfg.Observer != nil {
		s.cfg.Observer.Step(m, len(b.batch), appended(b.in), time.Since(start))
	}
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		for _, r := range b.batch {
			s.end(r, stream.Error, fmt.Errorf("lockstep: model %d: %w", m, err))
		}
		return true
	}
	for i, r := range b.batch {
		r.seen[m] = len(r.q.Tokens)
		b.dec[i] = route.Decision{Next: m, Cut: -1, Token: b.out[i].Token, Commit: true}
	}
	emb, _ := e.(engine.Embedder)
	s.algs[m].Route(&route.Step{Model: m, Requests: b.reqs, Outputs: b.out, Embed: emb}, b.dec)
	for i, r := range b.batch {
		s.apply(r, m, b.dec[i])
	}
	return true
}

// apply carries out one decision (the same rules as a sub-server's).
func (s *System) apply(r *req, m int, d route.Decision) {
	q := &r.q
	if d.Cut >= 0 && d.Cut < len(q.Tokens) {
		if d.Cut < q.Committed {
			s.end(r, stream.Error, fmt.Errorf("lockstep: cut to %d below %d committed tokens", d.Cut, q.Committed))
			return
		}
		q.Tokens, q.By = q.Tokens[:d.Cut], q.By[:d.Cut]
		for k := range r.seen {
			if r.seen[k] > d.Cut {
				r.seen[k] = d.Cut
				_ = s.cfg.Engines[k].Truncate(engine.SeqID(q.ID), d.Cut)
			}
		}
	}
	if d.Token != route.NoToken {
		q.Tokens = append(q.Tokens, d.Token)
		q.By = append(q.By, int8(m))
	}
	if d.Commit && len(q.Tokens) > q.Committed {
		end, reason := q.CommitEnd(s.eos[m], nil)
		r.s.Push(q.Tokens[q.Committed:end], q.By[q.Committed:end])
		q.Committed = end
		if reason != "" {
			s.end(r, reason, nil)
			return
		}
	}
	if d.Next < 0 || d.Next >= len(s.cfg.Engines) {
		s.end(r, stream.Error, fmt.Errorf("lockstep: routed to model %d", d.Next))
		return
	}
	if d.Next != m {
		s.handOff(r, m, d.Next)
	}
	r.next = d.Next
}

// handOff moves r from model m to model to. The sequence is shared, so
// the message only matters to algorithms with Sender or Receiver hooks; it
// is applied with the same rules as a sub-server's resume.
func (s *System) handOff(r *req, m, to int) {
	snd, okS := s.algs[m].(route.Sender)
	rcv, okR := s.algs[to].(route.Receiver)
	if !okS && !okR {
		return
	}
	q := &r.q
	a := r.seen[to]
	msg := route.Message{ID: q.ID, From: m, To: to, Anchor: a, Tokens: slices.Clone(q.Tokens[a:]), By: slices.Clone(q.By[a:]),
		PromptLen: q.PromptLen, Committed: q.Committed, Seen: slices.Clone(r.seen), Params: q.Params, State: q.State}
	if okS {
		snd.Send(q, &msg)
	}
	q.State = msg.State
	if okR {
		rcv.Receive(q, &msg)
	}
	if msg.Anchor < r.seen[to] {
		r.seen[to] = msg.Anchor
		_ = s.cfg.Engines[to].Truncate(engine.SeqID(q.ID), msg.Anchor)
	}
	q.Tokens = append(q.Tokens[:msg.Anchor], msg.Tokens...)
	q.By = append(q.By[:msg.Anchor], msg.By...)
	q.Committed = msg.Committed
}

// end finishes a request and frees its KV in every engine.
func (s *System) end(r *req, reason string, err error) {
	r.s.Finish(reason, err)
	r.q.Committed = -1 // marks it for sweep
}

// sweep drops finished and cancelled requests.
func (s *System) sweep(active []*req) []*req {
	return slices.DeleteFunc(active, func(r *req) bool {
		if r.cancel {
			r.s.Finish(stream.Cancelled, nil)
		} else if r.q.Committed >= 0 {
			return false
		}
		for _, e := range s.cfg.Engines {
			e.Release(engine.SeqID(r.q.ID))
		}
		return true
	})
}

// Close stops the loop, ends open requests and closes the engines.
func (s *System) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	pending := s.inbox
	s.inbox = nil
	s.mu.Unlock()
	for _, r := range pending {
		r.s.Finish(stream.Cancelled, errors.New("lockstep: closed"))
	}
	s.stop()
	<-s.done
	var errs []error
	for _, e := range s.cfg.Engines {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// appended counts the tokens a step's inputs append.
func appended(in []engine.Input) int {
	n := 0
	for _, x := range in {
		n += len(x.Tokens)
	}
	return n
}
