package subserver

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// Speculative continuation (DESIGN §6b, route.Speculable). Where an
// algorithm that opted in routes a position from this model to a peer, the
// sampled token stays as an unverified draft, the request goes on decoding
// here, and a verify job (a peer message whose Verify lists the position)
// goes to the peer. The peer merges jobs still queued for the request,
// extends the unseen suffix in one step asking for its token at every
// appended position, and answers with its token at each listed position
// (Verdict). Here the answer is walked in order: agreement resolves the
// position, the first disagreement cuts the sequence there, appends the
// peer's token, restores the State snapshot taken at the position and
// starts a new round (Epoch), so answers of older rounds are ignored. Only
// the prefix before the oldest unverified position is committed. A request
// runs at most depth tokens past that position; at the bound, at its token
// limit or after an end of sequence it is parked until the answer comes.

// Mode says whether sub-servers speculate.
type Mode uint8

const (
	// SpeculateAuto speculates where the algorithm opted in (the default).
	SpeculateAuto Mode = iota
	// SpeculateOff never speculates.
	SpeculateOff
	// SpeculateOn speculates; a deployment refuses an algorithm that did
	// not opt in.
	SpeculateOn
)

// String names the mode as flags spell it.
func (m Mode) String() string {
	switch m {
	case SpeculateOff:
		return "off"
	case SpeculateOn:
		return "on"
	}
	return "auto"
}

// ParseMode parses "off", "on" or "auto" ("" is auto).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "auto":
		return SpeculateAuto, nil
	case "off":
		return SpeculateOff, nil
	case "on":
		return SpeculateOn, nil
	}
	return 0, fmt.Errorf("speculate %q: want off, on or auto", s)
}

// Speculation configures speculative continuation.
type Speculation struct {
	// Mode says whether to speculate.
	Mode Mode
	// Depth bounds how many tokens a request runs past its oldest
	// unverified routed position (at most MaxDepth); 0 chooses the bound
	// from measurements (AutoDepth). A request's route.Params.Speculate
	// overrides it.
	Depth int
}

// MaxDepth bounds every speculation depth.
const MaxDepth = 64

// MinAgree is the measured agreement below which AutoDepth turns
// speculation off.
const MinAgree = 0.1

// minSamples is how many routed positions are compared before the
// automatic depth departs from 0 (no speculation).
const minSamples = 16

// AutoDepth is the speculation depth chosen from measurements: agree, the
// share of routed positions where the peer's token equalled this model's;
// step, this model's step time; trip, the time from a routing decision
// until the peer's token is back (the meter passes a high quantile of it:
// the mean plus two mean absolute deviations, since a request whose answer
// is late parks while its peers keep stepping). A request speculating past a routed
// position gains the steps it would have waited, when the peer agrees, and
// wastes the rows of its drafts otherwise. Past trip it would not wait
// anyway (the answer is back, and a later routed position moves the bound
// along), so the depth is the number of steps that fit in one round trip,
// ceil(trip/step), within [1, MaxDepth]. Below MinAgree agreement the kept
// tokens do not pay for the verify traffic and the rows rolled back: 0, no
// speculation.
func AutoDepth(agree float64, step, trip time.Duration) int {
	if agree < MinAgree || math.IsNaN(agree) {
		return 0
	}
	if step <= 0 {
		return MaxDepth
	}
	n := (trip + step - 1) / step
	return int(min(max(n, 1), MaxDepth))
}

// ewma is a running mean: the plain mean of the first samples, then an
// exponential average over about the last 64.
type ewma struct {
	v float64
	n int
}

func (e *ewma) add(x float64) {
	e.n++
	e.v += max(1/float64(e.n), 1.0/64) * (x - e.v)
}

// meter holds what the automatic depth is chosen from.
type meter struct {
	agree, step, trip ewma
	spread            ewma // of |trip − its mean so far|
	depth             int  // AutoDepth of the current measurements
}

// sample adds a compared routed position: whether the peer agreed and the
// round trip.
func (m *meter) sample(agreed bool, trip time.Duration) {
	a := 0.0
	if agreed {
		a = 1
	}
	m.agree.add(a)
	if m.trip.n > 0 {
		m.spread.add(math.Abs(float64(trip) - m.trip.v))
	}
	m.trip.add(float64(trip))
	if m.agree.n >= minSamples {
		m.depth = AutoDepth(m.agree.v, time.Duration(m.step.v), time.Duration(m.trip.v+2*m.spread.v))
	}
}

