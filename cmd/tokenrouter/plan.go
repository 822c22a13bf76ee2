package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// planRow is one (N, B) line of `tokenrouter plan --format json`.
type planRow struct {
	Concurrency     int      `json:"concurrency"`
	Thresholds      []int    `json:"thresholds"`
	TokensPerSecond *float64 `json:"tokens_per_second"`
	Feasible        bool     `json:"feasible"`
	Method          string   `json:"method"`
	Best            bool     `json:"best"`
	CIHalfWidth     float64  `json:"ci_half_width,omitempty"`
	States          int      `json:"states,omitempty"`
	Residual        *float64 `json:"residual,omitempty"`
	BoundFraction   float64  `json:"bound_fraction,omitempty"`
}

// newPlanCmd builds `tokenrouter plan`: predicted throughput of every
// threshold vector per concurrency, from the perfmodel Markov chain (or its
// simulator for large chains), with the best vector per concurrency marked.
func newPlanCmd() *cobra.Command {
	var (
		algorithm   string
		p           float64
		latencies   []float64
		weights     []float64
		concurrency string
		b0          int
		format      string
		deltaMS     float64
		maxStates   int
		seed        uint64
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Predict throughput per threshold vector and pick the best (throughput model)",
		Long: "plan evaluates the delayed-batching throughput model (DESIGN §6) for every threshold\n" +
			"vector B at each concurrency N and marks the best. Infeasible vectors (Σ(B_i−1) ≥ N) are\n" +
			"listed but not evaluated. Each value says whether it is exact (Markov chain) or simulated.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var m perfmodel.Model
			switch algorithm {
			case "r2r":
				if len(latencies) != 2 {
					return fmt.Errorf("--latency-ms: r2r needs 2 latencies, got %d", len(latencies))
				}
				m = perfmodel.R2R(p, latencies[0], latencies[1])
			case "ensemble", "me":
				if len(weights) < 2 {
					return fmt.Errorf("--weights: ensemble needs at least 2 weights, got %d", len(weights))
				}
				if len(latencies) != len(weights) {
					return fmt.Errorf("--latency-ms: %d latencies for %d weights", len(latencies), len(weights))
				}
				m = perfmodel.Ensemble(weights, latencies)
			default:
				return fmt.Errorf("--algorithm %q: want r2r or ensemble", algorithm)
			}
			m.Delta = deltaMS
			if err := m.Validate(); err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			ns, err := parseConcurrency(concurrency)
			if err != nil {
				return fmt.Errorf("--concurrency: %w", err)
			}
			var fixed map[int]int
			if b0 > 0 {
				fixed = map[int]int{0: b0}
			}
			pl := perfmodel.NewPlanner(perfmodel.Options{MaxStates: maxStates, Sim: perfmodel.SimOptions{Seed: seed}})
			var rows []planRow
			for _, n := range ns {
				rs, err := pl.Search(cmd.Context(), m, n, fixed)
				if err != nil {
					return fmt.Errorf("plan N=%d: %w", n, err)
				}
				bound, err := m.NoContentionBound(n)
				if err != nil {
					return fmt.Errorf("plan: %w", err)
				}
				best := perfmodel.Best(rs)
				for k, r := range rs {
					row := planRow{Concurrency: n, Thresholds: r.B, Feasible: r.Feasible, Method: string(r.Method), Best: k == best}
					if r.Feasible {
						tps, res := r.TokensPerSecond, r.Residual
						row.TokensPerSecond = &tps
						row.CIHalfWidth = r.CIHalfWidth
						row.BoundFraction = tps / bound
						if r.Method == perfmodel.MethodExact {
							row.States, row.Residual = r.States, &res
						}
					}
					rows = append(rows, row)
				}
			}
			switch format {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rows); err != nil {
					return fmt.Errorf("plan: %w", err)
				}
				return nil
			case "table", "":
				return writePlanTable(cmd.OutOrStdout(), rows)
			default:
				return fmt.Errorf("--format %q: want json or table", format)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&algorithm, "algorithm", "r2r", "routing pattern: r2r (small/large with probability --p) or ensemble (per-token draw by --weights)")
	f.Float64Var(&p, "p", 0.35, "r2r: probability that a small-model step routes to the large model")
	f.Float64SliceVar(&latencies, "latency-ms", []float64{6.0, 27.9}, "step latency per model in milliseconds")
	f.Float64SliceVar(&weights, "weights", nil, "ensemble: per-model draw weights (normalised)")
	f.StringVar(&concurrency, "concurrency", "2,3,4", "concurrencies N: a list (2,3,4), ranges (2-6) or both")
	f.IntVar(&b0, "b0", 0, "fix model 0's threshold (0: search it too)")
	f.StringVar(&format, "format", "table", "output: table or json")
	f.Float64Var(&deltaMS, "delta-ms", perfmodel.DefaultDelta, "time quantum in milliseconds (latencies are rounded to it)")
	f.IntVar(&maxStates, "max-states", perfmodel.DefaultMaxStates, "exact-chain state limit; larger chains are simulated")
	f.Uint64Var(&seed, "seed", 1, "simulation seed")
	return cmd
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
func writePlanTable(w io.Writer, rows []planRow) error {
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
