package deploy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/sched/place"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// Replicas (DESIGN §9). A local model may run as several replicas
// (Model.Replicas), each a sub-server with its own endpoint. The placer
// below reads their loads for the sub-servers' hand-offs and the front
// end's entries; the front end answers for each request's entry message
// until the request leaves its entry replica; a replica that goes down is
// announced (bus.Lost) so that whoever answers for a request handed to it
// sends it again to another replica of the model.

// ErrReplicaStopped is the cause StopReplica gives a replica's loss.
var ErrReplicaStopped = errors.New("replica stopped")

// placer places requests on the replicas of the deployment's models
// (subserver.Placer) and counts the outcomes per model: a local model's
// replicas by their sub-servers' loads, a remote model's by the board its
// heartbeats fill (remote).
type placer struct {
	r      *Deployment
	counts []placeCounts // per model index
	remote *place.Board  // the remote models' replicas
}

// placeCounts are one model's placement outcomes.
type placeCounts struct {
	placed, affine, replaced, none atomic.Uint64
	members                        atomic.Pointer[Placements] // SetMemberPlacements
}

// Placements counts the placements of requests on one model's replicas.
type Placements struct {
	// Placed counts the requests placed on a replica at their entry or
	// their first hand-off to the model; Affine the hand-offs that returned
	// to the replica holding the request's KV; Replaced the hand-offs that
	// moved to another replica (the pinned one was gone or overloaded) and
	// re-prefilled there; NoReplica those that found no replica up.
	Placed, Affine, Replaced, NoReplica uint64
}

// newPlacer returns the deployment's placer, or nil when no model has more
// than one replica.
func newPlacer(r *Deployment) *placer {
	counts, many := make([]int, len(r.cfg.Models)), false
	for i, m := range r.cfg.Models {
		counts[i] = max(m.RemoteReplicas, 1)
		many = many || len(r.models[i]) > 1 || counts[i] > 1
	}
	if !many {
		return nil
	}
	return &placer{r: r, counts: make([]placeCounts, len(r.models)), remote: place.NewBoard(counts, r.cfg.PlaceSeed)}
}

// Replicas returns how many replicas model runs.
func (p *placer) Replicas(model int) int {
	if p.r.models[model] == nil {
		return p.remote.Replicas(model)
	}
	return len(p.r.models[model])
}

// loads appends the loads of local model's replicas for request id: a
// replica that is down, or joined after the request was admitted (it never
// saw it), is not up for it.
func (p *placer) loads(dst []place.Load, model int, id uint64) []place.Load {
	for _, l := range p.r.models[model] {
		if !l.up.Load() || id <= l.since.Load() {
			dst = append(dst, place.Load{})
			continue
		}
		dst = append(dst, l.sub.Load().Load())
	}
	return dst
}

// Place places a hand-off (subserver.Placer).
func (p *placer) Place(model, pinned int, id uint64, pos int) int {
	var rep int
	var o place.Outcome
	if p.r.models[model] == nil {
		rep, o = p.remote.HandOff(model, pinned, id, pos)
	} else {
		var buf [8]place.Load
		rep, o = place.HandOff(p.loads(buf[:0], model, id), pinned, place.Mix(p.r.cfg.PlaceSeed, id, uint64(pos)), place.DefaultSlack)
	}
	p.count(model, o)
	return rep
}

// entry places a new request on a replica of model by the power of two
// choices; −1 when none is up.
func (p *placer) entry(model int, id uint64) int {
	var rep int
	if p.r.models[model] == nil {
		rep = p.remote.Entry(model, id)
	} else {
		var buf [8]place.Load
		rep = place.Entry(p.loads(buf[:0], model, id), place.Mix(p.r.cfg.PlaceSeed, id, 0))
	}
	o := place.Placed
	if rep < 0 {
		o = place.NoReplica
	}
	p.count(model, o)
	return rep
}

