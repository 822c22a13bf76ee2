// Package eval measures the quality/throughput trade-off of a routing
// algorithm: it runs a dataset of prompts through a serving system for
// each value of one algorithm parameter (a router threshold, an entropy
// bound, a routing probability) and reports quality, throughput and the
// share of tokens the large model wrote, with the Pareto-optimal points
// marked. Quality is measured, not assumed: the large model reads every
// response teacher-forced (Judge) and gives its agreement (the share of
// positions where the response has the large model's own greedy token)
// and its mean log-likelihood per token. A Curve runs several algorithms'
// sweeps on the same prompts and reads each one's quality–share Pareto
// front at chosen shares (At).
package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// Example is one dataset line: {"prompt": "...", "answer": "..."}.
type Example struct {
	// Prompt is the text sent to the model.
	Prompt string `json:"prompt"`
	// Answer is the reference answer (used by the exact scorer).
	Answer string `json:"answer"`
}

// maxLine bounds one JSONL line.
const maxLine = 1 << 20

// Load reads a JSONL dataset.
func Load(path string) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	var out []Example
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e Example
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("eval: %s line %d: %w", path, n, err)
		}
		if e.Prompt == "" {
			return nil, fmt.Errorf("eval: %s line %d: empty prompt", path, n)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("eval: %s: no examples", path)
	}
	return out, nil
}

// Scorer scores one output against example i: 1 is perfect.
type Scorer func(i int, output []int32) float64

// Exact scores 1 when the decoded output, trimmed, starts with the
// example's trimmed answer.
func Exact(ex []Example, decode func([]int32) string) Scorer {
	return func(i int, out []int32) float64 {
		if strings.HasPrefix(strings.TrimSpace(decode(out)), strings.TrimSpace(ex[i].Answer)) {
			return 1
		}
		return 0
	}
}

// Prefix scores the share of reference tokens reproduced before the
// first difference: ref[i] is the large model's own greedy output, so 1
// means the routed system wrote exactly what the large model would have.
func Prefix(ref [][]int32) Scorer {
	return func(i int, out []int32) float64 {
		r := ref[i]
		if len(r) == 0 {
			return 1
		}
		n := 0
		for n < len(r) && n < len(out) && out[n] == r[n] {
			n++
		}
		return float64(n) / float64(len(r))
	}
}

// Point is one parameter value's result.
type Point struct {
	// Value is the swept parameter's value.
	Value string `json:"value"`
	// Quality is the mean score over the dataset (the scorer's; with the
	// agreement scorer it is Agreement).
	Quality float64 `json:"quality"`
	// Measures are the large model's teacher-forced agreement and
	// log-likelihood of the outputs (zero, Responses 0, without a judge).
	Measures
	// TokensPerSecond is committed tokens over the wall time of the run.
	TokensPerSecond float64 `json:"tokens_per_second"`
	// LargeShare is the share of tokens written by a model other than 0.
	LargeShare float64 `json:"large_model_share"`
	// Tokens is the number of committed tokens.
	Tokens int `json:"tokens"`
	// Pareto marks points no other point beats on both quality and
	// throughput.
	Pareto bool `json:"pareto"`
	// PerPrompt are the counts and scores of each prompt's response, in
	// prompt order, for resampling (Bootstrap).
	PerPrompt []PromptStat `json:"per_prompt,omitempty"`
}

// PromptStat is one response's part of a point.
type PromptStat struct {
	// Tokens is the response's length, Large how many of its tokens the
	// large model wrote.
	Tokens int `json:"tokens"`
	Large  int `json:"large"`
	// Score is the judge's score of the response (zero without a judge).
	Score
}

