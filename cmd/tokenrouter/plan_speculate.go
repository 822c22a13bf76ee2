package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// planSpecFlags are plan's speculative-continuation flags.
type planSpecFlags struct {
	agree    float64
	depth    string
	maxDepth int
	busDelay time.Duration
}

// addPlanSpecFlags registers plan's speculation flags.
func addPlanSpecFlags(fl *pflag.FlagSet, f *planSpecFlags) {
	fl.Float64Var(&f.agree, "agree", 0, "speculative continuation: probability that the large model's token at a routed position equals the small model's")
	fl.StringVar(&f.depth, "depth", "", "speculative continuation: tokens a request may run past its oldest unresolved routed position, or auto (the best of 0..--max-depth); empty: no speculation")
	fl.IntVar(&f.maxDepth, "max-depth", 16, "with --depth auto: the deepest setting tried")
	fl.DurationVar(&f.busDelay, "bus-delay", 0, "one-way delay of every message between the models (a split deployment)")
}

// on reports whether the flags ask for the speculative prediction.
func (f planSpecFlags) on() bool { return f.depth != "" || f.busDelay > 0 }

// planSpecRow is one concurrency of the speculative prediction.
type planSpecRow struct {
	Concurrency int   `json:"concurrency"`
	Thresholds  []int `json:"thresholds"`
	// Plain is the system without speculation at the same thresholds and
	// bus delay, Bound its no-contention bound (each hand-off paying the
	// delay twice).
	Plain   float64 `json:"plain_tokens_per_second"`
	Bound   float64 `json:"no_contention_bound"`
	Depth   int     `json:"depth"`
	Agree   float64 `json:"agree"`
	DelayMS float64 `json:"bus_delay_ms"`
	// TokensPerSecond is the speculative prediction, CIHalfWidth its
	// simulation's 95% half-width, Method how it was computed.
	TokensPerSecond float64 `json:"tokens_per_second"`
	CIHalfWidth     float64 `json:"ci95,omitempty"`
	Method          string  `json:"method"`
	// RolledBack is the small model's tokens discarded per second.
	RolledBack float64 `json:"rolled_back_per_second"`
}

// planSpeculation predicts speculative continuation at each concurrency
// beside the system without it: the thresholds are B* of the system
// without speculation and without the delay (what the runtime's automatic
// thresholds aim for).
func planSpeculation(ctx context.Context, pl *perfmodel.Planner, m perfmodel.Model, ns []int, fixed map[int]int, f planSpecFlags) ([]planSpecRow, error) {
	sp := perfmodel.Speculation{Agree: f.agree, BusDelay: float64(f.busDelay) / float64(time.Millisecond)}
	auto := f.depth == "auto"
	if !auto && f.depth != "" {
		d, err := strconv.Atoi(f.depth)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--depth %q: want a count of tokens or auto", f.depth)
		}
		sp.Depth = d
	}
	var rows []planSpecRow
	for _, n := range ns {
		plain, err := pl.Speculative(ctx, m, n, nil, fixed, 0, perfmodel.Speculation{BusDelay: sp.BusDelay})
		if err != nil {
			return nil, err
		}
		bound, err := m.NoContentionBound(n)
		if err != nil {
			return nil, err
		}
		// R2R: n/(T0 + p·T1) tokens per millisecond; the delay adds 2h to
		// each hand-off.
		bound = 1 / (1/bound + m.P[0][1]*2*sp.BusDelay/(1000*float64(n)))
		var r perfmodel.SpecResult
		if auto {
			d, all, err := pl.BestDepth(ctx, m, n, plain.B, fixed, 0, sp, f.maxDepth)
			if err != nil {
				return nil, err
			}
			r = all[d]
		} else if r, err = pl.Speculative(ctx, m, n, plain.B, fixed, 0, sp); err != nil {
			return nil, err
		}
		rows = append(rows, planSpecRow{Concurrency: n, Thresholds: plain.B, Plain: plain.TokensPerSecond, Bound: bound,
			Depth: r.Speculation.Depth, Agree: sp.Agree, DelayMS: sp.BusDelay, TokensPerSecond: r.TokensPerSecond,
			CIHalfWidth: r.CIHalfWidth, Method: string(r.Method), RolledBack: r.RolledBack})
	}
	return rows, nil
}

// writePlanSpec prints the speculative rows as JSON or a table.
func writePlanSpec(w io.Writer, format string, rows []planSpecRow) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tB\tplain tok/s\tbound\tplain/bound\tagree\tdelay ms\tD\ttok/s\t±95%\t×plain\t/bound\trolled back/s\tmethod\t")
	for _, r := range rows {
		ci := ""
		if r.CIHalfWidth > 0 {
			ci = strconv.FormatFloat(r.CIHalfWidth, 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f\t%.1f%%\t%g\t%g\t%d\t%.2f\t%s\t%.3f\t%.1f%%\t%.1f\t%s\t\n", r.Concurrency, perfmodel.FormatB(r.Thresholds),
			r.Plain, r.Bound, 100*r.Plain/r.Bound, r.Agree, r.DelayMS, r.Depth, r.TokensPerSecond, ci, r.TokensPerSecond/r.Plain,
			100*r.TokensPerSecond/r.Bound, r.RolledBack, r.Method)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}
