package routertrain

import (
	"context"
	"fmt"
	"slices"

	"github.com/tokenrouter/tokenrouter/engine"
)

// branch is one continuation the large model writes for verification:
// after prefix, the token first, then k greedy tokens of its own.
type branch struct {
	prefix  []int32
	first   int32
	k       int
	cont    []int32 // the greedy tokens after first
	logp    float64 // the log-probability of first and cont
	started bool
}

// noToken as a branch's first token takes the large model's own.
const noToken = -1

// verify re-labels every differing position: it stays 1 only if the
// large model's continuations from the small model's token and from its
// own token diverge over the next Verify tokens by the judge.
func (c *collector) verify(ctx context.Context, samples []*sample) error {
	type pair struct {
		s    *sample
		j    int
		a, b *branch
	}
	var pairs []pair
	var all []*branch
	for _, s := range samples {
		for j, y := range s.label {
			if y == 0 {
				continue
			}
			prefix := append(slices.Clip(s.prompt), s.gen[:j]...)
			k := min(c.o.Verify, c.ctxLen-len(prefix))
			if k <= 0 {
				continue // no room to continue: the position stays unverified, labelled 1
			}
			p := pair{s: s, j: j, a: &branch{prefix: prefix, first: s.gen[j], k: k}, b: &branch{prefix: prefix, first: noToken, k: k}}
			pairs = append(pairs, p)
			all = append(all, p.a, p.b)
		}
	}
	// The large model's own token at each differing position is its greedy
	// choice after the prefix: branch b takes it from its first step.
	for from := 0; from < len(all); from += c.o.Batch {
		if err := c.continueBranches(ctx, all[from:min(from+c.o.Batch, len(all))]); err != nil {
			return err
		}
		c.progress("verifying", min(from+c.o.Batch, len(all))/2, len(all)/2)
	}
	for _, p := range pairs {
		if !c.divergent(p.a, p.b) {
			p.s.label[p.j] = 0
		}
	}
	return nil
}

// divergent judges two continuations: a from the small model's token, b
// from the large model's.
func (c *collector) divergent(a, b *branch) bool {
	if c.o.Judge == JudgeLikelihood {
		n := float64(a.k + 1)
		return a.logp/n < b.logp/n-c.o.Margin
	}
	return !slices.Equal(a.cont, b.cont)
}

// continueBranches runs a batch of branches on the large model: an extend
// of the prefix, then first (for a branch without one, the large model's
// own greedy token) and k greedy tokens, one decode step each.
func (c *collector) continueBranches(ctx context.Context, bs []*branch) error {
	ids := c.seqs(len(bs))
	defer func() {
		for _, id := range ids {
			c.llm.Release(id)
		}
	}()
	want := engine.Want(0)
	if c.o.Judge == JudgeLikelihood {
		want = engine.WantLogits
	}
	in := make([]engine.Input, len(bs))
	out := make([]engine.Output, len(bs))
	active := make([]*branch, len(bs))
	for i, b := range bs {
		in[i] = engine.Input{Seq: ids[i], Tokens: b.prefix, Want: want}
		active[i] = b
	}
	for len(in) > 0 {
		if err := c.llm.Step(ctx, in, out); err != nil {
			return fmt.Errorf("routertrain: large model (verification): %w", err)
		}
		keep := 0
		for i, b := range active {
			next := out[i].Token
			if !b.started {
				b.started = true
				if b.first == noToken {
					b.first = next
				}
				next = b.first
			} else {
				b.cont = append(b.cont, next)
			}
			if want != 0 {
				b.logp += engine.LogProb(out[i].Logits, next)
			}
			if len(b.cont) == b.k {
				continue
			}
			in[keep], active[keep] = engine.Input{Seq: in[i].Seq, Tokens: []int32{next}, Want: want}, b
			keep++
		}
		in, active = in[:keep], active[:keep]
	}
	return nil
}
