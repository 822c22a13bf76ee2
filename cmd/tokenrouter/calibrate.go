package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// calibrateFlags are bench --calibrate's flags.
type calibrateFlags struct {
	out, placement, plan      string
	cores, repeats            int
	batches, tokens, contexts []int
	promptBatches             []int
}

// options returns the calibration options the flags give; promptLen is
// bench's --prompt-len, the tokens a sequence appends in the prompt-sized
// steps.
func (c calibrateFlags) options(promptLen int) bench.CalibrateOptions {
	return bench.CalibrateOptions{Batches: c.batches, Tokens: c.tokens, Contexts: c.contexts, Repeats: c.repeats,
		PromptBatches: c.promptBatches, PromptTokens: promptLen}
}

func addCalibrateFlags(fl *pflag.FlagSet, c *calibrateFlags) {
	fl.StringVar(&c.out, "out", "", "with --calibrate: the profile file to write (default: stdout); with both placements, FILE.partitioned.json and FILE.time-shared.json")
	fl.IntVar(&c.cores, "calibrate-cores", 0, "with --calibrate: cores the models share (0: all); time-shared steps use all, partitioned ones an even share")
	fl.IntSliceVar(&c.batches, "calibrate-batches", []int{1, 2, 4, 5, 8, 9, 16, 17}, "with --calibrate: batch sizes to measure (the powers of two and one past them: engines' steps jump where a tile of rows fills)")
	fl.IntSliceVar(&c.tokens, "calibrate-tokens", []int{1, 2, 4}, "with --calibrate: tokens each sequence appends in a measured step (1: decode)")
	fl.IntSliceVar(&c.contexts, "calibrate-contexts", []int{16, 128}, "with --calibrate: tokens each sequence holds before a measured step (the first with every batch and token count, the others with decodes)")
	fl.IntSliceVar(&c.promptBatches, "calibrate-prompt-batches", []int{1, 8, 16}, "with --calibrate: batch sizes of the prompt-sized steps measured (each sequence appending --prompt-len tokens: requests that start together send their prompts in one step)")
	fl.IntVar(&c.repeats, "calibrate-repeats", 5, "with --calibrate: repeats per point (their median counts, times the mean over median of all of them)")
	fl.StringVar(&c.placement, "calibrate-placement", "both", "with --calibrate: partitioned, time-shared or both")
	fl.StringVar(&c.plan, "calibrate-plan", "2-8", "with --calibrate of two models: print the model's best B per N at these concurrencies for r2r at --p, with --prompt-len and --max-tokens as the workload (empty: none)")
}

// calibrateModels reads the --model files.
func calibrateModels(m benchModelFlags) ([]config.Model, error) {
	var ms []config.Model
	for i, v := range m.models {
		spec := parseModelSpec(v)
		if spec.name == "" {
			spec.name = strings.TrimSuffix(filepath.Base(spec.path), filepath.Ext(spec.path))
		}
		c := cpuModel(spec, i, m.tokenizer, 0)
		if slices.ContainsFunc(ms, func(o config.Model) bool { return o.Name == c.Name }) {
			c.Name = fmt.Sprintf("%s-%d", c.Name, i)
		}
		ms = append(ms, c)
	}
	if len(ms) == 0 {
		return nil, errors.New("--calibrate: --model PATH is required (repeat it for a pair, small model first)")
	}
	return ms, nil
}

// runCalibrate fits the step-time curves of real models on the CPU engine
// under each placement and writes them as profile files, which plan
// --profile, bench --profile (the sim engine) and the throughput model
// read.
func runCalibrate(cmd *cobra.Command, f benchFlags) error {
	c := f.compare.cal
	ms, err := calibrateModels(f.models)
	if err != nil {
		return err
	}
	o := c.options(f.promptLen)
	o.Cores, o.Progress = c.cores, cmd.ErrOrStderr()
	switch c.placement {
	case "both", "":
	case sim.Partitioned, sim.TimeShared:
		o.Placements = []string{c.placement}
	default:
		return fmt.Errorf("--calibrate-placement %q: want %s, %s or both", c.placement, sim.Partitioned, sim.TimeShared)
	}
	ks, err := runKinds(cmd.Context(), f, ms, true)
	if err != nil {
		return err
	}
	presets, err := bench.Calibrate(cmd.Context(), ks, ms, o)
	if err != nil {
		return err
	}
	report := cmd.ErrOrStderr()
	for _, p := range presets {
		if err := writeProfile(cmd, c.out, p, len(presets) > 1, report); err != nil {
			return err
		}
		printCalibration(report, p)
	}
	if c.plan == "" || len(ms) != 2 {
		return nil
	}
	return printCalibratedPlan(cmd, f, presets, report)
}