// draft is a request's speculation on the model it speculates from.
type draft struct {
	open  []int32         // unverified routed positions, oldest first
	sent  []time.Duration // when each was sent for verification
	snaps [][]byte        // the State at each (used when it has one)
	depth int             // the bound, fixed while open is not empty
	epoch uint32          // the round; a rollback starts the next
	// probe is a routed position handed off without speculation (0: none)
	// and the token sampled there, to measure agreement; probeAt is when.
	probe, probeTok int32
	probeAt         time.Duration
}

// speculable reports whether sp speculates past some routed position
// between n models.
func speculable(sp route.Speculable, n int) bool {
	for i := range n {
		for j := range n {
			if i != j && sp != nil && sp.Speculable(i, j) {
				return true
			}
		}
	}
	return false
}

// depth is the speculation depth for a request's next routed position.
func (s *Server) depth(q *route.Request) int {
	switch d := q.Params.Speculate; {
	case d < 0:
		return 0
	case d > 0:
		return min(d, MaxDepth)
	}
	return s.depthInForce()
}

// speculate carries out a routing decision by speculating past it when
// the algorithm and the request allow; it reports whether it did. tok is
// the token the step sampled.
func (s *Server) speculate(ctx context.Context, r *rec, d route.Decision, tok int32, now time.Duration) bool {
	self := s.cfg.Index
	if s.spec == nil || d.Next == self || d.Token != route.NoToken || d.Cut >= 0 || d.Next < 0 || d.Next >= s.cfg.Models ||
		!s.spec.Speculable(self, d.Next) {
		return false
	}
	q, dr := &r.req, &r.draft
	if len(dr.open) == 0 {
		if dr.depth = s.depth(q); dr.depth == 0 {
			dr.probe, dr.probeTok, dr.probeAt = int32(len(q.Tokens)), tok, now
			return false
		}
	}
	pos := len(q.Tokens)
	if q.Params.Sampling.Logprobs {
		r.keepLogprob(pos, tok)
	}
	if q.State != nil {
		var err error
		if dr.snaps, err = snapshot(dr.snaps, q.State); err != nil {
			s.fail(ctx, r, fmt.Errorf("subserver %s: state snapshot: %w", s.cfg.Name, err))
			return true
		}
	}
	q.Tokens, q.By = append(q.Tokens, tok), append(q.By, int8(self))
	dr.open, dr.sent = append(dr.open, int32(pos)), append(dr.sent, now)
	s.stats.speculated.Add(1)
	s.stats.handed.Add(1)
	s.moved[d.Next]++
	if d.Commit && s.commit(ctx, r) {
		return true
	}
	s.sendVerify(ctx, r, d.Next, pos)
	if r.at != finished {
		s.requeue(r, now)
	}
	return true
}

// snapshot appends st's encoding to snaps, reusing the buffers beyond
// len(snaps).
func snapshot(snaps [][]byte, st route.State) ([][]byte, error) {
	n := len(snaps)
	if n < cap(snaps) {
		snaps = snaps[:n+1]
	} else {
		snaps = append(snaps, nil)
	}
	var err error
	if a, ok := st.(encoding.BinaryAppender); ok {
		snaps[n], err = a.AppendBinary(snaps[n][:0])
	} else {
		snaps[n], err = st.MarshalBinary()
	}
	return snaps, err
}

// popFront drops the first element of s, keeping its buffer for reuse
// beyond the new length.
func popFront[T any](s []T) []T {
	first := s[0]
	copy(s, s[1:])
	s[len(s)-1] = first
	return s[:len(s)-1]
}

// sendVerify sends the verify job of routed position pos to model to: the
// tokens to has not seen up to pos. A round's first job goes to the
// replica r is pinned to there (or the one placement chooses); the round's
// other jobs follow it to the same replica, which answers them in order.
func (s *Server) sendVerify(ctx context.Context, r *rec, to, pos int) {
	ep := r.vto
	if len(r.draft.open) <= 1 || bus.ModelOf(ep) != to {
		var ok bool
		if ep, ok = s.placeHandOff(ctx, r, to); !ok {
			return
		}
		r.vto = ep
	}
	s.sendVerifyTo(ctx, r, to, ep, pos)
}

