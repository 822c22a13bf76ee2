package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// CalibrateRun is `tokenrouter bench calibrate`: the step-time curves of
// real models fitted on the CPU engine (Calibrate), per placement, and
// written as profile files, which plan --profile, bench --profile (the
// sim engine) and the throughput model read.
type CalibrateRun struct {
	// Models are the models, small first.
	Models []config.Model
	// KVReserveMB is the KV memory the cpu engines warm (bench.Kinds).
	KVReserveMB int
	// Options are the grid, the prompt-sized steps' tokens and the cores
	// (Placements is set from Placement).
	Options CalibrateOptions
	// Placement is partitioned, time-shared, or both ("" too).
	Placement string
	// File is the profile file written (""; Out); with both placements,
	// FILE.partitioned.json and FILE.time-shared.json.
	File string
	// Plan lists the concurrencies at which the throughput model's best
	// thresholds are printed for a pair, for r2r at P over Workload (nil:
	// none).
	Plan []int
	// P is r2r's routing probability in the plan.
	P float64
	// Workload is the plan's prompt and output lengths.
	Workload perfmodel.Workload
	// Out receives the profile when File is empty; Progress the report.
	Out, Progress io.Writer
}

// RunCalibrate runs c: it calibrates, writes the profiles and reports each
// model's fit (and the plan) on c.Progress.
func RunCalibrate(ctx context.Context, c CalibrateRun) error {
	if len(c.Models) == 0 {
		return errors.New("calibrate: --model PATH is required (repeat it for a pair, small model first)")
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	o := c.Options
	o.Progress = c.Progress
	switch c.Placement {
	case "both", "":
	case sim.Partitioned, sim.TimeShared:
		o.Placements = []string{c.Placement}
	default:
		return fmt.Errorf("--calibrate-placement %q: want %s, %s or both", c.Placement, sim.Partitioned, sim.TimeShared)
	}
	ks, err := bench.Kinds(ctx, c.KVReserveMB, c.Models, true)
	if err != nil {
		return err
	}
	presets, err := Calibrate(ctx, ks, c.Models, o)
	if err != nil {
		return err
	}
	for _, p := range presets {
		if err := c.writeProfile(p, len(presets) > 1); err != nil {
			return err
		}
		printCalibration(c.Progress, p)
	}
	if len(c.Plan) == 0 || len(c.Models) != 2 {
		return nil
	}
	return c.printPlan(ctx, presets)
}

// writeProfile writes p to c.File (c.Out when empty; with several
// presets, the file with the placement before its extension).
func (c CalibrateRun) writeProfile(p sim.Preset, several bool) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	out := c.File
	if out == "" {
		_, err = fmt.Fprintln(c.Out, string(b))
		return err
	}
	if several {
		ext := filepath.Ext(out)
		out = strings.TrimSuffix(out, ext) + "." + p.Placement + ext
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	fmt.Fprintf(c.Progress, "wrote %s\n", out)
	return nil
}

// printCalibration prints each model's measured points beside the fitted
// curve, the fit's largest error and the interference.
func printCalibration(w io.Writer, p sim.Preset) {
	fmt.Fprintf(w, "\n%s placement:\n", p.Placement)
	for i, name := range p.Models {
		pr, cal := p.Profiles[i], p.Calibration[i]
		fmt.Fprintf(w, "%s (%d threads): L = %s; fit max error %.1f%%", name, cal.Threads, pr.Curve, 100*cal.MaxRelError)
		if pr.Interference > 0 {
			fmt.Fprintf(w, "; interference ×%.3f (per batch %.3f)", pr.Interference, cal.Slowdowns)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "batch\textend\tcontext\tmeasured ms\tfitted ms\terror\t")
		for _, pt := range cal.Points {
			fit := pr.Curve.At(pt.Batch, pt.Extend, pt.Context)
			fmt.Fprintf(tw, "%d\t%g\t%g\t%.2f\t%.2f\t%+.1f%%\t\n", pt.Batch, pt.Extend, pt.Context, pt.MS, fit, 100*(fit-pt.MS)/pt.MS)
		}
		_ = tw.Flush()
	}
}

// printPlan prints the throughput model's best thresholds per
// concurrency for r2r over the calibrated pair, under every placement
// calibrated.
func (c CalibrateRun) printPlan(ctx context.Context, presets []sim.Preset) error {
	w, wl := c.Progress, c.Workload
	fmt.Fprintf(w, "\nthroughput model: r2r p=%g, prompts %d, outputs %d tokens, B0 = 1\n", c.P, wl.PromptLen, wl.OutputLen)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "placement\tN\tbest B\ttok/s\tmethod\tquantum ms\t")
	pl := perfmodel.NewPlanner(perfmodel.Options{})
	for _, p := range presets {
		m, err := WithProfile(perfmodel.R2R(c.P, 1, 1), p, p.Placement, wl)
		if err != nil {
			return err
		}
		m.Delta = perfmodel.AutoDelta(m)
		for _, n := range c.Plan {
			r, err := pl.Optimize(ctx, m, n, map[int]int{0: 1})
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%s\t%g\t\n", p.Placement, n, perfmodel.FormatB(r.B), r.TokensPerSecond, r.Method, m.Delta)
		}
	}
	return tw.Flush()
}
