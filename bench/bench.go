// Package bench drives a serving system with a closed loop of concurrent
// requests and measures committed tokens per second: N clients each keep
// one request in flight and submit a new one the moment theirs finishes.
// After a warm-up, tokens are counted by arrival time over a measured
// window. Every serving system (the routed runtime and the baselines) is
// measured the same way through the System interface. Measure and Prepare
// build such runs from a command line's description (Spec); the lab that
// checks the throughput model against these measurements is package lab.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/system"
)

// System is a serving system bench drives (system.System: deployments,
// baselines, a server given by URL).
type System = system.System

// Options configure a closed-loop run.
type Options struct {
	// Concurrency is the number of requests kept in flight.
	Concurrency int
	// PromptLen is each generated prompt's length in tokens (default 16).
	PromptLen int
	// MaxTokens is each request's output length (default 4096: long
	// enough that replacement is rare in a short window).
	MaxTokens int
	// RangeRatio spreads the lengths: each request's output length (and a
	// generated prompt's length) is drawn uniformly from [L·(1−r), L·(1+r)]
	// around MaxTokens (PromptLen); 0 keeps them fixed.
	RangeRatio float64
	// Prompts, if set, are the prompts: each request draws one at random.
	// Otherwise prompts are random token ids.
	Prompts []Prompt
	// Vocab bounds generated prompts' token ids to [3, Vocab). 0 takes the
	// system's models' vocabulary (a System that is a Modeler), else 512.
	Vocab int
	// BOS starts every generated prompt when Vocab is given (-1: none);
	// with Vocab 0 it is the first model's BOS (1 when unknown).
	BOS int32
	// KeepEOS ends a request at its end-of-sequence token; by default
	// requests ignore it and produce their full length (a model with
	// random weights would stop anywhere).
	KeepEOS bool
	// Warmup runs before the measured window (default 2s).
	Warmup time.Duration
	// Duration is the measured window.
	Duration time.Duration
	// Seed seeds prompts and the algorithm's per-request decisions.
	Seed uint64
	// Progress, if set, is told how the run goes about once a second,
	// and once more when it ends.
	Progress func(Tick)
	// Label names the run in its Ticks.
	Label string
	// AfterRound, if set, is called by Compare after each round of a
	// concurrency n (round counts from 0); an error stops Compare. Run
	// ignores it.
	AfterRound func(ctx context.Context, n, round int) error
	// ClientProcs, if positive, is the processors (runtime.GOMAXPROCS)
	// Compare gives this process while it measures a server given by URL,
	// restoring the setting after each such slice; Run ignores it. Only
	// the clients run then, and they need a fraction of one core: with
	// more processors the runtime wakes more threads per streamed token,
	// and on a machine the clients share with the server each wake takes a
	// core from its step (the fast pair's clients at N = 8 kept 0.048
	// cores busy on two processors and 0.038 on one, and the server they
	// measured went from 6-7% to 3-4% below the same deployment in
	// process).
	ClientProcs int
}

// Tick is a closed-loop run's progress (Options.Progress).
type Tick struct {
	// Label is the run's Options.Label.
	Label string
	// Elapsed is the time since the run started, Total the run's
	// length (warm-up and measured window).
	Elapsed, Total time.Duration
	// Warmup is true before the measured window.
	Warmup bool
	// Tokens and Requests count the tokens committed and the requests
	// finished within the window so far.
	Tokens, Requests int64
	// TokensPerSecond is Tokens over the window's time so far.
	TokensPerSecond float64
}

// defaults fills the lengths' defaults.
func (o *Options) defaults() {
	if o.PromptLen <= 0 {
		o.PromptLen = 16
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 4096
	}
	if o.Vocab != 0 && o.Vocab <= 3 {
		o.Vocab, o.BOS = 512, 1
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
}

// Modeler is an optional System capability: its models' facts (the
// vocabulary and BOS of generated prompts).
type Modeler interface {
	// Models reports the models' facts, in index order.
	Models() []engine.Info
}

// PromptSubmitter is an optional System capability: it takes a prompt as
// text when the prompt has text (a server that tokenises it itself).
type PromptSubmitter interface {
	// SubmitPrompt admits a request.
	SubmitPrompt(ctx context.Context, prompt Prompt, p route.Params) (*stream.Stream, error)
}

// submit admits one request to sys.
func submit(ctx context.Context, sys System, p Prompt, params route.Params) (*stream.Stream, error) {
	if ps, ok := sys.(PromptSubmitter); ok {
		return ps.SubmitPrompt(ctx, p, params)
	}
	if len(p.IDs) == 0 {
		return nil, errors.New("the prompt has no token ids (prompts read without a tokenizer)")
	}
	return sys.Submit(ctx, p.IDs, params)
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
	// model other than model 0; for a system whose streams carry no
	// attribution (ServerShare), the server's own account over the requests
	// that finished.
	RoutedFraction float64
	// ServerShare says RoutedFraction is the server's account;
	// ShareUnknown that there was none (no request finished).
	ServerShare, ShareUnknown bool
	// shareOver weighs RoutedFraction when windows are added: their
	// tokens, 0 when the share is unknown.
	shareOver int
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
	routed := r.RoutedFraction*float64(r.shareOver) + o.RoutedFraction*float64(o.shareOver)
	r.shareOver += o.shareOver
	if r.shareOver > 0 {
		r.RoutedFraction = routed / float64(r.shareOver)
	}
	if r.Tokens > 0 {
		r.TokensPerSecond = float64(r.Tokens) / r.Seconds
	}
	r.ServerShare = r.ServerShare || o.ServerShare
	r.ShareUnknown = r.shareOver == 0 && (r.ShareUnknown || o.ShareUnknown)
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
	o.defaults()
	var models []engine.Info
	if m, ok := sys.(Modeler); ok {
		models = m.Models()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	t := &tally{start: start, from: start.Add(o.Warmup), to: start.Add(o.Warmup + o.Duration), errc: make(chan error, o.Concurrency)}
	var wg sync.WaitGroup
	for w := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.client(ctx, sys, o, w, models)
		}()
	}
	err := t.wait(ctx, o)
	cancel()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return Result{}, err
	}
	return t.result(sys, o), nil
}