// count records a placement's outcome on model.
func (p *placer) count(model int, o place.Outcome) {
	c := &p.counts[model]
	switch o {
	case place.Placed:
		c.placed.Add(1)
	case place.Affine:
		c.affine.Add(1)
	case place.Replaced:
		c.replaced.Add(1)
	default:
		c.none.Add(1)
	}
}

// entry is what the front end keeps of a request, with replicas, while it
// answers for it: where it is (the replica it entered at, or the one that
// sent a checkpoint), whether it left there, and what to send again: the
// entry message, or the checkpoint (ckpt, its state, if stateful, encoded
// in snap).
type entry struct {
	ep       int
	left     bool
	prompt   []int32
	params   route.Params
	ckpt     *bus.Event
	stateful bool
	snap     []byte
}

// endpoint returns where the request enters model: its replica's endpoint,
// or the model's without replicas.
func (e *entry) endpoint(model int) int {
	if e == nil {
		return model
	}
	return e.ep
}

// placeEntry places a new request on a replica of its entry model, and
// returns what the front end keeps to answer for it (nil without replicas).
func (r *Deployment) placeEntry(model int, id uint64, prompt []int32, p route.Params) (*entry, error) {
	if r.placer == nil {
		return nil, nil
	}
	rep := r.placer.entry(model, id)
	if rep < 0 {
		return nil, fmt.Errorf("deploy: model %s: %w: %w", r.cfg.Models[model].Name, ErrUnavailable, subserver.ErrNoReplica)
	}
	return &entry{ep: bus.Endpoint(model, rep), prompt: prompt, params: p}, nil
}