// sendVerifyTo sends the verify job of position pos to endpoint ep of
// model to.
func (s *Server) sendVerifyTo(ctx context.Context, r *rec, to, ep, pos int) {
	q := &r.req
	e := s.cfg.Bus.Get()
	e.Kind, e.ID, e.From = bus.Peer, q.ID, s.ep
	m := &e.Msg
	anchor := min(r.seen[to], pos)
	m.ID, m.From, m.To, m.Anchor = q.ID, s.cfg.Index, to, anchor
	m.Tokens = append(m.Tokens[:0], q.Tokens[anchor:pos]...)
	m.By = append(m.By[:0], q.By[anchor:pos]...)
	m.PromptLen, m.Committed, m.Params, m.State = q.PromptLen, q.Committed, q.Params, q.State
	m.Seen = append(m.Seen[:0], r.seen...)
	m.Placed = m.Placed[:0]
	if s.cfg.Placer != nil {
		m.Placed = append(m.Placed, r.placed...)
	}
	m.Verify = append(m.Verify[:0], int32(pos))
	m.Epoch = r.draft.epoch
	r.seen[to] = pos // what to holds once the job has run
	err := s.emit(ctx, ep, e)
	if err != nil && !(errors.Is(err, bus.ErrNoEndpoint) && s.replicas(to) > 1) { // a lost verifier: its Lost resends
		s.fail(ctx, r, fmt.Errorf("subserver %s: verify on model %d: %w", s.cfg.Name, to, err))
	}
}

// mayStep says whether r may step: not while it is parked at its
// speculation bound, its token limit or an end of sequence.
func (s *Server) mayStep(r *rec) bool {
	q, dr := &r.req, &r.draft
	if len(dr.open) == 0 {
		return true
	}
	if len(q.Tokens)-int(dr.open[0])-1 >= dr.depth {
		return false
	}
	if q.Params.MaxTokens > 0 && len(q.Tokens) >= q.PromptLen+q.Params.MaxTokens {
		return false
	}
	return s.eos < 0 || q.Params.IgnoreEOS || q.Tokens[len(q.Tokens)-1] != s.eos
}

// requeue makes r runnable here, or parks it while it may not step.
func (s *Server) requeue(r *rec, now time.Duration) {
	if !s.mayStep(r) {
		r.at = parked
		return
	}
	r.at, r.readyAt = runnable, now
	s.run = append(s.run, r)
}

// commitLimit is how far r may commit: up to its oldest unverified
// position.
func (r *rec) commitLimit() int {
	if len(r.draft.open) > 0 {
		return int(r.draft.open[0])
	}
	return len(r.req.Tokens)
}

