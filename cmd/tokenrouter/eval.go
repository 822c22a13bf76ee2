package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/bench/plot"
	"github.com/tokenrouter/tokenrouter/eval"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/router"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// evalFlags are the eval command's flags.
type evalFlags struct {
	dataset, tokenizer, algorithm, sweep, scorer, format, plotDir string
	models, params                                                []string
	maxTokens, concurrency, threads                               int
	seed                                                          uint64
}

func newEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Sweep an algorithm parameter over a dataset: quality, throughput, large-model share, Pareto front",
		Long: `eval runs every prompt of a JSONL dataset ({"prompt": ..., "answer": ...} per line) through the
routed runtime on real models, once per value of one algorithm parameter, and reports quality,
throughput and the share of tokens the large model (the last --model) wrote. Points that no other
point beats on both quality and throughput are marked Pareto-optimal.

Scorers: agreement (default) — the share of the large model's own greedy output reproduced before the
first difference; exact — the output starts with the reference answer.

  tokenrouter eval --dataset data.jsonl --model slm=testdata/models/llama2xs-model.bin \
    --model llm=testdata/models/stories260K.gguf --tokenizer testdata/models/tok512.bin \
    --algorithm r-stitch --sweep tau=0.1,0.3,0.5,0.7,0.9 --max-tokens 32 --plot out/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runEval(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataset, "dataset", "", "JSONL dataset (required)")
	fl.StringArrayVar(&f.models, "model", nil, "NAME=PATH of a model, small first (repeat; at least 2)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "tokenizer file for every --model (needed for llama2.c checkpoints); default: a GGUF file's own")
	fl.StringVar(&f.algorithm, "algorithm", "r-stitch", "routing algorithm")
	fl.StringArrayVar(&f.params, "param", nil, "fixed algorithm parameter name=value (repeatable)")
	fl.StringVar(&f.sweep, "sweep", "tau=0.1,0.3,0.5,0.7,0.9", "NAME=V1,V2,... the parameter to sweep")
	fl.StringVar(&f.scorer, "scorer", "agreement", "agreement or exact")
	fl.IntVar(&f.maxTokens, "max-tokens", 32, "output tokens per prompt")
	fl.IntVar(&f.concurrency, "concurrency", 4, "prompts in flight")
	fl.IntVar(&f.threads, "threads", 0, "CPU engine threads per model (0: all cores)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for sampling and routing")
	fl.StringVar(&f.format, "format", "table", "output: table or json")
	fl.StringVar(&f.plotDir, "plot", "", "write pareto.png into this folder")
	return cmd
}

func runEval(cmd *cobra.Command, f evalFlags) error {
	if f.dataset == "" {
		return fmt.Errorf("eval: --dataset is required")
	}
	if len(f.models) < 2 {
		return fmt.Errorf("eval: give at least two --model flags (small first)")
	}
	name, vals, ok := strings.Cut(f.sweep, "=")
	values := strings.Split(vals, ",")
	if !ok || name == "" || vals == "" {
		return fmt.Errorf("eval: --sweep %q: want NAME=V1,V2,...", f.sweep)
	}
	fixed, err := parseParams(f.params)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	ex, err := eval.Load(f.dataset)
	if err != nil {
		return err
	}
	var specs []modelSpec
	for _, m := range f.models {
		specs = append(specs, parseModelSpec(m))
	}
	// open builds a fresh router over fresh engines.
	var tok *tokenizer.Tokenizer
	open := func(alg string, params map[string]string) (*router.Router, error) {
		var ms []router.Model
		for i, s := range specs {
			eng, t, err := openModel(cmd.Context(), s.name, s.path, f.tokenizer, f.threads)
			if err != nil {
				for _, m := range ms {
					m.Engine.Close()
				}
				return nil, fmt.Errorf("eval: model %s: %w", s.path, err)
			}
			if tok == nil {
				tok = t
			} else if err := sameVocabulary(tok, t); err != nil {
				eng.Close()
				for _, m := range ms {
					m.Engine.Close()
				}
				return nil, fmt.Errorf("eval: models cannot share steps: %w", err)
			}
			n := s.name
			if n == "" {
				n = fmt.Sprintf("m%d", i)
			}
			ms = append(ms, router.Model{Name: n, Engine: eng, Policy: sched.Policy{B: sched.Static(1)}})
		}
		return router.New(router.Config{Models: ms, Algorithm: alg, Params: params, Registry: builtin.Registry()})
	}
	// The large model alone gives the agreement reference (and the tokenizer).
	ref, err := open("single", map[string]string{"model": strconv.Itoa(len(specs) - 1)})
	if err != nil {
		return err
	}
	prompts := make([][]int32, len(ex))
	for i, e := range ex {
		p := tok.Encode(e.Prompt, false)
		if tok.BOS >= 0 {
			p = append([]int32{tok.BOS}, p...)
		}
		prompts[i] = p
	}
	refs := make([][]int32, len(ex))
	for i, p := range prompts {
		s, err := ref.Submit(cmd.Context(), p, route.Params{MaxTokens: f.maxTokens, Seed: f.seed})
		if err != nil {
			ref.Close()
			return fmt.Errorf("eval: reference: %w", err)
		}
		r, err := s.Wait(cmd.Context())
		if err != nil {
			ref.Close()
			return fmt.Errorf("eval: reference: %w", err)
		}
		refs[i] = r.Tokens
	}
	if err := ref.Close(); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	var score eval.Scorer
	switch f.scorer {
	case "agreement":
		score = eval.Agreement(refs)
	case "exact":
		score = eval.Exact(ex, func(ids []int32) string {
			var b []byte
			for _, id := range ids {
				b = tok.AppendPiece(b, id)
			}
			return string(b)
		})
	default:
		return fmt.Errorf("eval: --scorer %q: want agreement or exact", f.scorer)
	}
	pts, err := eval.Sweep(cmd.Context(), values, func(v string) (bench.System, error) {
		params := map[string]string{name: v}
		for k, x := range fixed {
			params[k] = x
		}
		return open(f.algorithm, params)
	}, prompts, score, eval.Options{MaxTokens: f.maxTokens, Concurrency: f.concurrency, Seed: f.seed})
	if err != nil {
		return err
	}
	if f.plotDir != "" {
		var pp []plot.Point
		for _, p := range pts {
			series := "dominated"
			if p.Pareto {
				series = "Pareto-optimal"
			}
			pp = append(pp, plot.Point{Series: series, X: p.TokensPerSecond, Y: p.Quality, Label: name + "=" + p.Value})
		}
		path := filepath.Join(f.plotDir, "pareto.png")
		if err := plot.Scatter(path, fmt.Sprintf("%s: quality vs throughput over %s (%s)", f.algorithm, name, f.scorer),
			"throughput (tokens/s)", "quality ("+f.scorer+")", pp, false); err != nil {
			return err
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "wrote", path)
	}
	out := cmd.OutOrStdout()
	if f.format == "json" {
		return json.NewEncoder(out).Encode(pts)
	}
	fmt.Fprintf(out, "%-12s %8s %10s %12s %7s %s\n", name, "quality", "tok/s", "large share", "tokens", "pareto")
	for _, p := range pts {
		mark := ""
		if p.Pareto {
			mark = "*"
		}
		fmt.Fprintf(out, "%-12s %8.3f %10.1f %12.3f %7d %s\n", p.Value, p.Quality, p.TokensPerSecond, p.LargeShare, p.Tokens, mark)
	}
	return nil
}
