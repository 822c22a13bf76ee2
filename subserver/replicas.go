package subserver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched/place"
)

// Replicas (DESIGN §9). A model may run as several replicas, each a
// sub-server of its own with its own bus endpoint (bus.Endpoint). A
// request is pinned, per model, to the replica that holds its KV cache
// (route.Message.Placed): a hand-off to a model goes to its pinned replica,
// or, on a first visit or when that replica is gone or overloaded, to the
// replica the Placer chooses; a request that moves is re-prefilled there
// from its whole sequence.
//
// Nothing is lost when a replica dies. A sub-server that hands a request to
// a model with several replicas keeps a copy of the message until the
// request comes back or the receiver says it moved on elsewhere (Released:
// the receiver tells the endpoint the request arrived from, when it sends
// it anywhere else). When a replica is lost (a Lost broadcast), every
// sub-server sends the copies it keeps for it again, to another replica of
// the model: the request goes on from the state of that hand-off, and since
// every routing draw and sampling draw depends only on the request and the
// position, it produces the tokens it would have produced (the front end
// ignores tokens it already has). The front end does the same for the
// entry messages of requests that never left their entry replica.

// Placer places requests on the replicas of models. It is safe for
// concurrent use.
type Placer interface {
	// Replicas returns how many replicas model runs (1 without replicas).
	Replicas(model int) int
	// Place returns the replica of model that request id, at sequence
	// position pos, is handed to: pinned, the replica it is pinned to there
	// (−1: none yet), when it is up and not overloaded; otherwise the
	// least-loaded one that is up and knows the request (place.HandOff).
	// It returns −1 when no replica of model can take the request.
	Place(model, pinned int, id uint64, pos int) int
}

// LossTaker is a Placer that hears of a replica's loss (a Lost event)
// before the sub-server places again the requests it handed there: one
// that learns of replicas from periodic heartbeats must not place them on
// the lost replica before its next heartbeat says so.
type LossTaker interface {
	// Lost marks the replica at endpoint ep down.
	Lost(ep int)
}

// ErrNoReplica is wrapped by the errors of requests that were handed to a
// model none of whose replicas is up.
var ErrNoReplica = errors.New("no replica up")

// Endpoint returns the sub-server's bus endpoint.
func (s *Server) Endpoint() int { return s.ep }

// Load returns what placement compares of this sub-server: requests
// queued in its inbox, runnable, and holding KV. Safe from any goroutine.
func (s *Server) Load() place.Load {
	return place.Load{Up: true, Queued: int(s.inbox.peers.Load()), Runnable: int(s.stats.runnable.Load()), KV: int(s.stats.kv.Load())}
}

// replicas returns how many replicas model runs.
func (s *Server) replicas(model int) int {
	if s.cfg.Placer == nil {
		return 1
	}
	return max(s.cfg.Placer.Replicas(model), 1)
}

// active is the active count the launch policy reads: the requests known
// system-wide, shared among this model's replicas (rounded up).
func (s *Server) active() int {
	n := s.replicas(s.cfg.Index)
	return (len(s.recs) + n - 1) / n
}

// placeHandOff chooses the endpoint of model to that r is handed to and
// pins r there. On a move r's sequence is sent whole (the new replica holds
// none of it). It fails r and returns false when no replica is up.
func (s *Server) placeHandOff(ctx context.Context, r *rec, to int) (int, bool) {
	if s.replicas(to) <= 1 {
		r.placed[to] = 0
		return to, true
	}
	pinned := r.placed[to]
	rep := s.cfg.Placer.Place(to, pinned, r.req.ID, len(r.req.Tokens))
	if rep < 0 {
		s.fail(ctx, r, fmt.Errorf("subserver %s: hand-off to model %d: %w", s.cfg.Name, to, ErrNoReplica))
		return 0, false
	}
	if rep != pinned {
		r.seen[to] = 0
	}
	r.placed[to] = rep
	return bus.Endpoint(to, rep), true
}

// arrived records where r, arriving in message m from endpoint from, is
// pinned: m's pins, and this replica for this model. It no longer answers
// for a hand-off of r.
func (s *Server) arrived(r *rec, m *route.Message, from int) {
	if len(m.Placed) == len(r.placed) {
		copy(r.placed, m.Placed)
	}
	r.placed[s.cfg.Index] = s.cfg.Replica
	r.from = from
	s.unkeep(r)
}

// leaving is called as r leaves for endpoint to: when that is not where
// it came from and the sender there keeps a copy of the hand-off (this
// model has other replicas), the sender is told it need not any more.
func (s *Server) leaving(ctx context.Context, r *rec, to int) {
	if to == r.from || s.replicas(s.cfg.Index) <= 1 {
		return
	}
	e := s.cfg.Bus.Get()
	e.Kind, e.ID, e.From = bus.Released, r.req.ID, s.ep
	_ = s.emit(ctx, r.from, e) // a sender that is gone keeps nothing
	r.from = to
}

