package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/bench/plot"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/eval"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

// evalFlags are the eval command's flags.
type evalFlags struct {
	dataset, tokenizer, algorithm, sweep, scorer, format string
	plotDir, shares, reference                           string
	models, params, arms, from                           []string
	maxTokens, concurrency, threads, bootstrap           int
	seed                                                 uint64
}

// evalLong is the eval command's help text.
const evalLong = `eval runs every prompt of a JSONL dataset ({"prompt": ..., "answer": ...} per line) through the
routed runtime on real models, once per value of one algorithm parameter, and reports quality,
throughput and the share of tokens the large model (the last --model) wrote. Points that no other
point beats on both quality and throughput are marked Pareto-optimal.

Quality is measured by the large model itself, teacher-forced over each prompt and response:
agreement is the share of response positions holding the large model's greedy token after the same
prefix, and log-lik its mean log-probability per response token (nats). Scorers for the quality
column: agreement (default), prefix — the share of the large model's own greedy output reproduced
before the first difference; exact — the output starts with the reference answer.

  tokenrouter eval --dataset data.jsonl --model slm=models/tiny/stories260K.gguf \
    --model llm=models/tiny/llama2xs-model.bin --tokenizer models/tiny/tok512.bin \
    --algorithm r-stitch --sweep tau=0.1,0.3,0.5,0.7,0.9 --max-tokens 32 --plot out/

Curve mode (--arm, repeatable) runs several algorithms' sweeps on the same prompts and draws each
one's quality–share curve (its Pareto front: the best quality at a large-model share no higher),
then reads every curve at --shares. An arm is "[LABEL=]ALGORITHM PARAM=V1,V2,... [NAME=VALUE ...]":

  tokenrouter eval --dataset testdata/eval/heldout.jsonl --model slm=... --model llm=... \
    --arm 'r2r threshold=0.9,0.7,0.5,0.3,0.1 weights=r2r.safetensors' \
    --arm 'r-stitch tau=0,0.1,0.2,0.3,0.5,1' --arm 'r2r-random p=0,0.1,0.3,0.5,1' \
    --arm 'query-level strong=0,0.25,0.5,0.75,1' --shares 10%,20%,30%,40%,50% --plot out/`

func newEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Sweep algorithm parameters over a dataset: quality, throughput, large-model share, Pareto fronts",
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
	fl.StringVar(&f.scorer, "scorer", "agreement", "quality column: agreement, prefix or exact")
	fl.StringArrayVar(&f.arms, "arm", nil, "curve mode: '[LABEL=]ALGORITHM PARAM=V1,V2,... [NAME=VALUE ...]' (repeat)")
	fl.StringArrayVar(&f.from, "from", nil, "curve mode without running: read the series of saved --format json reports of the same prompts (repeat)")
	fl.StringVar(&f.shares, "shares", "10%,20%,30%,40%,50%", "curve mode: large-model shares to read the curves at")
	fl.IntVar(&f.bootstrap, "bootstrap", 1000, "curve mode: resamples of the prompts for intervals and comparisons (0: none)")
	fl.StringVar(&f.reference, "reference", "", "curve mode: the arm the others are compared with (default: the first)")
	fl.IntVar(&f.maxTokens, "max-tokens", 32, "output tokens per prompt")
	fl.IntVar(&f.concurrency, "concurrency", 4, "prompts in flight")
	fl.IntVar(&f.threads, "threads", 0, "CPU engine threads per model (0: all cores)")
	fl.Uint64Var(&f.seed, "seed", 1, "request seed: prompt i (from 0) is sent with seed+i, for sampling and routing draws; 0: draws by request id")
	fl.StringVar(&f.format, "format", "table", "output: table (curve mode: Markdown) or json")
	fl.StringVar(&f.plotDir, "plot", "", "write pareto.png (curve mode: quality-share.png) into this folder")
	return cmd
}

// evalSetup reads the dataset and describes the models.
func evalSetup(f evalFlags) ([]eval.Example, []config.Model, eval.Options, error) {
	if f.dataset == "" {
		return nil, nil, eval.Options{}, fmt.Errorf("eval: --dataset is required")
	}
	if f.format != "table" && f.format != "json" {
		return nil, nil, eval.Options{}, fmt.Errorf("eval: --format %q: want table or json", f.format)
	}
	ex, err := eval.Load(f.dataset)
	if err != nil {
		return nil, nil, eval.Options{}, err
	}
	var models []config.Model
	for i, v := range f.models {
		models = append(models, cpuModel(parseModelSpec(v), i, f.tokenizer, f.threads))
	}
	return ex, models, eval.Options{MaxTokens: f.maxTokens, Concurrency: f.concurrency, Seed: f.seed}, nil
}