// writeProfile writes p to out (stdout when empty; with several presets,
// out with the placement before its extension).
func writeProfile(cmd *cobra.Command, out string, p sim.Preset, several bool, report io.Writer) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("--calibrate: %w", err)
	}
	if out == "" {
		_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
		return err
	}
	if several {
		ext := filepath.Ext(out)
		out = strings.TrimSuffix(out, ext) + "." + p.Placement + ext
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--calibrate: %w", err)
	}
	fmt.Fprintf(report, "wrote %s\n", out)
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

// printCalibratedPlan prints the throughput model's best thresholds per
// concurrency for r2r over the calibrated pair, under every placement
// calibrated.
func printCalibratedPlan(cmd *cobra.Command, f benchFlags, presets []sim.Preset, w io.Writer) error {
	ns, err := parseConcurrency(f.compare.cal.plan)
	if err != nil {
		return fmt.Errorf("--calibrate-plan: %w", err)
	}
	wl := perfmodel.Workload{PromptLen: f.promptLen, OutputLen: f.maxTokens}
	fmt.Fprintf(w, "\nthroughput model: r2r p=%g, prompts %d, outputs %d tokens, B0 = 1\n", f.p, wl.PromptLen, wl.OutputLen)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "placement\tN\tbest B\ttok/s\tmethod\tquantum ms\t")
	pl := perfmodel.NewPlanner(perfmodel.Options{})
	for _, p := range presets {
		m, err := withProfile(perfmodel.R2R(f.p, 1, 1), p, p.Placement, wl)
		if err != nil {
			return err
		}
		m.Delta = perfmodel.AutoDelta(m)
		for _, n := range ns {
			r, err := pl.Optimize(cmd.Context(), m, n, map[int]int{0: 1})
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%s\t%g\t\n", p.Placement, n, perfmodel.FormatB(r.B), r.TokensPerSecond, r.Method, m.Delta)
		}
	}
	return tw.Flush()
}

// validateDeployment is what bench --validate measures and what its
// prediction assumes: the sim engine stepping the profile's curves or, with
// --model files, the cpu engine placed as --placement says and predicted by
// the profile's curves (which must be of that placement) or, with
// --recalibrate, by curves calibrated during the run. Auto with a profile
// is the profile's placement; with --recalibrate it measures and picks, as
// bench does, and says what it chose on progress.
func validateDeployment(ctx context.Context, f benchFlags, preset sim.Preset, params map[string]string, launch sched.Launch, progress io.Writer) (bench.Setup, []steptime.Curve, []float64, perfmodel.Placement, error) {
	setup := benchSetup(f, preset, params, launch, nil)
	placement, err := parsePlacement("", preset.Placement)
	if err != nil {
		return setup, nil, nil, "", err
	}
	steps, inter := preset.Curves()
	if len(f.models.models) == 0 {
		if placement == perfmodel.TimeShared {
			return setup, nil, nil, "", fmt.Errorf("profile %s is for time-shared placement: validate it on the cpu engine with its --model files", preset.Name)
		}
		return setup, steps, inter, placement, nil
	}
	ms, err := calibrateModels(f.models)
	if err != nil {
		return setup, nil, nil, "", err
	}
	if len(ms) != len(preset.Models) {
		return setup, nil, nil, "", fmt.Errorf("%d --model files for the %d models of profile %s", len(ms), len(preset.Models), preset.Name)
	}
	want, err := config.ParsePlacement(f.models.placement)
	if err != nil {
		return setup, nil, nil, "", fmt.Errorf("--placement: %w", err)
	}
	if !f.compare.recalibrate {
		// The profile's curves hold for the placement and threads it was
		// calibrated with.
		switch {
		case want == config.PlacementAuto:
			want = config.Placement(placement)
		case want != config.Placement(placement):
			return setup, nil, nil, "", fmt.Errorf("--placement %s: profile %s was calibrated for %s placement (calibrate that placement, or --recalibrate)", want, preset.Name, placement)
		}
		for i := range ms {
			if i < len(preset.Calibration) && preset.Calibration[i].Threads > 0 {
				ms[i].Threads = preset.Calibration[i].Threads
			}
		}
	}
	ks, err := runKinds(ctx, f, ms, true)
	if err != nil {
		return setup, nil, nil, "", err
	}
	placed, err := ks.Place(ctx, ms, want, loader.PlaceOptions{})
	if err != nil {
		return setup, nil, nil, "", err
	}
	if placed.Reason != "" {
		fmt.Fprintf(progress, "placement: %s (%s)\n", placed.Placement, placed.Reason)
	}
	setup.Models, setup.Kinds, setup.TimeShared = placed.Models, ks, placed.TimeShared()
	return setup, steps, inter, perfmodel.Placement(placed.Placement), nil
}

// printSteps prints step-time curves that depend on the batch.
func printSteps(w io.Writer, steps []steptime.Curve) {
	for i, c := range steps {
		if !c.Constant() {
			fmt.Fprintf(w, "  model %d: L = %s\n", i, c)
		}
	}
}