// queueVerify applies an arriving verify job: a new job, or more
// positions for the job queued for the request.
func (s *Server) queueVerify(ctx context.Context, r *rec, e *bus.Event) {
	m := &e.Msg
	self := s.cfg.Index
	queued := r.at == runnable && len(r.verify) > 0
	if e.From != r.vfromEP {
		// Another replica speculates now (the one before was lost, DESIGN
		// §9): the rounds of the one before are over.
		r.verify, r.vlast, r.vdead = r.verify[:0], r.vlast[:0], false
	}
	if !queued && m.Epoch == r.vepoch && (r.vdead || r.refused(m)) {
		r.vdead = true // the sender rolls back and starts a new round
		return
	}
	kv := s.kvHeld(r)
	have := kv
	if queued {
		have = len(r.req.Tokens)
	}
	last := m.Verify[len(m.Verify)-1]
	if m.Anchor > have || m.Anchor > len(r.req.Tokens) || m.Anchor < 0 || len(m.Seen) != s.cfg.Models ||
		int(last) != m.Anchor+len(m.Tokens) || m.Verify[0] < 1 || r.at == runnable && !queued || r.at == parked {
		s.fail(ctx, r, fmt.Errorf("subserver %s: verify job at anchor %d (%d tokens held) out of order", s.cfg.Name, m.Anchor, have))
		return
	}
	if !s.cutKV(ctx, r, m.Anchor) {
		return
	}
	if !queued || m.Epoch != r.vepoch {
		r.verify = r.verify[:0]
	}
	if m.Epoch != r.vepoch {
		r.vlast, r.vdead = r.vlast[:0], false
	}
	for len(r.verify) > 0 && int(r.verify[len(r.verify)-1]) > m.Anchor {
		r.verify = r.verify[:len(r.verify)-1] // a rolled-back position
	}
	r.verify, r.vepoch, r.vfrom, r.vfromEP = append(r.verify, m.Verify...), m.Epoch, m.From, e.From
	r.req.State, r.req.Params, r.req.PromptLen, r.req.Committed = m.State, m.Params, m.PromptLen, m.Committed
	r.req.Tokens = append(r.req.Tokens[:m.Anchor], m.Tokens...)
	r.req.By = append(r.req.By[:m.Anchor], m.By...)
	r.lps = r.lps[:0]
	copy(r.seen, m.Seen)
	r.seen[self] = min(kv, m.Anchor)
	if !queued {
		r.at, r.readyAt, r.arrived = runnable, s.now(), handed
		s.run = append(s.run, r)
	}
}

// refused reports whether verify job m was built on a token this model
// refused in the job it answered last (of the same round): the sender
// will roll back past it, so the job is wasted work.
func (r *rec) refused(m *route.Message) bool {
	for i := 0; i+1 < len(r.vlast); i += 2 {
		p, v := int(r.vlast[i]), r.vlast[i+1]
		switch {
		case p < m.Anchor && p < len(r.req.Tokens):
			if r.req.Tokens[p] != v {
				return true
			}
		case p >= m.Anchor && p-m.Anchor < len(m.Tokens):
			if m.Tokens[p-m.Anchor] != v {
				return true
			}
		}
	}
	return false
}

// answer sends the verdict of r's verify job, which the step just ran
// (o is its output), back to the model that asked.
func (s *Server) answer(ctx context.Context, r *rec, o *engine.Output) {
	q := &r.req
	held := len(q.Tokens) - q.Appended // what the KV held before the step
	e := s.cfg.Bus.Get()
	e.Kind, e.ID, e.From = bus.Peer, q.ID, s.ep
	m := &e.Msg
	m.ID, m.From, m.To, m.Epoch = q.ID, s.cfg.Index, r.vfrom, r.vepoch
	m.Verify, m.Verdict = append(m.Verify[:0], r.verify...), m.Verdict[:0]
	r.vlast = r.vlast[:0]
	for _, p := range r.verify {
		j := int(p) - 1 - held
		if j < 0 || j >= len(o.Tokens) {
			s.cfg.Bus.Put(e)
			s.fail(ctx, r, fmt.Errorf("subserver %s: verify position %d outside the step", s.cfg.Name, p))
			return
		}
		m.Verdict = append(m.Verdict, o.Tokens[j])
		r.vlast = append(r.vlast, p, o.Tokens[j])
		for _, lp := range r.fresh {
			if lp.Pos == p {
				m.Logprobs = append(m.Logprobs, lp)
			}
		}
	}
	r.verify, r.at = r.verify[:0], pending
	s.moved[r.vfrom]++
	err := s.emit(ctx, r.vfromEP, e)
	if err != nil && !(errors.Is(err, bus.ErrNoEndpoint) && s.replicas(r.vfrom) > 1) { // a lost speculator: its request's keeper sends it again
		s.fail(ctx, r, fmt.Errorf("subserver %s: verdict to model %d: %w", s.cfg.Name, r.vfrom, err))
	}
}

