package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/lab"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// planFlags are the plan command's flags.
type planFlags struct {
	algorithm, concurrency, format string
	p, deltaMS                     float64
	latencies, weights             []float64
	replicas                       []int
	b0, b1, maxStates              int
	seed                           uint64
	profile, placement             string
	promptLen, outputLen           int
	spec                           planSpecFlags
}

// newPlanCmd builds `tokenrouter plan`: predicted throughput of every
// threshold vector per concurrency, from the perfmodel Markov chain (or its
// simulator for large chains), with the best vector per concurrency marked.
func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Predict throughput per threshold vector and pick the best (throughput model)",
		Long: "plan evaluates the delayed-batching throughput model (DESIGN §6) for every threshold\n" +
			"vector B at each concurrency N and marks the best. Infeasible vectors (Σ(B_i−1) ≥ N) are\n" +
			"listed but not evaluated. Each value says whether it is exact (Markov chain) or simulated.\n" +
			"serve and bench take the JSON output as their thresholds: --thresholds @plan.json.\n\n" +
			"Step times are batch-independent (--latency-ms) or, from a profile file (--profile, as\n" +
			"bench calibrate writes), curves of the batch, the tokens extended and the context held\n" +
			"(DESIGN §6a); --prompt-len and --output-len set the requests' context and prompt share.\n" +
			"--placement partitioned lets the models' steps overlap (with the profile's interference\n" +
			"folded in above 5%); time-shared runs one step at a time: " + perfmodel.TimeSharedRule + ".\n\n" +
			"--depth (a count or auto), --agree and --bus-delay predict R2R with speculative continuation\n" +
			"(DESIGN §6b) at B* of the system without it, beside that system and its no-contention bound.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPlan(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.algorithm, "algorithm", "r2r", "routing pattern: r2r (small/large with probability --p) or ensemble (per-token draw by --weights)")
	fl.Float64Var(&f.p, "p", 0.35, "r2r: probability that a small-model step routes to the large model")
	fl.Float64SliceVar(&f.latencies, "latency-ms", []float64{6.0, 27.9}, "step latency per model in milliseconds")
	fl.IntSliceVar(&f.replicas, "replicas", nil, "replicas per model, in model order (e.g. 2,1; default one each): a launch of b on r replicas is priced as one replica's step of ⌈b/r⌉")
	fl.Float64SliceVar(&f.weights, "weights", nil, "ensemble: per-model draw weights (normalised)")
	fl.StringVar(&f.concurrency, "concurrency", "2,3,4", "concurrencies N: a list (2,3,4), ranges (2-6) or both")
	fl.IntVar(&f.b0, "b0", 0, "fix model 0's threshold (0: search it too)")
	fl.IntVar(&f.b1, "b1", 0, "fix model 1's threshold (0: search it too)")
	fl.StringVar(&f.format, "format", "table", "output: table or json")
	fl.Float64Var(&f.deltaMS, "delta-ms", 0, "time quantum in milliseconds, latencies are rounded to it (0: 0.1 for batch-independent steps, about a fortieth of the shortest step otherwise)")
	fl.IntVar(&f.maxStates, "max-states", perfmodel.DefaultMaxStates, "exact-chain state limit; larger chains are simulated")
	fl.Uint64Var(&f.seed, "seed", 1, "simulation seed")
	fl.StringVar(&f.profile, "profile", "", "step-time curves from a profile file (bench calibrate) or a built-in sim profile, instead of --latency-ms")
	fl.StringVar(&f.placement, "placement", "", "partitioned or time-shared (default: the profile's, else partitioned)")
	fl.IntVar(&f.promptLen, "prompt-len", 0, "with --profile: prompt tokens per request")
	fl.IntVar(&f.outputLen, "output-len", 0, "with --profile: output tokens per request (0: long outputs, contexts not modelled)")
	addPlanSpecFlags(fl, &f.spec)
	return cmd
}

// planModel is the throughput model the flags describe.
func planModel(f planFlags) (perfmodel.Model, error) {
	m, err := planModelOf(f)
	if err != nil || f.replicas == nil {
		return m, err
	}
	m.Replicas = f.replicas
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("--replicas: %w", err)
	}
	return m, nil
}

