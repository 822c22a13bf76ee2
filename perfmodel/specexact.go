package perfmodel

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/tokenrouter/tokenrouter/sched"
)

// maxExactDepth bounds the speculation depth of EvaluateSpeculativeExact:
// a request's drafts (at most Depth + 1 tokens) are packed two bits each.
const maxExactDepth = 15

// The tokens of a request's draft region in the exact speculative chain:
// a token of the small model's own (needing no verification), or a routed
// position in the large model's running or queued verify job.
const (
	draftPlain uint8 = iota
	draftRunning
	draftQueued
)

// xreq is one request of the exact speculative chain: where it is, whether
// its running small-model step is void, and its draft region, which starts
// at its oldest unresolved routed position (everything before is
// committed).
type xreq struct {
	at    uint8 // specQueued, specRunning or specWaiting
	stale bool
	n     uint8
	tok   [maxExactDepth + 1]uint8
}

// pack encodes r in a uint64: 2 bits place, 1 bit stale, 5 bits length,
// 2 bits per draft token.
func (r xreq) pack() uint64 {
	x := uint64(r.at) | uint64(b2u(r.stale))<<2 | uint64(r.n)<<3
	for i := range r.n {
		x |= uint64(r.tok[i]) << (8 + 2*uint(i))
	}
	return x
}

// unpackReq decodes xreq.pack.
func unpackReq(x uint64) xreq {
	r := xreq{at: uint8(x & 3), stale: x>>2&1 == 1, n: uint8(x >> 3 & 31)}
	for i := range r.n {
		r.tok[i] = uint8(x >> (8 + 2*uint(i)) & 3)
	}
	return r
}

// b2u converts a bool to 0 or 1.
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// has reports whether r's draft holds a token of kind k.
func (r *xreq) has(k uint8) bool { return slices.Contains(r.tok[:r.n], k) }

// drop removes r's first k draft tokens.
func (r *xreq) drop(k int) {
	copy(r.tok[:], r.tok[k:r.n])
	r.n -= uint8(k)
}

// xstate is a state of the exact speculative chain: the requests (as a
// multiset, sorted) and each model's remaining step time in quanta.
type xstate struct {
	reqs []xreq
	rem  [2]int
}

// xchain builds the exact speculative chain.
type xchain struct {
	p, a   float64
	depth  int
	quanta [2]int
	pols   []Policy
	n      int
	index  map[string]int32
	states []string
	max    int
	buf    []byte
	packed []uint64
}

// key canonicalises s (requests sorted) into a map key.
func (c *xchain) key(s *xstate) string {
	c.packed = c.packed[:0]
	for _, r := range s.reqs {
		c.packed = append(c.packed, r.pack())
	}
	slices.Sort(c.packed)
	c.buf = c.buf[:0]
	for _, x := range c.packed {
		c.buf = binary.AppendUvarint(c.buf, x)
	}
	c.buf = binary.AppendUvarint(binary.AppendUvarint(c.buf, uint64(s.rem[0])), uint64(s.rem[1]))
	return string(c.buf)
}

// decode rebuilds a state from its key.
func (c *xchain) decode(k string, s *xstate) {
	b := []byte(k)
	s.reqs = s.reqs[:0]
	for range c.n {
		x, w := binary.Uvarint(b)
		b = b[w:]
		s.reqs = append(s.reqs, unpackReq(x))
	}
	r0, w := binary.Uvarint(b)
	r1, _ := binary.Uvarint(b[w:])
	s.rem = [2]int{int(r0), int(r1)}
}

// id returns the index of state s, adding it when new (−1 past the limit).
func (c *xchain) id(s *xstate) int32 {
	k := c.key(s)
	if i, ok := c.index[k]; ok {
		return i
	}
	if len(c.states) >= c.max {
		return -1
	}
	i := int32(len(c.states))
	c.index[k] = i
	c.states = append(c.states, k)
	return i
}

// launch applies sched.Decide to each idle model: the small model takes
// every queued request, the large one every queued verify job.
func (c *xchain) launch(s *xstate) {
	var queued, running [2]int
	for _, r := range s.reqs {
		queued[0] += int(b2u(r.at == specQueued))
		running[0] += int(b2u(r.at == specRunning))
		queued[1] += int(b2u(r.has(draftQueued)))
		running[1] += int(b2u(r.has(draftRunning)))
	}
	for i := range 2 {
		if running[i] > 0 || !c.pols[i].decide(sched.State{Runnable: queued[i], Active: c.n}, 0, 0, 0).Launch {
			continue
		}
		s.rem[i] = c.quanta[i]
		for k := range s.reqs {
			r := &s.reqs[k]
			if i == 0 && r.at == specQueued {
				r.at = specRunning
			}
			for t := range r.n {
				if i == 1 && r.tok[t] == draftQueued {
					r.tok[t] = draftRunning
				}
			}
		}
	}
}

