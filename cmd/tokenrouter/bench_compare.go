package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/bench/plot"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// benchCompareFlags are bench's side-by-side, plotting and calibration
// flags.
type benchCompareFlags struct {
	systems, csv, plotDir string
	predict               string
	calibrate             bool
	recalibrate           bool
	recalibrateEvery      string
	cal                   calibrateFlags
}

func addCompareFlags(fl *pflag.FlagSet, c *benchCompareFlags) {
	fl.StringVar(&c.systems, "systems", "", "compare serving systems side by side, interleaved: a comma list of "+
		strings.Join(bench.Systems(), ", ")+", all (the list before), tokenrouter-auto (automatic thresholds whatever --thresholds says), or a server's [LABEL=]URL")
	fl.StringVar(&c.csv, "csv", "", "with --systems: also write the rows to this CSV file")
	fl.StringVar(&c.predict, "predict", "", "with --systems: add the throughput model's prediction per row from this calibrated profile (bench --calibrate's FILE.PLACEMENT.json; it must match the run's placement and threads)")
	fl.BoolVar(&c.recalibrate, "recalibrate", false, "with --systems or --validate: predict every row as --predict does, from step curves calibrated (the --calibrate-* grid) on the run's models as placed, before the first concurrency and after each, each concurrency's rows on the mean of the calibrations before and after its rounds, so that the machine's drift between a calibration and the run stays out of the prediction")
	fl.StringVar(&c.recalibrateEvery, "recalibrate-every", "concurrency", "with --recalibrate: calibrate after every concurrency, or after every round (round), each concurrency priced on the pointwise median of the calibrations taken before and during its rounds: more calibrations, spread over the minutes its slices ran, and one caught in a slow stretch moves nothing")
	fl.StringVar(&c.plotDir, "plot", "", "write PNG figures into this folder (--systems: throughput.png; --validate: validate.png)")
	fl.BoolVar(&c.calibrate, "calibrate", false, "fit the step-time curves of the --model files on the CPU engine, per placement, and write profile files (see --out)")
	addCalibrateFlags(fl, &c.cal)
}

