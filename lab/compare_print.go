package lab

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/bench/plot"
)

// plotCompare draws throughput against concurrency into dir, if set.
func plotCompare(dir string, s bench.Spec, out []bench.Summary) error {
	if dir == "" {
		return nil
	}
	var pts []plot.Point
	for _, r := range out {
		pts = append(pts, plot.Point{Series: r.System, X: float64(r.Concurrency), Y: r.TokensPerSecond})
	}
	path := filepath.Join(dir, "throughput.png")
	title := fmt.Sprintf("Throughput vs concurrency (%s, %s, %s)", s.Algorithm, paramString(s.Params), s.Label)
	if err := plot.Lines(path, title, "concurrent requests (N)", "committed tokens/s", pts, true); err != nil {
		return err
	}
	fmt.Fprintln(s.Progress, "wrote", path)
	return nil
}

// print prints the side-by-side table.
func (c CompareRun) print(w io.Writer, run bench.Prepared, systems []string, rows []bench.Row, out []bench.Summary) {
	s := run.Spec
	fmt.Fprintf(w, "%s, %s, %s, %v per point in %d interleaved rounds\n", s.Algorithm, paramString(s.Params), s.Label, s.Loop.Duration, max(c.Rounds, 1))
	if pl := run.Placement(); pl != "" {
		fmt.Fprintf(w, "placement %s\n", pl)
	}
	pred := c.Predict != "" || c.Recalibrate
	fmt.Fprintf(w, "%-16s %4s %9s%s %9s %9s %9s %9s %9s %6s  %s\n", "system", "N", "tok/s", predColumns(pred, "predicted", "meas/pred", "steps/curve", "@speed"), "LLM share", "TTFT p50", "TTFT p99",
		"TPOT p50", "TPOT p99", "done", "vs "+systems[0]+" (paired, 95%)")
	for i, r := range out {
		printCompareRow(w, r, rows[i], i%len(systems) == 0, pred)
	}
	c.printNotes(w, systems, out, pred)
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

// printNotes prints the table's footnotes: the share's source, the
// predictions' curves, the systems, and the clients' own CPU use.
func (c CompareRun) printNotes(w io.Writer, systems []string, out []bench.Summary, pred bool) {
	if slices.ContainsFunc(out, func(r bench.Summary) bool { return r.LargeShareFromServer }) {
		fmt.Fprintln(w, "  * the server's own account over the requests that finished (its stream attributes no token); few finished requests lean to those with fewer large-model tokens")
	}
	if pred {
		curves := c.Predict
		if c.Recalibrate {
			curves = "the mean of the calibrations taken just before and just after each concurrency's rounds"
			if c.RecalibrateEvery == "round" {
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

// paramString formats algorithm parameters as "k=v k=v".
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

// stepRatios formats per-model step ratios as "1.08/0.97".
func stepRatios(r []float64) string {
	s := make([]string, len(r))
	for i, x := range r {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, "/")
}