func runEval(cmd *cobra.Command, f evalFlags) error {
	if len(f.arms) > 0 || len(f.from) > 0 {
		return runEvalCurve(cmd, f)
	}
	name, vals, ok := strings.Cut(f.sweep, "=")
	if !ok || name == "" || vals == "" {
		return fmt.Errorf("eval: --sweep %q: want NAME=V1,V2,...", f.sweep)
	}
	fixed, err := parseParams(f.params)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	ex, models, o, err := evalSetup(f)
	if err != nil {
		return err
	}
	s := eval.Study{Models: models, Registry: builtin.Registry(), Algorithm: f.algorithm, Fixed: fixed, Param: name,
		Values: strings.Split(vals, ","), Scorer: f.scorer, Examples: ex, Options: o}
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
	fmt.Fprintf(out, "%-12s %8s %9s %8s %10s %12s %7s %s\n", name, "quality", "agreement", "log-lik", "tok/s", "large share", "tokens", "pareto")
	for _, p := range pts {
		mark := ""
		if p.Pareto {
			mark = "*"
		}
		fmt.Fprintf(out, "%-12s %8.3f %9.3f %8.3f %10.1f %12.3f %7d %s\n", p.Value, p.Quality, p.Agreement, p.LogLik,
			p.TokensPerSecond, p.LargeShare, p.Tokens, mark)
	}
	return nil
}

// runEvalCurve is curve mode: every --arm's sweep (or a saved report's),
// the report and the plot.
func runEvalCurve(cmd *cobra.Command, f evalFlags) error {
	for _, n := range []string{"algorithm", "sweep", "param", "scorer"} {
		if cmd.Flags().Changed(n) {
			return fmt.Errorf("eval: --%s does not apply with --arm or --from (give each arm its algorithm and parameters)", n)
		}
	}
	shares, err := eval.ParseShares(f.shares)
	if err != nil {
		return err
	}
	series, title, err := curveSeries(cmd, f)
	if err != nil {
		return err
	}
	r := eval.NewReport(series, shares)
	if f.bootstrap > 0 {
		ref := f.reference
		if ref == "" {
			ref = series[0].Label
		}
		if r.Bootstrap, err = eval.NewBootstrap(series, shares, ref, f.bootstrap, f.seed); err != nil {
			return err
		}
	}
	if f.plotDir != "" {
		path := filepath.Join(f.plotDir, "quality-share.png")
		if err := eval.PlotCurves(path, title, series, shares); err != nil {
			return err
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "wrote", path)
	}
	if f.format == "json" {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
	}
	if f.format != "table" {
		return fmt.Errorf("eval: --format %q: want table or json", f.format)
	}
	return r.Markdown(cmd.OutOrStdout())
}

// curveSeries runs the --arm sweeps, or reads them --from a saved report,
// and returns them with the plot's title.
func curveSeries(cmd *cobra.Command, f evalFlags) ([]eval.Series, string, error) {
	if len(f.from) > 0 {
		if len(f.arms) > 0 || f.dataset != "" {
			return nil, "", fmt.Errorf("eval: --from reads saved reports: give no --arm or --dataset")
		}
		var all []eval.Series
		seen := map[string]bool{}
		for _, path := range f.from {
			s, err := eval.ReadReport(path)
			if err != nil {
				return nil, "", err
			}
			for _, x := range s {
				if seen[x.Label] {
					return nil, "", fmt.Errorf("eval: --from: two series are labelled %q", x.Label)
				}
				seen[x.Label] = true
			}
			all = append(all, s...)
		}
		return all, "quality against large-model share", nil
	}
	c := eval.Curve{Registry: builtin.Registry()}
	for _, a := range f.arms {
		arm, err := eval.ParseArm(a)
		if err != nil {
			return nil, "", err
		}
		c.Arms = append(c.Arms, arm)
	}
	var err error
	if c.Examples, c.Models, c.Options, err = evalSetup(f); err != nil {
		return nil, "", err
	}
	series, err := eval.RunCurve(cmd.Context(), c, func(s eval.Series) {
		fmt.Fprintf(cmd.ErrOrStderr(), "eval: %s: %d points\n", s.Label, len(s.Points))
	})
	title := fmt.Sprintf("quality against large-model share (%d held-out prompts, %d tokens each)", len(c.Examples), f.maxTokens)
	return series, title, err
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
