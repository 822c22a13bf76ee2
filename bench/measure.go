package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/tokenrouter/tokenrouter/autotune"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
)

// MeasureRow is one system measured at one concurrency by Measure, as
// printed.
type MeasureRow struct {
	// System, Algorithm and Concurrency name the configuration measured.
	System      string `json:"system"`
	Algorithm   string `json:"algorithm"`
	Concurrency int    `json:"concurrency"`
	// Thresholds are each model's B at Concurrency (tokenrouter only).
	Thresholds []int `json:"thresholds,omitempty"`
	// TokensPerSecond is Tokens committed over the Seconds measured;
	// RoutedFraction the share of them from models other than model 0.
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	RoutedFraction  float64 `json:"routed_fraction"`
	// Auto marks automatic thresholds; Thresholds then holds the final
	// table's entries at this concurrency.
	Auto bool `json:"auto,omitempty"`
	// Plans counts the tables the tuner computed during the run.
	Plans int `json:"plans,omitempty"`
	// Tables is the final B*(n) table per model (auto only).
	Tables []sched.Table `json:"tables,omitempty"`
	// EstimatedP and EstimatedLatencyMS are the estimate behind the final
	// tables (auto only).
	EstimatedP         [][]float64 `json:"estimated_p,omitempty"`
	EstimatedLatencyMS []float64   `json:"estimated_latency_ms,omitempty"`
	// Placement is how the models shared the cores.
	Placement string `json:"placement,omitempty"`
	// Deployed says where the deployment's sub-servers ran when not in
	// bench's process (Spec.Deployed).
	Deployed string `json:"deployed,omitempty"`
}

// Measure is `tokenrouter bench run`: it measures the system named system
// under a closed loop at each of s.Concurrency in turn, on fresh engines
// each time, and writes a row per concurrency to s.Out (a table, or JSON:
// one object for one concurrency, else a list).
func Measure(ctx context.Context, s Spec, system string) error {
	if err := s.checkFormat(); err != nil {
		return err
	}
	run, err := Prepare(ctx, s, true)
	if err != nil {
		return err
	}
	var rows []MeasureRow
	for _, n := range s.Concurrency {
		row, err := run.measurePoint(ctx, system, n)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if s.Format == "json" {
		enc := json.NewEncoder(run.Spec.Out)
		if len(rows) == 1 {
			return enc.Encode(rows[0])
		}
		return enc.Encode(rows)
	}
	printMeasure(run.Spec.Out, run, rows)
	return nil
}

// printMeasure prints Measure's table.
func printMeasure(out io.Writer, run Prepared, rows []MeasureRow) {
	if pl := run.Placement(); pl != "" {
		fmt.Fprintf(out, "%s, placement %s\n", run.Spec.Label, pl)
	}
	if d := run.Spec.Deployed; d != "" {
		fmt.Fprintf(out, "sub-servers in %s\n", d)
	}
	fmt.Fprintf(out, "%-12s %-12s %4s %-10s %10s %8s %7s %s\n", "system", "algorithm", "N", "B", "tok/s", "tokens", "routed", "plans")
	for _, r := range rows {
		b := perfmodel.FormatB(r.Thresholds)
		plans := ""
		if r.Auto {
			b = "auto:" + b
			plans = strconv.Itoa(r.Plans)
		}
		fmt.Fprintf(out, "%-12s %-12s %4d %-10s %10.1f %8d %7.3f %s\n", r.System, r.Algorithm, r.Concurrency,
			b, r.TokensPerSecond, r.Tokens, r.RoutedFraction, plans)
	}
}

// measurePoint measures system at concurrency n on fresh engines.
func (r Prepared) measurePoint(ctx context.Context, system string, n int) (MeasureRow, error) {
	setup := r.Setup
	sys, err := setup.Build(ctx, system)
	if err != nil {
		return MeasureRow{}, err
	}
	o := r.Options
	o.Concurrency, o.Label = n, fmt.Sprintf("%s N=%d", system, n)
	res, err := Run(ctx, sys, o)
	// Read the tuner before Close; its state survives Close anyway.
	var st *autotune.Status
	if d, ok := sys.(*deploy.Deployment); ok && d.Tuner() != nil {
		s := d.Tuner().Status()
		st = &s
	}
	cerr := sys.Close()
	if err != nil {
		return MeasureRow{}, err
	}
	if cerr != nil {
		return MeasureRow{}, fmt.Errorf("closing %s: %w", system, cerr)
	}
	row := MeasureRow{System: system, Algorithm: setup.Algorithm, Concurrency: n, TokensPerSecond: res.TokensPerSecond,
		Tokens: res.Tokens, Seconds: res.Seconds, RoutedFraction: res.RoutedFraction, Placement: r.Placement(), Deployed: r.Spec.Deployed}
	if system == "tokenrouter" {
		if st != nil && st.Err != nil {
			fmt.Fprintf(r.Spec.Progress, "auto thresholds: %v\n", st.Err)
		}
		row.thresholds(setup.Launch, st, len(setup.Models))
	}
	return row, nil
}

// thresholds records the thresholds the run used at its concurrency:
// the static tables', or the tuner's final ones (B = 1 before its first
// plan).
func (row *MeasureRow) thresholds(l sched.Launch, st *autotune.Status, models int) {
	switch {
	case !l.Auto:
		for _, t := range l.Tables {
			row.Thresholds = append(row.Thresholds, t[min(row.Concurrency, len(t)-1)])
		}
	case st != nil:
		row.Auto, row.Plans = true, st.Plans
		if st.Tables == nil {
			row.Thresholds = slices.Repeat([]int{1}, models)
			return
		}
		row.Tables = st.Tables
		for _, t := range st.Tables {
			row.Thresholds = append(row.Thresholds, t.At(row.Concurrency))
		}
		row.EstimatedP, row.EstimatedLatencyMS = st.Model.P, st.Planned.L
	}
}