// frontLost sends again, to another replica, every request the front end
// answers for at replica endpoint ep.
func (r *Deployment) frontLost(ctx context.Context, ep int) {
	r.mu.Lock()
	var ids []uint64
	for id, o := range r.open {
		if o.entry != nil && !o.entry.left && o.entry.ep == ep {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.reenter(ctx, id, ep)
	}
}

// reenter sends request id, which the front end answers for at endpoint
// lost, again to another replica of the model: its entry message with its
// initial state, or its last checkpoint. Nothing happens when the request
// is no longer there (it ended, left, or was sent again already).
func (r *Deployment) reenter(ctx context.Context, id uint64, lost int) {
	model := bus.ModelOf(lost)
	r.mu.Lock()
	o, ok := r.open[id]
	if !ok || o.entry == nil || o.entry.left || o.entry.ep != lost {
		r.mu.Unlock()
		return
	}
	ent := o.entry
	rep := r.placer.Place(model, bus.ReplicaOf(lost), id, len(ent.prompt))
	if rep < 0 {
		r.mu.Unlock()
		r.cancelReq(id, fmt.Errorf("deploy: model %s: %w: %w", r.cfg.Models[model].Name, ErrUnavailable, subserver.ErrNoReplica))
		return
	}
	to := bus.Endpoint(model, rep)
	ent.ep = to
	var e *bus.Event
	if ent.ckpt != nil {
		e = r.bus.Get()
		bus.Copy(e, ent.ckpt)
		e.From, e.Msg.From = bus.Frontend, bus.Frontend
		e.Msg.Placed[model] = rep
	}
	snap, stateful := ent.snap, ent.stateful
	r.mu.Unlock()
	if e == nil {
		view := route.Request{ID: id, Params: ent.params, Tokens: ent.prompt, PromptLen: len(ent.prompt), Committed: len(ent.prompt)}
		var st route.State
		if r.stat != nil {
			st = r.stat.NewState(&view)
		}
		e = r.entryMessage(id, model, to, ent.prompt, ent.params, st)
	} else if stateful && r.stat != nil {
		st := r.stat.NewState(&route.Request{ID: id, Params: e.Msg.Params, PromptLen: e.Msg.PromptLen, Committed: e.Msg.Committed})
		if st == nil || st.UnmarshalBinary(snap) != nil {
			r.bus.Put(e)
			r.cancelReq(id, fmt.Errorf("deploy: request %d: its checkpoint's state does not restore", id))
			return
		}
		e.Msg.State = st
	}
	if err := r.bus.Send(ctx, to, e); err != nil && !errors.Is(err, bus.ErrNoEndpoint) { // gone too: its Lost sends it on
		r.cancelReq(id, err)
	}
}

// checkpointed keeps checkpoint e of a request (a peer message a replica
// sent the front end, DESIGN §9): the front end answers for the request at
// that replica from now on.
func (r *Deployment) checkpointed(e *bus.Event) {
	var snap []byte
	if st := e.Msg.State; st != nil {
		var err error
		if snap, err = st.MarshalBinary(); err != nil {
			return // the previous keeper's loss already took this one's
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.open[e.ID]
	if !ok || o.entry == nil || len(e.Msg.Placed) <= e.Msg.To || e.Msg.To < 0 {
		return
	}
	if o.entry.ckpt == nil {
		o.entry.ckpt = r.bus.Get()
	}
	bus.Copy(o.entry.ckpt, e)
	o.entry.ckpt.Msg.State = nil // restored from snap
	o.entry.ep, o.entry.left, o.entry.stateful, o.entry.snap = e.From, false, e.Msg.State != nil, snap
}

// StopReplica stops replica rep of local model i as a failure would: its
// loop ends and everything it held is gone. Its requests continue on the
// model's other replicas from the hand-offs that brought them there; when
// it was the model's last replica up, the model is down (ModelDown). It
// returns once every other replica took the loss in (or ctx ended): a
// request survives one loss at a time, so replicas stopped one after the
// other lose nothing.
func (r *Deployment) StopReplica(ctx context.Context, i, rep int) error {
	if i < 0 || i >= len(r.models) || rep < 0 || rep >= len(r.models[i]) {
		return fmt.Errorf("deploy: no local replica %d of model %d", rep, i)
	}
	l := r.models[i][rep]
	if !l.up.Swap(false) {
		return fmt.Errorf("deploy: replica %d of model %s is down already", rep, r.cfg.Models[i].Name)
	}
	r.mu.Lock()
	cancel, done := l.cancel, l.done
	r.mu.Unlock()
	cancel()
	<-done
	marks := r.lossMarks()
	r.replicaLost(i, rep, fmt.Errorf("deploy: replica %d of model %s: %w", rep, r.cfg.Models[i].Name, ErrReplicaStopped))
	if r.ReplicasUp(i) == 0 {
		return nil // the model is down: nothing to take in
	}
	return marks.wait(ctx)
}

// lossMark is a replica up (its sub-server then) and the losses it had
// taken in.
type lossMark struct {
	l    *local
	s    *subserver.Server
	seen uint64
}

// lossMarks notes the losses every replica up has taken in so far.
func (r *Deployment) lossMarks() lossMarks {
	var out lossMarks
	for _, l := range r.local {
		if l.up.Load() {
			s := l.sub.Load()
			out = append(out, lossMark{l, s, s.Stats().Losses})
		}
	}
	return out
}

// lossMarks are the replicas a loss is announced to.
type lossMarks []lossMark

// wait waits until every replica still up, and not replaced since, took
// in one more loss.
func (ms lossMarks) wait(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for _, m := range ms {
		for m.l.up.Load() && m.l.sub.Load() == m.s && m.s.Stats().Losses <= m.seen {
			select {
			case <-ctx.Done():
				return fmt.Errorf("deploy: waiting for the replicas to take in a loss: %w", ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

// replicaLost announces that replica rep of model i, marked down, is
// gone: the hand-offs kept for it go to the model's other replicas. When
// none of them is up the model is down; it returns how many requests
// that ended (none while another replica is up).
func (r *Deployment) replicaLost(i, rep int, cause error) int {
	name, ep := r.cfg.Models[i].Name, bus.Endpoint(i, rep)
	if r.ReplicasUp(i) == 0 {
		n := r.ModelDown(i, cause)
		r.event("model down", "model", name, "ended", n, "err", cause)
		return n
	}
	ctx := context.Background()
	e := r.bus.Get()
	e.Kind, e.From, e.Endpoint = bus.Lost, bus.Frontend, ep
	_ = r.bus.Broadcast(ctx, e) // a closed bus has no requests left
	// The front end takes its part in turn with the events before it: a
	// request's release from the lost replica, still on its way, counts.
	f := r.bus.Get()
	f.Kind, f.From, f.Endpoint = bus.Lost, bus.Frontend, ep
	_ = r.bus.Send(ctx, bus.Frontend, f)
	r.event("replica lost: its requests go on on the model's other replicas", "model", name, "replica", rep, "cause", cause)
	return 0
}

// Replicas returns local model i's sub-servers, one per replica in
// replica order (none for a remote model). A replica replaced after a
// stall is the new one.
func (r *Deployment) Replicas(i int) []*subserver.Server {
	if i < 0 || i >= len(r.models) {
		return nil
	}
	out := make([]*subserver.Server, len(r.models[i]))
	for k, l := range r.models[i] {
		out[k] = l.sub.Load()
	}
	return out
}

// ReplicasUp returns how many of model i's replicas serve requests: for a
// remote model, 1 unless it is down.
func (r *Deployment) ReplicasUp(i int) int {
	if i < 0 || i >= len(r.models) {
		return 0
	}
	if r.models[i] == nil {
		switch {
		case r.placer != nil:
			return r.placer.remote.Up(i)
		case r.Unavailable(i) != nil:
			return 0
		}
		return 1
	}
	n := 0
	for _, l := range r.models[i] {
		if l.up.Load() {
			n++
		}
	}
	return n
}

// ModelStats returns local model i's counters, its replicas' merged
// (subserver.MergeStats); false for a remote model.
func (r *Deployment) ModelStats(i int) (subserver.Stats, bool) {
	if i < 0 || i >= len(r.models) || r.models[i] == nil {
		return subserver.Stats{}, false
	}
	st := make([]subserver.Stats, len(r.models[i]))
	for k, l := range r.models[i] {
		st[k] = l.sub.Load().Stats()
	}
	return subserver.MergeStats(st), true
}

// Placements returns the placement counts of model i's replicas (zero
// without replicas).
func (r *Deployment) Placements(i int) Placements {
	if r.placer == nil || i < 0 || i >= len(r.placer.counts) {
		return Placements{}
	}
	c := &r.placer.counts[i]
	own := Placements{Placed: c.placed.Load(), Affine: c.affine.Load(), Replaced: c.replaced.Load(), NoReplica: c.none.Load()}
	if m := c.members.Load(); m != nil {
		own = own.Plus(*m)
	}
	return own
}

// SetMemberPlacements records the placements that sub-servers elsewhere
// made on model i's replicas (their hand-offs), as their heartbeats last
// reported them: Placements adds them to the front end's own.
func (r *Deployment) SetMemberPlacements(i int, p Placements) {
	if r.placer != nil && i >= 0 && i < len(r.placer.counts) {
		r.placer.counts[i].members.Store(&p)
	}
}

// Plus returns the sum of p and q.
func (p Placements) Plus(q Placements) Placements {
	return Placements{Placed: p.Placed + q.Placed, Affine: p.Affine + q.Affine, Replaced: p.Replaced + q.Replaced, NoReplica: p.NoReplica + q.NoReplica}
}

// Count adds one placement with outcome o.
func (p *Placements) Count(o place.Outcome) {
	switch o {
	case place.Placed:
		p.Placed++
	case place.Affine:
		p.Affine++
	case place.Replaced:
		p.Replaced++
	default:
		p.NoReplica++
	}
}

// group is the tuner's handle on a local model: every replica takes the
// policy it pushes, and its counters are the replicas' merged.
type group struct {
	r     *Deployment
	model int
}

// SetPolicy sets the policy of every current replica of the model.
func (g group) SetPolicy(p sched.Policy) {
	for _, s := range g.r.Replicas(g.model) {
		s.SetPolicy(p)
	}
}

// Stats returns the model's merged counters.
func (g group) Stats() subserver.Stats {
	st, _ := g.r.ModelStats(g.model)
	return st
}
