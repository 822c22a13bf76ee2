package subserver

import (
	"fmt"
	"slices"

	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/engine"
)

// constraint is one request's output schema on this model: a matcher at
// the end of its committed output and the masks of its next draws.
type constraint struct {
	schema string // the text it was compiled from
	base   constrain.Matcher
	at     int  // the index in Tokens the base matcher has reached
	dead   bool // a committed token was refused: only the end may follow
	masks  [][]uint64
	allow  [][]uint64 // per appended position: a mask or nil (free)
}

// allow returns the Allow sets of r's next step, which appends
// r.req.Tokens[from:]: one per appended position whose draw is used (the
// last, or all of them for want), nil when the request has no schema.
func (s *Server) allow(r *rec, from int, want engine.Want) ([][]uint64, error) {
	q := &r.req
	if q.Params.Schema == "" {
		return nil, nil
	}
	if s.cfg.Vocab == nil {
		return nil, fmt.Errorf("subserver %s: structured output needs the model's tokenizer", s.cfg.Name)
	}
	v := s.cfg.Vocab()
	c := r.cons
	if c == nil || c.schema != q.Params.Schema {
		sc, err := constrain.Compile([]byte(q.Params.Schema))
		if err != nil {
			return nil, fmt.Errorf("subserver %s: %w", s.cfg.Name, err)
		}
		c = &constraint{schema: q.Params.Schema, base: sc.Matcher(), at: q.PromptLen}
		r.cons = c
	}
	for ; c.at < q.Committed; c.at++ {
		if !c.dead && q.Tokens[c.at] != s.eos && !c.base.AdvanceToken(v, q.Tokens[c.at]) {
			c.dead = true
		}
	}
	n := len(q.Tokens) - from
	c.allow = slices.Grow(c.allow[:0], n)[:n]
	clear(c.allow)
	first := n - 1
	if want&engine.WantAllTokens != 0 {
		first = 0
	}
	m, at, ok := c.base, c.at, !c.dead
	for j := first; j < n; j++ {
		next := from + j + 1 // the index the draw after position j fills
		if next < c.at {
			continue // a committed token's draw: not used
		}
		for ; at < next; at++ {
			ok = ok && m.AdvanceToken(v, q.Tokens[at])
		}
		c.allow[j] = c.mask(j, v, &m, ok, s.eos)
	}
	return c.allow, nil
}

// mask fills the j-th mask buffer: the tokens m allows, and the end of
// generation when the output is complete or nothing else fits (ok false:
// an earlier token was refused).
func (c *constraint) mask(j int, v *constrain.Vocab, m *constrain.Matcher, ok bool, eos int32) []uint64 {
	for len(c.masks) <= j {
		c.masks = append(c.masks, make([]uint64, (v.Size()+63)/64))
	}
	dst := c.masks[j]
	empty := true
	if ok {
		m.Allowed(v, dst)
		for _, w := range dst {
			if w != 0 {
				empty = false
				break
			}
		}
	} else {
		clear(dst)
	}
	if eos >= 0 && int(eos) < v.Size() && (empty || m.Complete()) {
		dst[eos/64] |= 1 << (eos % 64)
	}
	return dst
}