// decoded applies a small-model step to r: the token is routed or not.
func (c *xchain) decoded(r *xreq, routed bool) float64 {
	tok := 0.0
	switch {
	case r.stale:
		r.stale = false
	case routed:
		r.tok[r.n] = draftQueued // joins the queued job or starts one
		r.n++
	case r.n == 0:
		tok = 1
	default:
		r.tok[r.n] = draftPlain
		r.n++
	}
	r.at = specQueued
	if r.n > 0 && int(r.n)-1 >= c.depth {
		r.at = specWaiting
	}
	return tok
}

// verified applies the result of r's running verify job whose first
// disagreement is its k-th position (−1: none) and returns the tokens it
// commits.
func (c *xchain) verified(r *xreq, k int) float64 {
	var tok int
	if k < 0 {
		tok = int(r.n)
		if i := slices.Index(r.tok[:r.n], draftQueued); i >= 0 {
			tok = i
		}
		r.drop(tok)
	} else {
		for i, seen := 0, 0; i < int(r.n); i++ {
			if r.tok[i] == draftRunning {
				if seen == k {
					tok = i + 1
					break
				}
				seen++
			}
		}
		r.n = 0
		r.stale = r.at == specRunning
	}
	if r.at == specWaiting && (r.n == 0 || int(r.n)-1 < c.depth) {
		r.at = specQueued
	}
	return float64(tok)
}

// outcomes lists a finishing unit's outcomes: for a small-model step,
// routed or not (one outcome for a void step); for a verify job of m
// positions, the index of the first disagreement (−1 first: all agree).
func (c *xchain) outcomes(model int, r *xreq) (vals []int, probs []float64) {
	if model == 0 {
		if r.stale {
			return []int{0}, []float64{1}
		}
		return []int{1, 0}, []float64{c.p, 1 - c.p}
	}
	m := 0
	for _, t := range r.tok[:r.n] {
		m += int(b2u(t == draftRunning))
	}
	vals, probs = []int{-1}, []float64{math.Pow(c.a, float64(m))}
	for j := range m {
		vals = append(vals, j)
		probs = append(probs, math.Pow(c.a, float64(j))*(1-c.a))
	}
	return vals, probs
}

// EvaluateSpeculativeExact returns the exact throughput of the speculative
// system of m (R2R's pattern, batch-independent step times, partitioned
// placement) at concurrency n under static launch policies pols with
// speculation sp without a bus delay: the stationary distribution of a
// Markov chain observed at batch completions whose state holds each
// request's place (queued, running or waiting at the depth bound on the
// small model), whether its running step is void, and its draft region
// (each token the small model's own, or a routed position in the large
// model's running or queued verify job), plus each model's remaining step
// time. The rules are SimulateSpeculative's with a zero bus delay; the two
// are independent implementations of them. The chain grows fast with n
// and Depth: it is meant for small systems (n ≤ 4) and fails with
// ErrTooLarge past opts.MaxStates.
func EvaluateSpeculativeExact(ctx context.Context, m Model, n int, pols []Policy, sp Speculation, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := m.checkR2R(); err != nil {
		return Result{}, err
	}
	if err := sp.validate(); err != nil {
		return Result{}, err
	}
	switch {
	case n < 1:
		return Result{}, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	case len(pols) != 2:
		return Result{}, fmt.Errorf("perfmodel: %d policies for 2 models", len(pols))
	case sp.BusDelay != 0, sp.Depth > maxExactDepth, m.timeShared(), !m.Curve(0).Constant(), !m.Curve(1).Constant():
		return Result{}, fmt.Errorf("%w: the exact speculative chain needs no bus delay, depth ≤ %d, partitioned placement and batch-independent steps", ErrNoFormula, maxExactDepth)
	}
	for i, p := range pols {
		if p.MaxWait > 0 || p.Lookahead {
			return Result{}, fmt.Errorf("perfmodel: policy %d: the exact speculative chain takes static thresholds only", i)
		}
	}
	q := m.Quanta()
	c := &xchain{p: m.P[0][1], a: sp.Agree, depth: sp.Depth, quanta: [2]int{q[0], q[1]}, pols: pols, n: n,
		index: map[string]int32{}, max: opts.MaxStates}
	res := Result{N: n, B: policyThresholds(pols, n), Feasible: true, Method: MethodExact}
	ch, err := c.build(ctx, m.delta())
	if err != nil {
		return res, err
	}
	err = ch.solve(ctx, opts.Tolerance, &res)
	return res, err
}