// keep makes r's sender keep a copy of hand-off e to endpoint to when the
// model it goes to has other replicas to send it to should to be lost.
func (s *Server) keep(r *rec, e *bus.Event, to int) error {
	if s.replicas(e.Msg.To) <= 1 {
		s.unkeep(r)
		return nil
	}
	if r.sent == nil {
		r.sent = s.cfg.Bus.Get()
	}
	bus.Copy(r.sent, e)
	r.sentTo, r.snap = to, r.snap[:0]
	if st := e.Msg.State; st != nil {
		buf := [][]byte{r.snap}
		snaps, err := snapshot(buf[:0], st)
		if err != nil {
			return fmt.Errorf("subserver %s: state snapshot: %w", s.cfg.Name, err)
		}
		r.snap = snaps[0]
	}
	return nil
}

// unkeep drops r's kept hand-off.
func (s *Server) unkeep(r *rec) {
	if r.sent != nil {
		s.cfg.Bus.Put(r.sent)
		r.sent = nil
	}
}

// released applies a Released event: r moved on from the endpoint it was
// handed to.
func (s *Server) released(e *bus.Event) {
	if r := s.recs[e.ID]; r != nil && r.sent != nil && r.sentTo == e.From {
		s.unkeep(r)
	}
}

// lost applies a Lost event: every request handed to endpoint ep that this
// sub-server answers for goes to another replica of the model; every
// speculation whose verifier was ep sends its open positions again; and
// every request held here that ep answered for (it arrived from there)
// gets a new keeper: the front end, sent a checkpoint.
func (s *Server) lost(ctx context.Context, ep int) {
	for _, r := range s.recs {
		if r.at == finished {
			continue
		}
		if r.sent != nil && r.sentTo == ep { // (a verify job may be queued for it here)
			s.replay(ctx, r)
			continue
		}
		if len(r.draft.open) > 0 && r.vto == ep {
			s.reverify(ctx, r)
		}
		if r.from == ep && (r.at == runnable || r.at == parked) && len(r.verify) == 0 && s.replicas(s.cfg.Index) > 1 {
			s.checkpoint(ctx, r)
		}
	}
	s.stats.losses.Add(1)
}

// checkpoint sends the front end r as this replica holds it, up to its
// oldest unverified position (with the state it had there), for the front
// end to send again should this replica be lost; the front end answers for
// r until r moves on.
func (s *Server) checkpoint(ctx context.Context, r *rec) {
	q, dr := &r.req, &r.draft
	end, st := r.commitLimit(), q.State
	if len(dr.open) > 0 && st != nil {
		f, ok := s.cfg.Algorithm.(route.Stater)
		if !ok {
			return
		}
		if st = f.NewState(q); st == nil || st.UnmarshalBinary(dr.snaps[0]) != nil {
			return
		}
	}
	e := s.cfg.Bus.Get()
	e.Kind, e.ID, e.From = bus.Peer, q.ID, s.ep
	m := &e.Msg
	m.ID, m.From, m.To, m.Anchor = q.ID, s.cfg.Index, s.cfg.Index, 0
	m.Tokens = append(m.Tokens[:0], q.Tokens[:end]...)
	m.By = append(m.By[:0], q.By[:end]...)
	m.PromptLen, m.Committed, m.Params, m.State = q.PromptLen, min(q.Committed, end), q.Params, st
	m.Seen = append(m.Seen[:0], make([]int, s.cfg.Models)...)
	m.Placed = append(m.Placed[:0], r.placed...)
	m.Logprobs = logprobsIn(m.Logprobs[:0], r.lps, 0, end)
	if s.emit(ctx, bus.Frontend, e) == nil {
		r.from = bus.Frontend
	}
}

// replay sends r's kept hand-off again, whole, to another replica of its
// model, with the algorithm state it had.
func (s *Server) replay(ctx context.Context, r *rec) {
	to := r.sent.Msg.To
	old := bus.ReplicaOf(r.sentTo)
	rep := s.cfg.Placer.Place(to, old, r.req.ID, len(r.req.Tokens))
	if rep < 0 {
		s.fail(ctx, r, fmt.Errorf("subserver %s: replica %d of model %d lost: %w", s.cfg.Name, old, to, ErrNoReplica))
		return
	}
	m := &r.sent.Msg
	if m.Anchor > 0 { // the new replica holds none of the sequence
		m.Tokens = append(slices.Clone(r.req.Tokens[:m.Anchor]), m.Tokens...)
		m.By = append(slices.Clone(r.req.By[:m.Anchor]), m.By...)
		m.Anchor = 0
	}
	if to < len(m.Seen) {
		m.Seen[to] = 0
	}
	if to < len(m.Placed) {
		m.Placed[to] = rep
	}
	r.placed[to], r.seen[to], r.sentTo = rep, 0, bus.Endpoint(to, rep)
	e := s.cfg.Bus.Get()
	bus.Copy(e, r.sent)
	if m.State != nil {
		st, err := s.restore(r)
		if err != nil {
			s.cfg.Bus.Put(e)
			s.fail(ctx, r, err)
			return
		}
		e.Msg.State = st
	}
	s.handOff(ctx, r, e, r.sentTo)
}