// planModelOf is planModel before the replicas.
func planModelOf(f planFlags) (perfmodel.Model, error) {
	var m perfmodel.Model
	if f.profile != "" {
		preset, err := sim.LoadPreset(f.profile)
		if err != nil {
			return m, fmt.Errorf("--profile: %w", err)
		}
		m, err = planRouting(f, slices.Repeat([]float64{1}, len(preset.Models))) // the curves replace L
		if err != nil {
			return m, err
		}
		if m, err = lab.WithProfile(m, preset, f.placement, perfmodel.Workload{PromptLen: f.promptLen, OutputLen: f.outputLen}); err != nil {
			return m, err
		}
		if f.deltaMS == 0 {
			m.Delta = perfmodel.AutoDelta(m)
		}
		return m, nil
	}
	m, err := planRouting(f, f.latencies)
	if err != nil {
		return m, err
	}
	if m.Placement, err = lab.ParsePlacement(f.placement, ""); err != nil {
		return m, err
	}
	return m, m.Validate()
}

// planRouting builds the routing pattern the flags name over latencies.
func planRouting(f planFlags, latencies []float64) (perfmodel.Model, error) {
	var m perfmodel.Model
	switch f.algorithm {
	case "r2r":
		if len(latencies) != 2 {
			return m, fmt.Errorf("--latency-ms: r2r needs 2 latencies, got %d", len(latencies))
		}
		m = perfmodel.R2R(f.p, latencies[0], latencies[1])
	case "ensemble", "me":
		if len(f.weights) < 2 {
			return m, fmt.Errorf("--weights: ensemble needs at least 2 weights, got %d", len(f.weights))
		}
		if len(latencies) != len(f.weights) {
			return m, fmt.Errorf("--latency-ms: %d latencies for %d weights", len(latencies), len(f.weights))
		}
		m = perfmodel.Ensemble(f.weights, latencies)
	default:
		return m, fmt.Errorf("--algorithm %q: want r2r or ensemble", f.algorithm)
	}
	m.Delta = f.deltaMS
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("plan: %w", err)
	}
	return m, nil
}

func runPlan(cmd *cobra.Command, f planFlags) error {
	m, err := planModel(f)
	if err != nil {
		return err
	}
	ns, err := parseConcurrency(f.concurrency)
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	fixed := map[int]int{}
	for i, b := range []int{f.b0, f.b1} {
		if b > 0 {
			fixed[i] = b
		}
	}
	pl := perfmodel.NewPlanner(perfmodel.Options{MaxStates: f.maxStates, Sim: perfmodel.SimOptions{Seed: f.seed}})
	if f.spec.on() {
		rows, err := planSpeculation(cmd.Context(), pl, m, ns, fixed, f.spec)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		return writePlanSpec(cmd.OutOrStdout(), f.format, rows)
	}
	rows, err := pl.Plan(cmd.Context(), m, ns, fixed)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	switch f.format {
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		return nil
	case "table", "":
		return writePlanTable(cmd.OutOrStdout(), rows)
	}
	return fmt.Errorf("--format %q: want json or table", f.format)
}

// parseConcurrency parses "2,3,4", "2-6" or a mix into a sorted list
// without duplicates.
func parseConcurrency(s string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	add := func(n int) error {
		if n < 1 {
			return fmt.Errorf("concurrency %d must be at least 1", n)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
		return nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			if b < a {
				return nil, fmt.Errorf("%q: empty range", part)
			}
			if b-a > 4096 {
				return nil, fmt.Errorf("%q: range too long", part)
			}
		}
		for n := a; n <= b; n++ {
			if err := add(n); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no concurrency given")
	}
	return out, nil
}

// writePlanTable prints the rows as an aligned table.
func writePlanTable(w io.Writer, rows []perfmodel.PlanRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tB\ttok/s\t±95%\tof bound\tmethod\tbest\t")
	for _, r := range rows {
		tps, ci, frac := "infeasible", "", ""
		if r.TokensPerSecond != nil {
			tps = strconv.FormatFloat(*r.TokensPerSecond, 'f', 2, 64)
			frac = strconv.FormatFloat(100*r.BoundFraction, 'f', 1, 64) + "%"
			if r.CIHalfWidth > 0 {
				ci = strconv.FormatFloat(r.CIHalfWidth, 'f', 2, 64)
			}
		}
		best := ""
		if r.Best {
			best = "*"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Concurrency, perfmodel.FormatB(r.Thresholds), tps, ci, frac, r.Method, best)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}