// runCompare measures several systems at several concurrencies in one
// invocation, interleaved.
func runCompare(cmd *cobra.Command, f benchFlags) error {
	if f.format != "table" && f.format != "json" {
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	if !cmd.Flags().Changed("max-tokens") {
		// Requests must finish and be replaced inside the window for
		// time-to-first-token to be measured.
		f.maxTokens = 256
	}
	systems, err := compareSystems(f)
	if err != nil {
		return err
	}
	if err := f.compare.checkRecalibrateEvery(); err != nil {
		return err
	}
	if f.compare.recalibrate && f.compare.predict != "" {
		return errors.New("--recalibrate calibrates the run's own curves: drop --predict")
	}
	run, err := newBenchRun(cmd, f, slices.ContainsFunc(systems, func(s string) bool { return !bench.IsURL(s) }))
	if err != nil {
		return err
	}
	compare := compareOnce
	if f.compare.recalibrate {
		compare = compareRecalibrated
	}
	rows, out, err := compare(cmd, f, run, systems)
	if err != nil {
		return err
	}
	if f.compare.csv != "" {
		if err := writeCompareCSV(f.compare.csv, out, f.compare.predict != "" || f.compare.recalibrate); err != nil {
			return err
		}
	}
	if err := plotCompare(cmd, f, run.desc, out); err != nil {
		return err
	}
	if f.format == "json" {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
	}
	printCompare(cmd.OutOrStdout(), f, run, systems, rows, out)
	return nil
}

// compareOnce runs bench.Compare over every concurrency, with
// predictions from --predict's profile if given.
func compareOnce(cmd *cobra.Command, f benchFlags, run benchRun, systems []string) ([]bench.Row, []bench.Summary, error) {
	var pm perfmodel.Model
	if f.compare.predict != "" {
		preset, err := sim.LoadPreset(f.compare.predict)
		if err == nil {
			pm, err = predictModel(f, run, preset, f.compare.predict)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--predict: %w", err)
		}
	}
	rows, err := bench.Compare(cmd.Context(), run.setup, systems, f.concurrency, run.opts, f.rounds, progressBar(cmd.ErrOrStderr()))
	if err != nil {
		return nil, nil, err
	}
	out := summarize(run, rows, len(systems))
	if f.compare.predict != "" {
		if err := run.setup.AddPredictions(cmd.Context(), perfmodel.NewPlanner(perfmodel.Options{}), pm, rows, out); err != nil {
			return nil, nil, fmt.Errorf("--predict: %w", err)
		}
	}
	return rows, out, nil
}

// checkRecalibrateEvery checks --recalibrate-every.
func (c benchCompareFlags) checkRecalibrateEvery() error {
	switch c.recalibrateEvery {
	case "concurrency", "round":
		return nil
	}
	return fmt.Errorf("--recalibrate-every %q: want concurrency or round", c.recalibrateEvery)
}

// compareRecalibrated runs bench.Compare one concurrency at a time,
// calibrating the run's models as placed before the first and after each
// (after each round with --recalibrate-every round), and predicts each
// concurrency's rows from the merge of the calibrations before and during
// it (bench.MergeCalibrations).
func compareRecalibrated(cmd *cobra.Command, f benchFlags, run benchRun, systems []string) ([]bench.Row, []bench.Summary, error) {
	if len(run.placed.Models) == 0 || slices.ContainsFunc(systems, bench.IsURL) {
		return nil, nil, errors.New("--recalibrate measures the systems run in this process, with --model files: drop --url and server systems")
	}
	o := f.compare.cal.options(f.promptLen)
	calibrate := func(when string) (sim.Preset, error) {
		start := time.Now()
		p, err := bench.CalibratePlaced(cmd.Context(), run.setup.Kinds, run.placed.Models, string(run.placed.Placement), o)
		if err != nil {
			return sim.Preset{}, fmt.Errorf("--recalibrate: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "calibrated %s in %v: %s\n", when, time.Since(start).Round(100*time.Millisecond), bench.CurveSummary(p))
		return p, nil
	}
	before, err := calibrate(fmt.Sprintf("before N=%d", f.concurrency[0]))
	if err != nil {
		return nil, nil, err
	}
	opts := run.opts
	var cals []sim.Preset
	opts.AfterRound = func(_ context.Context, n, round int) error {
		if f.compare.recalibrateEvery != "round" && round < max(f.rounds, 1)-1 {
			return nil
		}
		after, err := calibrate(fmt.Sprintf("after N=%d round %d", n, round+1))
		cals = append(cals, after)
		return err
	}
	if _, err := predictModel(f, run, before, "the first calibration"); err != nil {
		return nil, nil, fmt.Errorf("--recalibrate: %w", err)
	}
	var rows []bench.Row
	var out []bench.Summary
	for _, n := range f.concurrency {
		cals = []sim.Preset{before}
		r, err := bench.Compare(cmd.Context(), run.setup, systems, []int{n}, opts, f.rounds, progressBar(cmd.ErrOrStderr()))
		if err != nil {
			return nil, nil, err
		}
		both, err := bench.MergeCalibrations(o, cals...)
		if err != nil {
			return nil, nil, fmt.Errorf("--recalibrate: %w", err)
		}
		pm, err := predictModel(f, run, both, fmt.Sprintf("the calibrations around N=%d", n))
		if err != nil {
			return nil, nil, fmt.Errorf("--recalibrate: %w", err)
		}
		s := summarize(run, r, len(systems))
		if err := run.setup.AddPredictions(cmd.Context(), perfmodel.NewPlanner(perfmodel.Options{}), pm, r, s); err != nil {
			return nil, nil, fmt.Errorf("--recalibrate: %w", err)
		}
		rows, out, before = append(rows, r...), append(out, s...), cals[len(cals)-1]
	}
	return rows, out, nil
}

// summarize summarises rows, with the run's placement on every system run
// in this process.
func summarize(run benchRun, rows []bench.Row, systems int) []bench.Summary {
	out := bench.Summarize(rows, systems)
	for i := range out {
		if !bench.IsURL(out[i].System) {
			out[i].Placement = run.placement()
		}
	}
	return out
}

// predictModel builds the throughput model of a --systems run from a
// calibrated profile (named name in errors): r2r-random's routing at the
// run's p over the profile's step curves, with the run's prompts and
// outputs as the workload. The profile must have been calibrated under the
// run's placement and thread counts.
func predictModel(f benchFlags, run benchRun, preset sim.Preset, name string) (perfmodel.Model, error) {
	var m perfmodel.Model
	d := run.desc
	if d.algorithm != "r2r-random" || d.params["p-after"] != "" {
		return m, fmt.Errorf("the throughput model knows r2r-random's routing at a fixed p, not %s %s", d.algorithm, paramString(d.params))
	}
	p, err := strconv.ParseFloat(d.params["p"], 64)
	if err != nil {
		return m, fmt.Errorf("p %q: %w", d.params["p"], err)
	}
	placed := string(run.placed.Placement)
	if placed == "" {
		return m, errors.New("no system runs in this process")
	}
	if preset.Placement != "" && preset.Placement != placed {
		return m, fmt.Errorf("profile %s was calibrated under %s placement but the run is %s: give the %s profile (bench --calibrate --calibrate-placement %s) or --placement %s",
			name, preset.Placement, placed, placed, placed, preset.Placement)
	}
	for i, c := range preset.Calibration {
		// Models on cores have threads; simulated ones sleep the curves.
		if i < len(run.placed.Models) && c.Threads > 0 && run.placed.Models[i].Threads > 0 && run.placed.Models[i].Threads != c.Threads {
			mo := run.placed.Models[i]
			return m, fmt.Errorf("profile %s measured %s on %d threads but the run gives it %d (--threads %s=%d)", name, preset.Models[i], c.Threads, mo.Threads, mo.Name, c.Threads)
		}
	}
	m, err = withProfile(perfmodel.R2R(p, 1, 1), preset, placed, perfmodel.Workload{PromptLen: meanPromptLen(f, run.opts), OutputLen: f.maxTokens})
	if err != nil {
		return m, err
	}
	m.Delta = perfmodel.AutoDelta(m)
	return m, nil
}

// meanPromptLen returns the mean prompt length of a run: its prompts',
// or --prompt-len.
func meanPromptLen(f benchFlags, o bench.Options) int {
	n, sum := 0, 0
	for _, p := range o.Prompts {
		if p.IDs != nil {
			n, sum = n+1, sum+len(p.IDs)
		}
	}
	if n == 0 {
		return f.promptLen
	}
	return (sum + n/2) / n
}

// compareSystems lists the systems --systems and --url name.
func compareSystems(f benchFlags) ([]string, error) {
	var systems []string
	if f.compare.systems != "" {
		for s := range strings.SplitSeq(f.compare.systems, ",") {
			if s = strings.TrimSpace(s); s == "all" {
				systems = append(systems, bench.Systems()...)
			} else {
				systems = append(systems, s)
			}
		}
	}
	systems = append(systems, f.models.urls...)
	for _, s := range systems {
		if bench.SystemAbout(s) == "" {
			return nil, fmt.Errorf("--systems: unknown system %q (have %s, all, or a server's [LABEL=]URL)", s, strings.Join(bench.Systems(), ", "))
		}
	}
	return systems, nil
}

// progressBar draws bench.Compare's progress on w.
func progressBar(w io.Writer) func(done, total int, r bench.Row) {
	start := time.Now()
	return func(done, total int, r bench.Row) {
		const width = 30
		bar := strings.Repeat("=", width*done/total) + strings.Repeat(" ", width-width*done/total)
		eta := time.Duration(float64(time.Since(start)) * float64(total-done) / float64(done)).Round(time.Second)
		fmt.Fprintf(w, "\r[%s] %d/%d %-14s N=%-3d %7.1f tok/s  eta %v   ", bar, done, total, r.System, r.Concurrency, r.TokensPerSecond, eta)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

// plotCompare draws throughput against concurrency when --plot is given.
func plotCompare(cmd *cobra.Command, f benchFlags, d benchDesc, out []bench.Summary) error {
	if f.compare.plotDir == "" {
		return nil
	}
	var pts []plot.Point
	for _, r := range out {
		pts = append(pts, plot.Point{Series: r.System, X: float64(r.Concurrency), Y: r.TokensPerSecond})
	}
	path := filepath.Join(f.compare.plotDir, "throughput.png")
	title := fmt.Sprintf("Throughput vs concurrency (%s, %s, %s)", d.algorithm, paramString(d.params), d.label)
	if err := plot.Lines(path, title, "concurrent requests (N)", "committed tokens/s", pts, true); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "wrote", path)
	return nil
}

// printCompare prints the side-by-side table.
func printCompare(w io.Writer, f benchFlags, run benchRun, systems []string, rows []bench.Row, out []bench.Summary) {
	fmt.Fprintf(w, "%s, %s, %s, %v per point in %d interleaved rounds\n", run.desc.algorithm, paramString(run.desc.params), run.desc.label, f.duration, max(f.rounds, 1))
	if pl := run.placement(); pl != "" {
		fmt.Fprintf(w, "placement %s\n", pl)
	}
	pred := f.compare.predict != "" || f.compare.recalibrate
	fmt.Fprintf(w, "%-16s %4s %9s%s %9s %9s %9s %9s %9s %6s  %s\n", "system", "N", "tok/s", predColumns(pred, "predicted", "meas/pred", "steps/curve", "@speed"), "LLM share", "TTFT p50", "TTFT p99",
		"TPOT p50", "TPOT p99", "done", "vs "+systems[0]+" (paired, 95%)")
	for i, r := range out {
		printCompareRow(w, r, rows[i], i%len(systems) == 0, pred)
	}
	printCompareNotes(w, f, systems, out, pred)
}

// predColumns formats the prediction columns, or nothing without predictions.
func predColumns(pred bool, a, b, c, d string) string {
	if !pred {
		return ""
	}
	return fmt.Sprintf(" %9s %9s %11s %9s", a, b, c, d)
}

// latencyMS formats a latency in milliseconds, or - without samples (n).
func latencyMS(v float64, n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "ms"
}

// printCompareRow prints one system's row at one concurrency; first says
// the row is of the system the others are compared with.
func printCompareRow(w io.Writer, r bench.Summary, row bench.Row, first, pred bool) {
	nt, np := len(row.TTFT), len(row.TPOT)
	vs := "-"
	switch {
	case first:
	case len(row.PerRound) >= 2:
		vs = fmt.Sprintf("%+.1f ± %.1f", r.VsFirst, r.VsFirstCI95)
	default:
		vs = fmt.Sprintf("%+.1f", r.VsFirst)
	}
	share := strconv.FormatFloat(r.LargeShare, 'f', 3, 64)
	switch {
	case r.LargeShareUnknown:
		share = "-"
	case r.LargeShareFromServer:
		share += "*"
	}
	pv, ratio, steps, speed := "-", "-", "-", "-"
	if r.Predicted > 0 {
		pv, ratio = strconv.FormatFloat(r.Predicted, 'f', 1, 64), strconv.FormatFloat(r.MeasuredOverPredicted, 'f', 3, 64)
	}
	if r.StepOverCurve != nil {
		steps = stepRatios(r.StepOverCurve)
	}
	if r.PredictedAtStepSpeed > 0 {
		speed = strconv.FormatFloat(r.MeasuredOverAtStepSpeed, 'f', 3, 64)
	}
	fmt.Fprintf(w, "%-16s %4d %9.1f%s %9s %9s %9s %9s %9s %6d  %s\n", r.System, r.Concurrency, r.TokensPerSecond, predColumns(pred, pv, ratio, steps, speed),
		share, latencyMS(r.TTFTp50MS, nt), latencyMS(r.TTFTp99MS, nt), latencyMS(r.TPOTp50MS, np), latencyMS(r.TPOTp99MS, np), r.Requests, vs)
}

// printCompareNotes prints the table's footnotes: the share's source, the
// predictions' curves, the systems, and the clients' own CPU use.
func printCompareNotes(w io.Writer, f benchFlags, systems []string, out []bench.Summary, pred bool) {
	if slices.ContainsFunc(out, func(r bench.Summary) bool { return r.LargeShareFromServer }) {
		fmt.Fprintln(w, "  * the server's own account over the requests that finished (its stream attributes no token); few finished requests lean to those with fewer large-model tokens")
	}
	if pred {
		curves := f.compare.predict
		if f.compare.recalibrate {
			curves = "the mean of the calibrations taken just before and just after each concurrency's rounds"
			if f.compare.recalibrateEvery == "round" {
				curves = "the pointwise median of the calibrations taken just before each concurrency's rounds and after each of them"
			}
		}
		fmt.Fprintf(w, "  predicted: the throughput model over the step curves of %s (tokenrouter: the Markov chain, its thresholds in the JSON; lockstep, slm-only, llm-only: closed forms); -: no formula\n", curves)
		fmt.Fprintln(w, "  steps/curve: each model's steps in the run over its calibrated curve for the same steps (machine drift since calibration); @speed: measured over the prediction with the curves scaled by it")
	}
	for _, s := range systems {
		fmt.Fprintf(w, "  %-15s %s\n", s, bench.SystemAbout(s))
	}
	for _, r := range out {
		if r.ClientCores > 0 {
			fmt.Fprintf(w, "  %s N=%d: bench's own clients kept %.3f cores busy while it was measured (CPU a server on this machine did not have)\n", r.System, r.Concurrency, r.ClientCores)
		}
	}
}

func paramString(p map[string]string) string {
	var kv []string
	for k, v := range p {
		kv = append(kv, k+"="+v)
	}
	if len(kv) == 0 {
		return "no parameters"
	}
	return strings.Join(kv, " ")
}

// writeCompareCSV writes the rows; with predicted, also each row's
// prediction and measured/predicted ratio (empty where none).
func writeCompareCSV(path string, rows []bench.Summary, predicted bool) (err error) {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--csv: %w", err)
	}
	defer func() {
		if cerr := fh.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("--csv: %w", cerr)
		}
	}()
	w := csv.NewWriter(fh)
	head := []string{"system", "concurrency", "tokens_per_second", "tokens", "seconds", "large_model_share",
		"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "requests_completed", "vs_first_tokens_per_second", "vs_first_ci95"}
	if predicted {
		head = append(head, "predicted_tokens_per_second", "measured_over_predicted", "step_over_curve", "predicted_at_step_speed", "measured_over_predicted_at_step_speed")
	}
	_ = w.Write(head)
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, r := range rows {
		rec := []string{r.System, strconv.Itoa(r.Concurrency), f(r.TokensPerSecond), strconv.Itoa(r.Tokens), f(r.Seconds),
			f(r.LargeShare), f(r.TTFTp50MS), f(r.TTFTp99MS), f(r.TPOTp50MS), f(r.TPOTp99MS), strconv.Itoa(r.Requests), f(r.VsFirst), f(r.VsFirstCI95)}
		switch {
		case !predicted:
		case r.Predicted > 0:
			rec = append(rec, f(r.Predicted), strconv.FormatFloat(r.MeasuredOverPredicted, 'f', 4, 64), stepRatios(r.StepOverCurve), "", "")
			if r.PredictedAtStepSpeed > 0 {
				rec[len(rec)-2], rec[len(rec)-1] = f(r.PredictedAtStepSpeed), strconv.FormatFloat(r.MeasuredOverAtStepSpeed, 'f', 4, 64)
			}
		default:
			rec = append(rec, "", "", "", "", "")
		}
		_ = w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("--csv: %w", err)
	}
	return nil
}

// plotValidate draws predicted against measured throughput per threshold.
func plotValidate(cmd *cobra.Command, f benchFlags, rep bench.ValidateReport) error {
	if f.compare.plotDir == "" {
		return nil
	}
	var pts []plot.Point
	for _, p := range rep.Points {
		pts = append(pts, plot.Point{Series: fmt.Sprintf("N=%d", p.Concurrency), X: p.Predicted, Y: p.TokensPerSecond,
			Label: "B=" + perfmodel.FormatB(p.Thresholds)})
	}
	path := filepath.Join(f.compare.plotDir, "validate.png")
	title := fmt.Sprintf("Throughput model vs runtime (%s %s, L=%v ms, max-wait %gms)", rep.Algorithm, paramString(rep.Params), rep.LatencyMS, rep.MaxWaitMS)
	if err := plot.Scatter(path, title, "predicted tokens/s (Markov chain)", "measured tokens/s", pts, true); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "wrote", path)
	return nil
}

// stepRatios formats per-model step ratios as "1.08/0.97".
func stepRatios(r []float64) string {
	s := make([]string, len(r))
	for i, x := range r {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, "/")
}
