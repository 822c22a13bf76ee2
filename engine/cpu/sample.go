package cpu

import "github.com/tokenrouter/tokenrouter/engine"

// sample draws the next token from logits with the shared sampler
// (engine.Sampler: penalties, greedy or temperature / top-k / min-p /
// top-p with seeds), keeping its buffers in the engine between calls.
func (e *Engine) sample(logits []float32, sp engine.Sampling, pos int) int32 {
	s := engine.Sampler{Order: e.order, Probs: e.probs}
	tok := s.Sample(logits, &sp, pos)
	e.order, e.probs = s.Order, s.Probs
	return tok
}
