// Package bench drives a serving system with a closed loop of concurrent
// requests and measures committed tokens per second: N clients each keep
// one request in flight and submit a new one the moment theirs finishes.
// After a warm-up, tokens are counted by arrival time over a measured
// window. Every serving system (the routed runtime and the baselines) is
// measured the same way through the System interface.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// System is anything that serves requests as streams.
type System interface {
	// Submit admits a request.
	Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error)
	// Close stops the system.
	Close() error
}

// Options configure a closed-loop run.
type Options struct {
	// Concurrency is the number of requests kept in flight.
	Concurrency int
	// PromptLen is each prompt's length in tokens (default 16).
	PromptLen int
	// MaxTokens is each request's output length (default 4096: long
	// enough that replacement is rare in a short window).
	MaxTokens int
	// Vocab bounds the random prompt token ids (default 512).
	Vocab int
	// Warmup runs before the measured window (default 2s).
	Warmup time.Duration
	// Duration is the measured window.
	Duration time.Duration
	// Seed seeds prompts and the algorithm's per-request decisions.
	Seed uint64
	// Progress, if set, receives a line per second.
	Progress io.Writer
	// Label names the run in progress lines.
	Label string
}

// Result is what a run measured.
type Result struct {
	// Tokens committed inside the window.
	Tokens int
	// Seconds is the window's length as measured.
	Seconds float64
	// TokensPerSecond is Tokens / Seconds.
	TokensPerSecond float64
	// RoutedFraction is the share of the window's tokens produced by a
	// model other than model 0.
	RoutedFraction float64
	// Requests counts requests completed inside the window.
	Requests int
	// TTFT holds time-to-first-token samples of requests whose first token
	// arrived inside the window.
	TTFT Samples
	// TPOT holds time-per-output-token samples: each chunk received inside
	// the window after a request's first contributes its gap divided by
	// its token count, once per token.
	TPOT Samples
}

// Add merges another window's measurements into r.
func (r *Result) Add(o Result) {
	r.Tokens += o.Tokens
	r.Seconds += o.Seconds
	r.Requests += o.Requests
	routed := r.RoutedFraction*float64(r.Tokens-o.Tokens) + o.RoutedFraction*float64(o.Tokens)
	if r.Tokens > 0 {
		r.RoutedFraction = routed / float64(r.Tokens)
		r.TokensPerSecond = float64(r.Tokens) / r.Seconds
	}
	r.TTFT = append(r.TTFT, o.TTFT...)
	r.TPOT = append(r.TPOT, o.TPOT...)
}

// Samples are latencies.
type Samples []time.Duration

// Quantile returns the q-quantile (0..1) by nearest rank, 0 when empty.
func (s Samples) Quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}

// Run measures sys under a closed loop.
func Run(ctx context.Context, sys System, o Options) (Result, error) {
	if o.Concurrency <= 0 || o.Duration <= 0 {
		return Result{}, errors.New("bench: concurrency and duration must be positive")
	}
	if o.PromptLen <= 0 {
		o.PromptLen = 16
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 4096
	}
	if o.Vocab <= 3 {
		o.Vocab = 512
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	from, to := start.Add(o.Warmup), start.Add(o.Warmup+o.Duration)
	var tokens, routed, done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ttft, tpot Samples
	errc := make(chan error, o.Concurrency)
	for w := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(o.Seed, uint64(w)))
			var c stream.Chunk
			prompt := make([]int32, o.PromptLen)
			for n := 0; ctx.Err() == nil; n++ {
				prompt[0] = 1
				for i := 1; i < len(prompt); i++ {
					prompt[i] = int32(3 + rng.IntN(o.Vocab-3))
				}
				sent := time.Now()
				last := time.Time{}
				var myTTFT, myTPOT Samples
				s, err := sys.Submit(ctx, prompt, route.Params{MaxTokens: o.MaxTokens, IgnoreEOS: true, Seed: o.Seed ^ uint64(w)<<32 ^ uint64(n)})
				if err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("bench: submit: %w", err)
					}
					return
				}
				for {
					err := s.Recv(ctx, &c)
					now := time.Now()
					if err != nil {
						s.Close()
						mu.Lock()
						ttft, tpot = append(ttft, myTTFT...), append(tpot, myTPOT...)
						mu.Unlock()
						if ctx.Err() == nil {
							errc <- fmt.Errorf("bench: request %d: %w", s.ID, err)
						}
						return
					}
					if now.After(from) && now.Before(to) && len(c.Tokens) > 0 {
						if last.IsZero() {
							myTTFT = append(myTTFT, now.Sub(sent))
						} else {
							gap := now.Sub(last) / time.Duration(len(c.Tokens))
							for range c.Tokens {
								myTPOT = append(myTPOT, gap)
							}
						}
					}
					if len(c.Tokens) > 0 {
						last = now
					}
					if now.After(from) && now.Before(to) {
						tokens.Add(int64(len(c.Tokens)))
						r := 0
						for _, b := range c.By {
							if b != 0 {
								r++
							}
						}
						routed.Add(int64(r))
						if c.Done {
							done.Add(1)
						}
					}
					if c.Done {
						break
					}
				}
				mu.Lock()
				ttft, tpot = append(ttft, myTTFT...), append(tpot, myTPOT...)
				mu.Unlock()
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.NewTimer(time.Until(to))
	defer end.Stop()
	var err error
wait:
	for {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case err = <-errc:
			break wait
		case <-end.C:
			break wait
		case now := <-tick.C:
			if o.Progress != nil {
				phase := "warm-up"
				if now.After(from) {
					phase = fmt.Sprintf("%.0f tok/s", float64(tokens.Load())/now.Sub(from).Seconds())
				}
				fmt.Fprintf(o.Progress, "%s: %4.0fs/%.0fs %s\n", o.Label, now.Sub(start).Seconds(), (o.Warmup + o.Duration).Seconds(), phase)
			}
		}
	}
	cancel()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return Result{}, err
	}
	r := Result{Tokens: int(tokens.Load()), Seconds: o.Duration.Seconds(), Requests: int(done.Load()), TTFT: ttft, TPOT: tpot}
	r.TokensPerSecond = float64(r.Tokens) / r.Seconds
	if r.Tokens > 0 {
		r.RoutedFraction = float64(routed.Load()) / float64(r.Tokens)
	}
	return r, nil
}
