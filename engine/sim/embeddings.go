package sim

import (
	"context"
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
)

// emptyHash is the prefix hash before the first token.
const emptyHash = 0x5eed

// extend returns the prefix hash of a prefix whose hash is prev followed by
// token t.
func extend(prev uint64, t int32) uint64 {
	return mix(prev ^ mix(uint64(uint32(t))+0x9e3779b97f4a7c15))
}

// hiddenOf writes the synthetic hidden state of the position whose prefix
// hash is h: values in [-1, 1), a function of the prefix only.
func hiddenOf(h uint64, dst []float32) {
	for k := range dst {
		dst[k] = float32(unit(mix(h^uint64(k)*0xff51afd7ed558ccd)))*2 - 1
	}
}

// Pooling reports mean pooling (engine.Pooler).
func (e *Engine) Pooling() engine.Pooling { return engine.PoolingMean }

// Pool writes the mean of the hidden states Step would give at each
// position of tokens, a sequence of its own (engine.Pooler). It reads only
// the engine's configuration, so it is safe beside Step, and it returns at
// once: a simulated embedding has no step time.
func (e *Engine) Pool(ctx context.Context, tokens []int32, dst []float32) error {
	d := e.cfg.HiddenSize
	switch {
	case len(tokens) == 0:
		return fmt.Errorf("sim: pool: no tokens: %w", engine.ErrBadInput)
	case len(tokens) > e.cfg.ContextLength:
		return fmt.Errorf("sim: pool: %d tokens: %w (limit %d)", len(tokens), engine.ErrContextFull, e.cfg.ContextLength)
	case len(dst) < d:
		return fmt.Errorf("sim: pool: %d values for a width of %d: %w", len(dst), d, engine.ErrBadInput)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= e.cfg.VocabSize {
			return fmt.Errorf("sim: pool: token %d at %d outside [0, %d): %w", t, i, e.cfg.VocabSize, engine.ErrBadInput)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim: pool: %w", err)
	}
	sum := make([]float64, d)
	h := make([]float32, d)
	prev := uint64(emptyHash)
	for _, t := range tokens {
		prev = extend(prev, t)
		hiddenOf(prev, h)
		for k, v := range h {
			sum[k] += float64(v)
		}
	}
	for k := range sum {
		dst[k] = float32(sum[k] / float64(len(tokens)))
	}
	return nil
}

var _ engine.Pooler = (*Engine)(nil)