// tally gathers a run's measurements from its clients.
type tally struct {
	start, from, to      time.Time // the run's start and measured window
	tokens, routed, done atomic.Int64
	mu                   sync.Mutex
	ttft, tpot           Samples
	errc                 chan error // the clients' failures
}

// client is one closed-loop client: it submits request after request until
// ctx ends or a request fails.
func (t *tally) client(ctx context.Context, sys System, o Options, w int, models []engine.Info) {
	wl := newWorkload(o, w, models)
	var c stream.Chunk
	for n := 0; ctx.Err() == nil; n++ {
		req := wl.next()
		if !t.request(ctx, sys, req, route.Params{MaxTokens: req.maxTokens, IgnoreEOS: !o.KeepEOS, Seed: o.Seed ^ uint64(w)<<32 ^ uint64(n)}, &c) {
			return
		}
	}
}

// request submits one request and measures its chunks until it is done;
// false when it failed (the failure is reported unless ctx ended).
func (t *tally) request(ctx context.Context, sys System, req request, p route.Params, c *stream.Chunk) bool {
	rc := reqClock{sent: time.Now()}
	s, err := submit(ctx, sys, req.prompt, p)
	if err != nil {
		if ctx.Err() == nil {
			t.errc <- fmt.Errorf("bench: submit: %w", err)
		}
		return false
	}
	defer t.keep(&rc)
	for {
		err := s.Recv(ctx, c)
		now := time.Now()
		if err != nil {
			s.Close()
			if ctx.Err() == nil {
				t.errc <- fmt.Errorf("bench: request %d: %w", s.ID, err)
			}
			return false
		}
		t.chunk(&rc, c, now)
		if c.Done {
			return true
		}
	}
}

// reqClock is one request's timing: when it was sent, when its last token
// arrived, and its latency samples in the measured window.
type reqClock struct {
	sent, last time.Time
	ttft, tpot Samples
}

// chunk counts a chunk that arrived at now, if within the measured window,
// and samples its latencies.
func (t *tally) chunk(rc *reqClock, c *stream.Chunk, now time.Time) {
	in := now.After(t.from) && now.Before(t.to)
	if in && len(c.Tokens) > 0 {
		if rc.last.IsZero() {
			rc.ttft = append(rc.ttft, now.Sub(rc.sent))
		} else {
			gap := now.Sub(rc.last) / time.Duration(len(c.Tokens))
			for range c.Tokens {
				rc.tpot = append(rc.tpot, gap)
			}
		}
	}
	if len(c.Tokens) > 0 {
		rc.last = now
	}
	if !in {
		return
	}
	t.tokens.Add(int64(len(c.Tokens)))
	r := 0
	for _, b := range c.By {
		if b != 0 {
			r++
		}
	}
	t.routed.Add(int64(r))
	if c.Done {
		t.done.Add(1)
	}
}

// keep adds a request's latency samples to the run's.
func (t *tally) keep(rc *reqClock) {
	t.mu.Lock()
	t.ttft, t.tpot = append(t.ttft, rc.ttft...), append(t.tpot, rc.tpot...)
	t.mu.Unlock()
}

// wait reports progress every second until the measured window ends (and
// once more then), ctx ends, or a client fails; it returns ctx's or the
// client's error.
func (t *tally) wait(ctx context.Context, o Options) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.NewTimer(time.Until(t.to))
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-t.errc:
			return err
		case <-end.C:
			t.report(o, t.to)
			return nil
		case now := <-tick.C:
			t.report(o, now)
		}
	}
}

// report tells o.Progress, if set, how the run stands at now.
func (t *tally) report(o Options, now time.Time) {
	if o.Progress == nil {
		return
	}
	k := Tick{Label: o.Label, Elapsed: now.Sub(t.start), Total: t.to.Sub(t.start), Warmup: !now.After(t.from)}
	if !k.Warmup {
		k.Tokens, k.Requests = t.tokens.Load(), t.done.Load()
		k.TokensPerSecond = float64(k.Tokens) / now.Sub(t.from).Seconds()
	}
	o.Progress(k)
}

// result is the run's Result from its tally.
func (t *tally) result(sys System, o Options) Result {
	r := Result{Tokens: int(t.tokens.Load()), Seconds: o.Duration.Seconds(), Requests: int(t.done.Load()), TTFT: t.ttft, TPOT: t.tpot}
	r.TokensPerSecond = float64(r.Tokens) / r.Seconds
	if r.Tokens > 0 {
		r.RoutedFraction = float64(t.routed.Load()) / float64(r.Tokens)
	}
	r.shareOver = r.Tokens
	if sh, ok := sys.(sharer); ok {
		var known bool
		r.RoutedFraction, known = sh.LargeShare()
		r.ServerShare, r.ShareUnknown = true, !known
		if !known {
			r.shareOver = 0
		}
	}
	return r
}