// settle applies an arriving verdict: agreement resolves a position, the
// first disagreement rolls back to it.
func (s *Server) settle(ctx context.Context, r *rec, m *route.Message) {
	q, dr := &r.req, &r.draft
	if m.Epoch != dr.epoch || r.at == pending {
		return // an older round's verdict: a rollback superseded it
	}
	if len(m.Verdict) != len(m.Verify) {
		s.fail(ctx, r, fmt.Errorf("subserver %s: %d verdicts for %d positions", s.cfg.Name, len(m.Verdict), len(m.Verify)))
		return
	}
	now := s.now()
	for k, p := range m.Verify {
		if len(dr.open) == 0 || dr.open[0] != p {
			s.fail(ctx, r, fmt.Errorf("subserver %s: verdict for position %d, not the oldest unverified", s.cfg.Name, p))
			return
		}
		tok, agreed := m.Verdict[k], q.Tokens[p] == m.Verdict[k]
		s.measure(agreed, now-dr.sent[0])
		q.By[p] = int8(m.From)
		if q.Params.Sampling.Logprobs {
			r.replaceLogprob(int(p), m.Logprobs)
		}
		if !agreed {
			s.rollback(ctx, r, int(p), tok, m.From)
			break
		}
		next := len(q.Tokens)
		if len(dr.open) > 1 {
			next = int(dr.open[1])
		}
		s.stats.kept.Add(uint64(next - int(p)))
		dr.open, dr.sent = popFront(dr.open), popFront(dr.sent)
		if q.State != nil {
			dr.snaps = popFront(dr.snaps)
		}
	}
	if r.at == finished || s.commit(ctx, r) {
		return
	}
	if r.at == parked && s.mayStep(r) {
		r.arrived = handed
		s.requeue(r, now)
	}
}

// rollback cuts r's sequence at p, where the peer from disagreed with
// token tok, and goes on from tok: KV truncated on this model (and, by the
// next message's anchor, on the peer), State as it was at p.
func (s *Server) rollback(ctx context.Context, r *rec, p int, tok int32, from int) {
	q, dr := &r.req, &r.draft
	s.stats.rolledBack.Add(uint64(len(q.Tokens) - p))
	q.Tokens, q.By = append(q.Tokens[:p], tok), append(q.By[:p], int8(from))
	r.lps = logprobsIn(r.lps[:0], r.lps, 0, p+1)
	for k := range r.seen {
		r.seen[k] = min(r.seen[k], p)
	}
	if q.State != nil {
		if err := q.State.UnmarshalBinary(dr.snaps[0]); err != nil {
			s.fail(ctx, r, fmt.Errorf("subserver %s: state restore: %w", s.cfg.Name, err))
			return
		}
		dr.snaps = dr.snaps[:0]
	}
	dr.open, dr.sent = dr.open[:0], dr.sent[:0]
	dr.epoch++
	if r.hasKV {
		if err := s.truncate(q.ID, r.seen[s.cfg.Index]); err != nil {
			s.fail(ctx, r, fmt.Errorf("subserver %s: %w", s.cfg.Name, err))
		}
	}
}

// depthInForce is the deployment's depth bound: 0 when this model does
// not speculate, the configured bound, or the automatic one.
func (s *Server) depthInForce() int {
	switch {
	case s.spec == nil:
		return 0
	case s.cfg.Speculate.Depth > 0:
		return min(s.cfg.Speculate.Depth, MaxDepth)
	}
	return s.meter.depth
}

// measure adds a compared routed position to the counters and the
// automatic depth's measurements.
func (s *Server) measure(agreed bool, trip time.Duration) {
	s.stats.verified.Add(1)
	if agreed {
		s.stats.agreed.Add(1)
	}
	s.meter.sample(agreed, trip)
	s.stats.depth.Store(int64(s.depthInForce()))
}

// probed measures agreement at r's routed position handed off without
// speculation, now that the peer's token is back.
func (s *Server) probed(r *rec) {
	dr := &r.draft
	if dr.probe > 0 && int(dr.probe) < len(r.req.Tokens) {
		s.measure(r.req.Tokens[dr.probe] == dr.probeTok, s.now()-dr.probeAt)
	}
	dr.probe = 0
}

// replaceLogprob makes the log-probability at pos the one in lps, if any.
func (r *rec) replaceLogprob(pos int, lps []engine.Logprob) {
	for _, lp := range lps {
		if int(lp.Pos) != pos {
			continue
		}
		keep := r.lps[:0]
		for _, x := range r.lps {
			if int(x.Pos) != pos {
				keep = append(keep, x)
			}
		}
		r.lps = append(keep, lp)
		return
	}
}
