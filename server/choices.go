package server

import (
	"context"
	"errors"
	"sync"
)

// Several choices (n > 1): each choice is its own request through the
// runtime, routed on its own, with its own seeds; their output is merged
// into one response.

// choices returns g's n requests: g itself first, then copies whose
// sampling and routing seeds are offset by the choice's index, so the
// choices differ and a seeded request stays reproducible.
func (g *genRequest) choices() []*genRequest {
	out := make([]*genRequest, g.n)
	out[0] = g
	for i := 1; i < g.n; i++ {
		c := *g
		c.n = 1
		c.params.Seed += uint64(i)
		c.params.Sampling.Seed += uint64(i)
		out[i] = &c
	}
	return out
}

// generateN runs g's choices at once and calls emit with each choice's
// deltas, one call at a time. It returns the results in choice order, or
// the first error (which cancels the other choices).
func (s *Server) generateN(ctx context.Context, g *genRequest, emit func(i int, d delta) error) ([]*genResult, error) {
	if g.n <= 1 {
		res, err := s.generate(ctx, g, func(d delta) error { return emit(0, d) })
		return []*genResult{res}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		res  = make([]*genResult, g.n)
		errs = make([]error, g.n)
	)
	for i, c := range g.choices() {
		wg.Go(func() {
			res[i], errs[i] = s.generate(ctx, c, func(d delta) error {
				mu.Lock()
				defer mu.Unlock()
				return emit(i, d)
			})
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return res, firstCause(errs)
}

// firstCause returns the first error of errs that is not a cancellation
// (the others were cancelled because of it), else the first error.
func firstCause(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}