// build enumerates the reachable states and their transitions.
func (c *xchain) build(ctx context.Context, delta float64) (*chain, error) {
	s := &xstate{reqs: make([]xreq, c.n)}
	c.launch(s)
	c.id(s)
	ch := &chain{p: &csr{rowPtr: []int32{0}}}
	e := &xexpansion{row: map[int32]float64{}, next: &xstate{}}
	for cur := 0; cur < len(c.states); cur++ {
		if cur%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("perfmodel: building the speculative chain: %w", err)
			}
		}
		c.decode(c.states[cur], s)
		tmin := math.MaxInt
		for i := range 2 {
			if s.rem[i] > 0 {
				tmin = min(tmin, s.rem[i])
			}
		}
		if tmin == math.MaxInt {
			return nil, fmt.Errorf("%w: deadlock state reached at N=%d", ErrInfeasible, c.n)
		}
		e.s, e.tmin, e.units = s, tmin, finishingUnits(s, tmin, e.units[:0])
		clear(e.row)
		e.tokens = 0
		if err := c.expand(e, 0, s.reqs, 1, 0); err != nil {
			return nil, err
		}
		ch.tokens = append(ch.tokens, e.tokens)
		ch.dt = append(ch.dt, float64(tmin)*delta)
		appendMapRow(ch.p, e.row)
	}
	ch.p.n = len(c.states)
	return ch, nil
}

// xunit is one finishing unit of work: a small-model step (model 0) or a
// verify job (model 1) of request req.
type xunit struct{ model, req int }

// xexpansion is the state being expanded by xchain.build and the
// transitions found so far.
type xexpansion struct {
	s      *xstate
	tmin   int     // quanta to the next event
	units  []xunit // the units finishing at the next event
	row    map[int32]float64
	tokens float64 // expected tokens committed at the next event
	next   *xstate // scratch successor
}

// finishingUnits appends to units the units of s finishing after tmin
// quanta: small-model steps first, then verify jobs.
func finishingUnits(s *xstate, tmin int, units []xunit) []xunit {
	for i := range 2 {
		if s.rem[i] != tmin {
			continue
		}
		for k := range s.reqs {
			if (i == 0 && s.reqs[k].at == specRunning) || (i == 1 && s.reqs[k].has(draftRunning)) {
				units = append(units, xunit{i, k})
			}
		}
	}
	return units
}

// expand enumerates the outcomes of e.units[u:] applied to reqs (reached
// with probability prob, committing tok tokens so far) and adds each
// resulting state to e's row and expected tokens.
func (c *xchain) expand(e *xexpansion, u int, reqs []xreq, prob, tok float64) error {
	if u == len(e.units) {
		next := e.next
		next.reqs = append(next.reqs[:0], reqs...)
		for i := range 2 {
			next.rem[i] = max(0, e.s.rem[i]-e.tmin)
		}
		c.launch(next)
		id := c.id(next)
		if id < 0 {
			return fmt.Errorf("%w: more than %d states at N=%d", ErrTooLarge, c.max, c.n)
		}
		e.row[id] += prob
		e.tokens += prob * tok
		return nil
	}
	unit := e.units[u]
	vals, probs := c.outcomes(unit.model, &reqs[unit.req])
	for j, v := range vals {
		if probs[j] == 0 {
			continue
		}
		cp := slices.Clone(reqs)
		r := &cp[unit.req]
		var t float64
		if unit.model == 0 {
			t = c.decoded(r, v == 1)
		} else {
			t = c.verified(r, v)
		}
		if err := c.expand(e, u+1, cp, prob*probs[j], tok+t); err != nil {
			return err
		}
	}
	return nil
}

// appendMapRow appends row, in increasing column order, as p's next row.
func appendMapRow(p *csr, row map[int32]float64) {
	cols := make([]int32, 0, len(row))
	for to := range row {
		cols = append(cols, to)
	}
	slices.Sort(cols)
	for _, to := range cols {
		p.col = append(p.col, to)
		p.val = append(p.val, row[to])
	}
	p.rowPtr = append(p.rowPtr, int32(len(p.col)))
}
