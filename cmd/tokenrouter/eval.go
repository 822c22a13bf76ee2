package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/bench/plot"
	"github.com/tokenrouter/tokenrouter/eval"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

// evalFlags are the eval command's flags.
type evalFlags struct {
	dataset, tokenizer, algorithm, sweep, scorer, format, plotDir string
	models, params                                                []string
	maxTokens, concurrency, threads                               int
	seed                                                          uint64
}

// evalLong is the eval command's help text.
const evalLong = `eval runs every prompt of a JSONL dataset ({"prompt": ..., "answer": ...} per line) through the
routed runtime on real models, once per value of one algorithm parameter, and reports quality,
throughput and the share of tokens the large model (the last --model) wrote. Points that no other
point beats on both quality and throughput are marked Pareto-optimal.

Scorers: agreement (default) — the share of the large model's own greedy output reproduced before the
first difference; exact — the output starts with the reference answer.

  tokenrouter eval --dataset data.jsonl --model slm=testdata/models/llama2xs-model.bin \
    --model llm=testdata/models/stories260K.gguf --tokenizer testdata/models/tok512.bin \
    --algorithm r-stitch --sweep tau=0.1,0.3,0.5,0.7,0.9 --max-tokens 32 --plot out/`

func newEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Sweep an algorithm parameter over a dataset: quality, throughput, large-model share, Pareto front",
		Long:  evalLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runEval(cmd, f) },
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
	name, vals, ok := strings.Cut(f.sweep, "=")
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
	s := eval.Study{Registry: builtin.Registry(), Algorithm: f.algorithm, Fixed: fixed, Param: name,
		Values: strings.Split(vals, ","), Scorer: f.scorer, Examples: ex,
		Options: eval.Options{MaxTokens: f.maxTokens, Concurrency: f.concurrency, Seed: f.seed}}
	for i, v := range f.models {
		spec := parseModelSpec(v)
		s.Models = append(s.Models, cpuModel(spec, i, f.tokenizer, f.threads))
	}
	pts, err := eval.Run(cmd.Context(), s)
	if err != nil {
		return err
	}
	if err := plotEval(cmd, f, name, pts); err != nil {
		return err
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

// plotEval writes the Pareto plot when --plot is given.
func plotEval(cmd *cobra.Command, f evalFlags, name string, pts []eval.Point) error {
	if f.plotDir == "" {
		return nil
	}
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
	return nil
}
