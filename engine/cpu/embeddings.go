package cpu

import (
	"context"
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// Pooled embeddings (engine.Pooler): every position's final hidden state
// (after the final norm, the vector WantHidden returns for a last
// position), pooled as the file's <arch>.pooling_type says.
//
// They run beside the engine's steps, from any goroutine: on an engine of
// their own over the same weights and kernel plan (read-only once the
// engine is open), with its own buffers, the KV of the one sequence it
// encodes (allocated per call, freed after) and one thread, the caller's,
// so the steps' sequences, KV budget, worker pool and hot path are
// untouched. The sequence goes through in passes of encodeRows positions,
// each through the same layer code as a step. Calls take turns; Close
// waits for the one running to stop, which it does between two layers.

// encodeRows is the most positions one pass of an embedding runs: it
// bounds the pass's buffers whatever the input's length.
const encodeRows = 256

// encoder serialises the Pool calls of one engine and owns the engine they
// run on.
type encoder struct {
	turn chan struct{} // holds a token while a Pool runs; Close keeps it
	done chan struct{} // closed by close
	sib  *Engine       // built on first use, used by the holder of turn
}

func newEncoder() *encoder {
	return &encoder{turn: make(chan struct{}, 1), done: make(chan struct{})}
}

// errClosed is a Pool on a closed engine.
var errClosed = fmt.Errorf("cpu: pool on a closed engine: %w", engine.ErrBadInput)

// close stops Pool: calls in progress end at their next layer, later ones
// fail. It returns once none runs.
func (c *encoder) close() {
	close(c.done)
	c.turn <- struct{}{} // kept: no Pool runs again
	if c.sib != nil {
		c.sib.pool.close()
		c.sib = nil
	}
}

// filePooling reads a GGUF file's pooling type (0 when absent).
func filePooling(f *gguf.File, arch string) engine.Pooling {
	v, ok := f.Uint(arch + ".pooling_type")
	if !ok || v > 1<<16 {
		return engine.PoolingNone
	}
	return engine.Pooling(v)
}

// Pooling reports how Pool pools (engine.Pooler): the file's
// pooling_type, and mean for a file that declares none (a causal language
// model's GGUF has no pooling_type) or says none, whose per-position
// vectors have no one-vector form. A llama2.c checkpoint pools by mean.
func (e *Engine) Pooling() engine.Pooling {
	if p := e.cfg.pooling; p != engine.PoolingNone {
		return p
	}
	return engine.PoolingMean
}

// Pool writes the pooled final hidden state of tokens, run as a sequence of
// their own, to dst (engine.Pooler). It may be called from any goroutine,
// also while Step runs; calls take turns.
func (e *Engine) Pool(ctx context.Context, tokens []int32, dst []float32) error {
	c := e.cfg
	how := e.Pooling()
	if err := c.poolable(how, tokens, len(dst)); err != nil {
		return err
	}
	enc := e.enc
	select {
	case enc.turn <- struct{}{}:
	case <-enc.done:
		return errClosed
	case <-ctx.Done():
		return fmt.Errorf("cpu: pool: %w", ctx.Err())
	}
	defer func() { <-enc.turn }()
	select {
	case <-enc.done:
		return errClosed
	default:
	}
	if enc.sib == nil {
		sib, err := e.sibling()
		if err != nil {
			return err
		}
		enc.sib = sib
	}
	if how == engine.PoolingCLS {
		tokens = tokens[:1] // attention is causal: the first position sees only itself
	}
	return enc.sib.encode(ctx, enc.done, tokens, how, dst[:c.dim])
}

// poolable checks a Pool call's arguments.
func (c *config) poolable(how engine.Pooling, tokens []int32, width int) error {
	switch {
	case !how.Embeds():
		return fmt.Errorf("cpu: pool: the model's pooling_type is %s, which gives no embedding: %w", how, engine.ErrBadInput)
	case len(tokens) == 0:
		return fmt.Errorf("cpu: pool: no tokens: %w", engine.ErrBadInput)
	case len(tokens) > c.ctx:
		return fmt.Errorf("cpu: pool: %d tokens (context %d): %w", len(tokens), c.ctx, engine.ErrContextFull)
	case width < c.dim:
		return fmt.Errorf("cpu: pool: %d values for a width of %d: %w", width, c.dim, engine.ErrBadInput)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= c.vocab {
			return fmt.Errorf("cpu: pool: token %d at %d outside [0, %d): %w", t, i, c.vocab, engine.ErrBadInput)
		}
	}
	return nil
}

// sibling returns an engine over e's weights, configuration and kernels
// with buffers of its own and a one-thread pool, for Pool.
func (e *Engine) sibling() (*Engine, error) {
	s := &Engine{
		cfg: e.cfg, w: e.w, info: e.info, log: e.log,
		ropes: e.ropes, mscale: e.mscale, scale: e.scale,
		set: e.set, plan: e.plan, scores: e.scores, values: e.values, glu: e.glu, expShift: e.expShift,
		tokenMACs: e.tokenMACs, seqs: map[engine.SeqID]*sequence{}, scratch: make([]workerScratch, 1),
	}
	s.at.e, s.qt.e, s.sp.e = s, s, s
	p, err := newPool(1, nil)
	if err != nil {
		return nil, err
	}
	s.pool = p
	return s, nil
}

// encode runs tokens through the model on s, a sibling engine, in passes
// of at most encodeRows positions, and writes their final hidden states
// pooled by how to dst. It stops between layers when ctx ends or done is
// closed.
func (s *Engine) encode(ctx context.Context, done <-chan struct{}, tokens []int32, how engine.Pooling, dst []float32) error {
	c := s.cfg
	dim := c.dim
	s.kv = newKVPool(c.layers, c.kvDim(), 4*int64(blocksFor(len(tokens)))*int64(c.layers*2*blockTokens*c.kvDim()), false, nil)
	defer func() { s.kv = nil }() // the sequence's KV goes with the call
	seq := &sequence{}
	sum := make([]float64, dim)
	h := make([]float32, dim)
	for start := 0; start < len(tokens); start += encodeRows {
		part := tokens[start:min(len(tokens), start+encodeRows)]
		T := len(part)
		s.ensure(T, 0)
		for len(seq.blocks) < blocksFor(seq.n+T) {
			seq.blocks = append(seq.blocks, s.kv.alloc())
		}
		for j, tok := range part {
			s.placeRow(j, seq, seq.n+j, tok)
		}
		for l := range s.w.layers {
			if err := stopped(ctx, done); err != nil {
				return err
			}
			s.layer(0, l, 0, T, 0)
		}
		seq.n += T
		for j := range T {
			if how == engine.PoolingLast && start+j < len(tokens)-1 {
				continue
			}
			rmsnorm(h, s.x[j*dim:(j+1)*dim], s.w.outNorm, c.eps)
			for k, v := range h {
				sum[k] += float64(v)
			}
		}
	}
	n := float64(len(tokens))
	if how != engine.PoolingMean {
		n = 1
	}
	for k := range dst {
		dst[k] = float32(sum[k] / n)
	}
	return nil
}

// stopped is the error that ends an embedding: ctx's, or errClosed once
// done is closed; nil while neither.
func stopped(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return errClosed
	case <-ctx.Done():
		return fmt.Errorf("cpu: pool cancelled: %w", ctx.Err())
	default:
		return nil
	}
}

var _ engine.Pooler = (*Engine)(nil)
