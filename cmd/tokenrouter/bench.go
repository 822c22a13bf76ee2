package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/baseline/lockstep"
	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/router"
	"github.com/tokenrouter/tokenrouter/sched"
)

// benchFlags are the bench command's flags.
type benchFlags struct {
	engine, profile, algorithm, thresholds, system, format string
	p                                                      float64
	params                                                 []string
	concurrency                                            []int
	maxWait, duration, warmup                              time.Duration
	maxTokens, promptLen                                   int
	seed                                                   uint64
}

// benchRow is one measured configuration, as printed.
type benchRow struct {
	System          string  `json:"system"`
	Algorithm       string  `json:"algorithm"`
	Concurrency     int     `json:"concurrency"`
	Thresholds      []int   `json:"thresholds,omitempty"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	RoutedFraction  float64 `json:"routed_fraction"`
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure committed tokens/s under a closed loop of concurrent requests",
		Long: `bench keeps --concurrency requests in flight (a finished request is replaced at
once), warms up, then counts committed tokens over a measured window.

  tokenrouter bench --engine sim --profile paper-r2r --algorithm r2r-random --p 0.35 \
    --concurrency 4 --thresholds 1,3 --max-wait 0 --system tokenrouter --duration 15s --format json

--system lockstep runs the same engines and algorithm the way R2R's official
serving does (all requests advance in global steps). Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.engine, "engine", "sim", "engine: sim")
	fl.StringVar(&f.profile, "profile", "paper-r2r", "sim latency profile")
	fl.StringVar(&f.algorithm, "algorithm", "r2r-random", "routing algorithm")
	fl.Float64Var(&f.p, "p", 0.35, "routing probability (r2r-random)")
	fl.StringArrayVar(&f.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.IntSliceVar(&f.concurrency, "concurrency", []int{4}, "requests in flight (a list runs each)")
	fl.StringVar(&f.thresholds, "thresholds", "1,1", "batching thresholds B, one per model")
	fl.DurationVar(&f.maxWait, "max-wait", 50*time.Millisecond, "launch anyway after this wait (0 disables the guard)")
	fl.StringVar(&f.system, "system", "tokenrouter", "system: tokenrouter or lockstep")
	fl.DurationVar(&f.duration, "duration", 15*time.Second, "measured window")
	fl.DurationVar(&f.warmup, "warmup", 2*time.Second, "warm-up before the window")
	fl.IntVar(&f.maxTokens, "max-tokens", 4096, "output tokens per request")
	fl.IntVar(&f.promptLen, "prompt-len", 16, "prompt tokens per request")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for prompts and routing decisions")
	fl.StringVar(&f.format, "format", "table", "output: table or json")
	return cmd
}

func runBench(cmd *cobra.Command, f benchFlags) error {
	if f.engine != "sim" {
		return fmt.Errorf("--engine %q: bench supports sim", f.engine)
	}
	preset, err := sim.LookupPreset(f.profile)
	if err != nil {
		return err
	}
	params, err := parseParams(f.params)
	if err != nil {
		return err
	}
	if _, ok := params["p"]; !ok {
		params["p"] = strconv.FormatFloat(f.p, 'g', -1, 64)
	}
	tables, err := sched.ParseStatic(f.thresholds)
	if err != nil {
		return fmt.Errorf("--thresholds: %w", err)
	}
	if len(tables) != len(preset.Models) {
		return fmt.Errorf("--thresholds: %d values for %d models", len(tables), len(preset.Models))
	}
	var rows []benchRow
	for _, n := range f.concurrency {
		sys, err := buildSystem(f, preset, params, tables)
		if err != nil {
			return err
		}
		res, err := bench.Run(cmd.Context(), sys, bench.Options{
			Concurrency: n, MaxTokens: f.maxTokens, PromptLen: f.promptLen, Warmup: f.warmup,
			Duration: f.duration, Seed: f.seed, Progress: cmd.ErrOrStderr(),
			Label: fmt.Sprintf("%s N=%d", f.system, n),
		})
		cerr := sys.Close()
		if err != nil {
			return err
		}
		if cerr != nil {
			return fmt.Errorf("closing %s: %w", f.system, cerr)
		}
		row := benchRow{System: f.system, Algorithm: f.algorithm, Concurrency: n, TokensPerSecond: res.TokensPerSecond,
			Tokens: res.Tokens, Seconds: res.Seconds, RoutedFraction: res.RoutedFraction}
		if f.system == "tokenrouter" {
			for _, t := range tables {
				row.Thresholds = append(row.Thresholds, t[0])
			}
		}
		rows = append(rows, row)
	}
	out := cmd.OutOrStdout()
	if f.format == "json" {
		enc := json.NewEncoder(out)
		if len(rows) == 1 {
			return enc.Encode(rows[0])
		}
		return enc.Encode(rows)
	}
	fmt.Fprintf(out, "%-12s %-12s %4s %-10s %10s %8s %7s\n", "system", "algorithm", "N", "B", "tok/s", "tokens", "routed")
	for _, r := range rows {
		fmt.Fprintf(out, "%-12s %-12s %4d %-10s %10.1f %8d %7.3f\n", r.System, r.Algorithm, r.Concurrency,
			strings.Trim(strings.Join(strings.Fields(fmt.Sprint(r.Thresholds)), ","), "[]"), r.TokensPerSecond, r.Tokens, r.RoutedFraction)
	}
	return nil
}

// buildSystem wires the chosen serving system on fresh sim engines.
func buildSystem(f benchFlags, preset sim.Preset, params map[string]string, tables []sched.Table) (bench.System, error) {
	engines := make([]engine.Engine, len(preset.Models))
	for i, name := range preset.Models {
		engines[i] = sim.New(sim.Config{Name: name, Profile: preset.Profiles[i], Seed: uint64(i + 1)})
	}
	switch f.system {
	case "tokenrouter":
		ms := make([]router.Model, len(engines))
		for i := range engines {
			ms[i] = router.Model{Name: preset.Models[i], Engine: engines[i], Policy: sched.Policy{B: tables[i], MaxWait: f.maxWait}}
		}
		return router.New(router.Config{Models: ms, Algorithm: f.algorithm, Params: params, Registry: builtin.Registry()})
	case "lockstep":
		return lockstep.New(lockstep.Config{Engines: engines, Names: preset.Models, Algorithm: f.algorithm, Params: params, Registry: builtin.Registry()})
	}
	return nil, fmt.Errorf("--system %q: want tokenrouter or lockstep", f.system)
}

// parseParams turns name=value pairs into a map.
func parseParams(kv []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q: want name=value", s)
		}
		out[k] = v
	}
	return out, nil
}