// Options configure a sweep.
type Options struct {
	// MaxTokens per request.
	MaxTokens int
	// Concurrency is how many requests run at once.
	Concurrency int
	// Seed seeds the requests: prompt i is sent with seed Seed+i, so that
	// the routing draws of random algorithms (r2r-random's per-position
	// coin, query-level's per-request one) differ from prompt to prompt
	// yet repeat from run to run. 0 leaves the draws to the request ids.
	Seed uint64
	// Judge, if set, scores every value's outputs after its system has
	// closed (outside the timed run); Point.Measures summarise the scores.
	Judge func(ctx context.Context, prompts, outputs [][]int32) ([]Score, error)
}

// seed is prompt i's request seed.
func (o Options) seed(i int) uint64 {
	if o.Seed == 0 {
		return 0
	}
	return o.Seed + uint64(i)
}

// Sweep runs the prompts once per value on a system built for that value.
// With a nil score, Quality is the judge's Agreement.
func Sweep(ctx context.Context, values []string, build func(v string) (bench.System, error), prompts [][]int32,
	score Scorer, o Options) ([]Point, error) {
	if len(values) == 0 || len(prompts) == 0 {
		return nil, errors.New("eval: nothing to sweep")
	}
	o.Concurrency = max(o.Concurrency, 1)
	var pts []Point
	for _, v := range values {
		sys, err := build(v)
		if err != nil {
			return nil, fmt.Errorf("eval: value %s: %w", v, err)
		}
		p, outs, err := run(ctx, sys, prompts, score, o)
		cerr := sys.Close()
		if err != nil {
			return nil, fmt.Errorf("eval: value %s: %w", v, err)
		}
		if cerr != nil {
			return nil, fmt.Errorf("eval: value %s: %w", v, cerr)
		}
		if o.Judge != nil {
			sc, err := o.Judge(ctx, prompts, outs)
			if err != nil {
				return nil, fmt.Errorf("eval: value %s: %w", v, err)
			}
			p.Measures = Summarize(sc)
			for i := range sc {
				p.PerPrompt[i].Score = sc[i]
			}
			if score == nil {
				p.Quality = p.Agreement
			}
		}
		p.Value = v
		pts = append(pts, p)
	}
	MarkPareto(pts)
	return pts, nil
}

// run runs the prompts on sys and returns the point (without its value)
// and the outputs.
func run(ctx context.Context, sys bench.System, prompts [][]int32, score Scorer, o Options) (Point, [][]int32, error) {
	results := make([]stream.Result, len(prompts))
	errs := make([]error, len(prompts))
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range prompts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return Point{}, nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := sys.Submit(ctx, p, route.Params{MaxTokens: o.MaxTokens, Seed: o.seed(i)})
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = s.Wait(ctx)
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return Point{}, nil, err
	}
	var pt Point
	large, q := 0, 0.0
	outs := make([][]int32, len(results))
	pt.PerPrompt = make([]PromptStat, len(results))
	for i, r := range results {
		outs[i] = r.Tokens
		pt.Tokens += len(r.Tokens)
		pt.PerPrompt[i].Tokens = len(r.Tokens)
		for _, b := range r.By {
			if b != 0 {
				large++
				pt.PerPrompt[i].Large++
			}
		}
		if score != nil {
			q += score(i, r.Tokens)
		}
	}
	pt.Quality = q / float64(len(results))
	pt.TokensPerSecond = float64(pt.Tokens) / el.Seconds()
	if pt.Tokens > 0 {
		pt.LargeShare = float64(large) / float64(pt.Tokens)
	}
	return pt, outs, nil
}

// MarkPareto sets Pareto on the points no other point dominates (at least
// as good on quality and throughput, better on one).
func MarkPareto(pts []Point) {
	for i := range pts {
		pts[i].Pareto = true
		for j := range pts {
			a, b := pts[j], pts[i]
			if a.Quality >= b.Quality && a.TokensPerSecond >= b.TokensPerSecond &&
				(a.Quality > b.Quality || a.TokensPerSecond > b.TokensPerSecond) {
				pts[i].Pareto = false
				break
			}
		}
	}
}