// restore returns a fresh copy of the algorithm state r's kept hand-off
// carried.
func (s *Server) restore(r *rec) (route.State, error) {
	st := r.sent.Msg.State
	if f, ok := s.cfg.Algorithm.(route.Stater); ok {
		if fresh := f.NewState(&r.req); fresh != nil {
			st = fresh
		}
	}
	if err := st.UnmarshalBinary(r.snap); err != nil {
		return nil, fmt.Errorf("subserver %s: state restore: %w", s.cfg.Name, err)
	}
	return st, nil
}

// handOff sends hand-off e of r to endpoint to. A replica that went away
// meanwhile (no such endpoint) is left to its Lost event when r's copy is
// kept; any other failure fails r.
func (s *Server) handOff(ctx context.Context, r *rec, e *bus.Event, to int) {
	err := s.emit(ctx, to, e)
	if err == nil || errors.Is(err, bus.ErrNoEndpoint) && r.sent != nil {
		return
	}
	s.fail(ctx, r, fmt.Errorf("subserver %s: hand-off to model %d: %w", s.cfg.Name, bus.ModelOf(to), err))
}

// reverify sends the open positions of r's speculation again, to another
// replica of the verifying model, in a new round (answers from the lost
// one are ignored).
func (s *Server) reverify(ctx context.Context, r *rec) {
	to := bus.ModelOf(r.vto)
	rep := s.cfg.Placer.Place(to, bus.ReplicaOf(r.vto), r.req.ID, len(r.req.Tokens))
	if rep < 0 {
		s.fail(ctx, r, fmt.Errorf("subserver %s: verifier of model %d lost: %w", s.cfg.Name, to, ErrNoReplica))
		return
	}
	r.placed[to], r.seen[to], r.vto = rep, 0, bus.Endpoint(to, rep)
	r.draft.epoch++
	for _, p := range r.draft.open {
		s.sendVerifyTo(ctx, r, to, r.vto, int(p))
		if r.at == finished {
			return
		}
	}
}

// emit sends e to endpoint to, unless this sub-server was abandoned: a
// stuck loop that comes back touches nothing (its successor, or the other
// replicas, carry its requests).
func (s *Server) emit(ctx context.Context, to int, e *bus.Event) error {
	if s.abandoned.Load() {
		s.cfg.Bus.Put(e)
		return nil
	}
	return s.cfg.Bus.Send(ctx, to, e)
}

// announce broadcasts e, unless this sub-server was abandoned.
func (s *Server) announce(ctx context.Context, e *bus.Event) {
	if s.abandoned.Load() {
		s.cfg.Bus.Put(e)
		return
	}
	_ = s.cfg.Bus.Broadcast(ctx, e) // nobody left to tell on a closed bus
}

// MergeStats merges the counters of one model's replicas into the model's:
// counts and totals add up; Records (every replica knows every active
// request), the last step's figures, the threshold, the depth and the
// stall watchdog's inputs take the largest; KVBlocks is -1 when no replica
// reports it.
func MergeStats(st []Stats) Stats {
	var m Stats
	m.KVBlocks = -1
	for i, s := range st {
		if i == 0 {
			m = s
			continue
		}
		m.Records, m.LastBatch, m.LastStep = max(m.Records, s.Records), max(m.LastBatch, s.LastBatch), max(m.LastStep, s.LastStep)
		m.Threshold, m.Depth, m.Busy, m.MaxStep = max(m.Threshold, s.Threshold), max(m.Depth, s.Depth), max(m.Busy, s.Busy), max(m.MaxStep, s.MaxStep)
		m.Runnable, m.Pending, m.KVSequences = m.Runnable+s.Runnable, m.Pending+s.Pending, m.KVSequences+s.KVSequences
		m.Steps, m.Tokens, m.BusyTime = m.Steps+s.Steps, m.Tokens+s.Tokens, m.BusyTime+s.BusyTime
		m.Stepped, m.HandedOff = m.Stepped+s.Stepped, m.HandedOff+s.HandedOff
		if s.KVBlocks >= 0 {
			m.KVBlocks = max(m.KVBlocks, 0) + s.KVBlocks
		}
		m.PrefixLooked, m.PrefixHit = m.PrefixLooked+s.PrefixLooked, m.PrefixHit+s.PrefixHit
		m.Speculated, m.Kept, m.RolledBack = m.Speculated+s.Speculated, m.Kept+s.Kept, m.RolledBack+s.RolledBack
		m.Verified, m.Agreed, m.SmallTokens = m.Verified+s.Verified, m.Agreed+s.Agreed, m.SmallTokens+s.SmallTokens
		m.Panics, m.Restarts, m.Progress = m.Panics+s.Panics, m.Restarts+s.Restarts, m.Progress+s.Progress
		m.Losses += s.Losses
	}
	return m
}
