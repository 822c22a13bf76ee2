package routetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// SpecOptions size a Speculation check.
type SpecOptions struct {
	Options
	// Seeds is the number of random rounds.
	Seeds int
	// Sampled makes every other round sample (temperature, seeded) instead
	// of decoding greedily.
	Sampled bool
}

// Speculation checks speculative continuation (route.Speculable) for an
// algorithm that opted in, over o.Seeds random rounds: each serves the
// prompts with speculation off, then again with it on (a random depth
// bound, some requests overriding it by route.Params.Speculate, some
// ignoring end of sequence, some cancelled after a random number of
// tokens). Every request's committed output with speculation must equal the
// one without, token for token and model for model (a cancelled one: a
// prefix of it), nothing may stay held afterwards, and over the rounds
// tokens must have been speculated, kept and rolled back.
func Speculation(t *testing.T, reg *route.Registry, c Case, mk Engines, o SpecOptions) {
	t.Helper()
	var total subserver.Stats
	cancelled := 0
	for seed := range o.Seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 19))
		ps := make([]route.Params, len(o.Prompts))
		for i := range ps {
			ps[i] = route.Params{MaxTokens: o.MaxTokens, IgnoreEOS: rng.IntN(3) > 0, Seed: rng.Uint64()>>1 + 1}
			if o.Sampled && seed%2 == 1 {
				ps[i].Sampling = engine.Sampling{Temperature: 0.9, TopK: 40, Seed: rng.Uint64()}
			}
			ps[i].Sampling.Logprobs = rng.IntN(3) == 0
		}
		want := serveAll(t, reg, c, mk(t, 2), o.Options, subserver.Speculation{Mode: subserver.SpeculateOff}, ps, nil)
		cancelAt := make([]int, len(ps))
		for i := range ps {
			ps[i].Speculate = []int{-1, 0, 0, 0, 1, 2, 5}[rng.IntN(7)]
			cancelAt[i] = -1
			if rng.IntN(4) == 0 {
				cancelAt[i] = rng.IntN(o.MaxTokens)
			}
		}
		sp := subserver.Speculation{Mode: subserver.SpeculateOn, Depth: 1 + rng.IntN(8)}
		var st subserver.Stats
		got := serveAll(t, reg, c, mk(t, 2), o.Options, sp, ps, func(r *deploy.Deployment) {
			for _, s := range r.SubServers() {
				x := s.Stats()
				st.Speculated, st.Kept, st.RolledBack = st.Speculated+x.Speculated, st.Kept+x.Kept, st.RolledBack+x.RolledBack
			}
		}, cancelAt...)
		for i := range ps {
			g, w := got[i], want[i]
			if g.Reason == stream.Cancelled {
				cancelled++
			}
			if cancelAt[i] >= 0 {
				n := min(len(g.Tokens), len(w.Tokens))
				g.Tokens, g.By, w.Tokens, w.By = g.Tokens[:n], g.By[:n], w.Tokens[:n], w.By[:n]
			}
			if !slices.Equal(g.Tokens, w.Tokens) || !slices.Equal(g.By, w.By) || !sameLogprobs(g.lps[:min(len(g.lps), len(w.lps))], w.lps[:min(len(g.lps), len(w.lps))]) {
				t.Fatalf("seed %d, request %d (depth %d, override %d, cancel at %d):\nwith speculation    %v %v %v\nwithout speculation %v %v %v",
					seed, i, sp.Depth, ps[i].Speculate, cancelAt[i], g.Tokens, g.By, g.lps, w.Tokens, w.By, w.lps)
			}
		}
		total.Speculated, total.Kept, total.RolledBack = total.Speculated+st.Speculated, total.Kept+st.Kept, total.RolledBack+st.RolledBack
	}
	t.Logf("%s: %d rounds; tokens speculated %d, kept %d, rolled back %d; %d requests cancelled before their end",
		c.Algorithm, o.Seeds, total.Speculated, total.Kept, total.RolledBack, cancelled)
	if total.Speculated == 0 || total.Kept == 0 || total.RolledBack == 0 || cancelled == 0 {
		t.Errorf("%s: speculation or cancellation did not happen in every way: %+v, %d cancelled", c.Algorithm, total, cancelled)
	}
}

// output is one request's output: committed tokens, their producers and
// log-probabilities (when asked for).
type output struct {
	stream.Result
	lps []engine.Logprob
}

// sameLogprobs reports whether a and b give the same tokens the same
// log-probabilities (NaN, for a token placed without one, equals NaN).
func sameLogprobs(a, b []engine.Logprob) bool {
	return slices.EqualFunc(a, b, func(x, y engine.Logprob) bool {
		return x.Pos == y.Pos && x.Token == y.Token && (x.Logprob == y.Logprob || x.Logprob != x.Logprob && y.Logprob != y.Logprob)
	})
}

// serveAll serves every prompt concurrently with parameters ps and returns
// the outputs; request i is cancelled once it has cancelAt[i] >= 0 tokens
// (when cancelAt is given). after, if set, sees the deployment once every
// request ended; then nothing may be held.
func serveAll(t *testing.T, reg *route.Registry, c Case, es []engine.Engine, o Options, sp subserver.Speculation,
	ps []route.Params, after func(*deploy.Deployment), cancelAt ...int) []output {
	t.Helper()
	cfg := deploy.Config{Models: models(es), Algorithm: c.Algorithm, Params: c.Params, Registry: reg, Speculate: sp}
	if o.Bus != nil {
		cfg.Bus = o.Bus(t)
	}
	r, err := deploy.New(cfg)
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	res := make([]output, len(o.Prompts))
	errs := make([]error, len(o.Prompts))
	var wg sync.WaitGroup
	for i, p := range o.Prompts {
		s, err := r.Submit(ctx, p, ps[i])
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		at := -1
		if i < len(cancelAt) {
			at = cancelAt[i]
		}
		wg.Go(func() { res[i], errs[i] = collect(ctx, s, at) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v (a deadlock if the deadline passed)", i, err)
		}
	}
	WaitIdle(t, r)
	if after != nil {
		after(r)
	}
	return res
}

// collect receives s's output; with at >= 0 it closes the stream (cancels
// the request) once at tokens have arrived.
func collect(ctx context.Context, s *stream.Stream, at int) (output, error) {
	var out output
	var ch stream.Chunk
	for {
		if at >= 0 && len(out.Tokens) >= at {
			s.Close()
			at = -1
		}
		err := s.Recv(ctx, &ch)
		if err != nil && !errors.Is(err, stream.ErrCancelled) {
			return out, fmt.Errorf("recv: %w", err)
		}
		out.Tokens, out.By = append(out.Tokens, ch.Tokens...), append(out.By, ch.By...)
		out.lps = append(out.lps, ch.Logprobs...)
		if ch.Done {
			out.Reason = ch.Reason
			return out, nil
		}
	}
}

// models names engines m0, m1, ...
func models(es []engine.Engine) []deploy.Model {
	ms := make([]deploy.Model, len(es))
	for i, e := range es {
		ms[i] = deploy.Model{Name: fmt.Sprintf("m%d", i), Engine: e}
	}
	return ms
}
