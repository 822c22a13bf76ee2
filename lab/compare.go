package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// CompareRun is `tokenrouter bench compare`: several serving systems side
// by side at several concurrencies, interleaved (bench.Compare), with the
// throughput model's prediction beside each row on request.
type CompareRun struct {
	// Spec describes the models, the workload and the output.
	Spec bench.Spec
	// Systems is a comma list of systems (bench.Systems, "all" for every
	// one, "tokenrouter-auto", or a server's [LABEL=]URL).
	Systems string
	// URLs are servers measured after Systems, [LABEL=]URL each.
	URLs []string
	// Rounds is the number of interleaved slices per point.
	Rounds int
	// CSV, if set, is a file the rows are also written to.
	CSV string
	// Plot, if set, is a folder throughput.png is drawn into.
	Plot string
	// Predict, if set, is a calibrated profile the predictions are made
	// from; it must match the run's placement and threads.
	Predict string
	// Recalibrate predicts from curves calibrated on the run's models as
	// placed, before the first concurrency and after each (after each
	// round when RecalibrateEvery is "round"; else "concurrency").
	Recalibrate bool
	// RecalibrateEvery is "concurrency" or "round".
	RecalibrateEvery string
	// Calibrate is the grid Recalibrate measures.
	Calibrate CalibrateOptions
	// Progress, if set, is told after each slice (bench.Compare's
	// progress): with Recalibrate, done and total count one
	// concurrency's slices at a time.
	Progress func(done, total int, r bench.Row)
}

// Compare runs c and writes its report to c.Spec.Out: a table with notes,
// or the summaries as JSON; what it chose or met on the way goes to
// c.Spec.Progress.
func Compare(ctx context.Context, c CompareRun) error {
	s := c.Spec
	if s.Format != "table" && s.Format != "json" {
		return fmt.Errorf("--format %q: want table or json", s.Format)
	}
	systems, err := compareSystems(c.Systems, c.URLs)
	if err != nil {
		return err
	}
	if err := checkRecalibrateEvery(c.RecalibrateEvery); err != nil {
		return err
	}
	if c.Recalibrate && c.Predict != "" {
		return errors.New("--recalibrate calibrates the run's own curves: drop --predict")
	}
	run, err := bench.Prepare(ctx, s, slices.ContainsFunc(systems, func(s string) bool { return !bench.IsURL(s) }))
	if err != nil {
		return err
	}
	compare := c.compareOnce
	if c.Recalibrate {
		compare = c.compareRecalibrated
	}
	rows, out, err := compare(ctx, run, systems)
	if err != nil {
		return err
	}
	if c.CSV != "" {
		if err := writeCompareCSV(c.CSV, out, c.Predict != "" || c.Recalibrate); err != nil {
			return err
		}
	}
	if err := plotCompare(c.Plot, run.Spec, out); err != nil {
		return err
	}
	if s.Format == "json" {
		return json.NewEncoder(run.Spec.Out).Encode(out)
	}
	c.print(run.Spec.Out, run, systems, rows, out)
	return nil
}

// compareOnce runs bench.Compare over every concurrency, with
// predictions from c.Predict's profile if given.
func (c CompareRun) compareOnce(ctx context.Context, run bench.Prepared, systems []string) ([]bench.Row, []bench.Summary, error) {
	var pm perfmodel.Model
	if c.Predict != "" {
		preset, err := sim.LoadPreset(c.Predict)
		if err == nil {
			pm, err = predictModel(run, preset, c.Predict)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--predict: %w", err)
		}
	}
	rows, err := bench.Compare(ctx, run.Setup, systems, run.Spec.Concurrency, run.Options, c.Rounds, c.Progress)
	if err != nil {
		return nil, nil, err
	}
	out := summarize(run, rows, len(systems))
	if c.Predict != "" {
		if err := AddPredictions(ctx, run.Setup, perfmodel.NewPlanner(perfmodel.Options{}), pm, rows, out); err != nil {
			return nil, nil, fmt.Errorf("--predict: %w", err)
		}
	}
	return rows, out, nil
}

// checkRecalibrateEvery checks --recalibrate-every.
func checkRecalibrateEvery(every string) error {
	switch every {
	case "concurrency", "round":
		return nil
	}
	return fmt.Errorf("--recalibrate-every %q: want concurrency or round", every)
}

// compareRecalibrated runs bench.Compare one concurrency at a time,
// calibrating the run's models as placed before the first and after each
// (after each round with RecalibrateEvery "round"), and predicts each
// concurrency's rows from the merge of the calibrations before and during
// it (MergeCalibrations).
func (c CompareRun) compareRecalibrated(ctx context.Context, run bench.Prepared, systems []string) ([]bench.Row, []bench.Summary, error) {
	if len(run.Placed.Models) == 0 || slices.ContainsFunc(systems, bench.IsURL) {
		return nil, nil, errors.New("--recalibrate measures the systems run in this process, with --model files: drop --url and server systems")
	}
	progress := run.Spec.Progress
	calibrate := func(when string) (sim.Preset, error) {
		start := time.Now()
		p, err := CalibratePlaced(ctx, run.Setup.Kinds, run.Placed.Models, string(run.Placed.Placement), c.Calibrate)
		if err != nil {
			return sim.Preset{}, fmt.Errorf("--recalibrate: %w", err)
		}
		fmt.Fprintf(progress, "calibrated %s in %v: %s\n", when, time.Since(start).Round(100*time.Millisecond), CurveSummary(p))
		return p, nil
	}
	before, err := calibrate(fmt.Sprintf("before N=%d", run.Spec.Concurrency[0]))
	if err != nil {
		return nil, nil, err
	}
	opts := run.Options
	var cals []sim.Preset
	opts.AfterRound = func(_ context.Context, n, round int) error {
		if c.RecalibrateEvery != "round" && round < max(c.Rounds, 1)-1 {
			return nil
		}
		after, err := calibrate(fmt.Sprintf("after N=%d round %d", n, round+1))
		cals = append(cals, after)
		return err
	}
	if _, err := predictModel(run, before, "the first calibration"); err != nil {
		return nil, nil, fmt.Errorf("--recalibrate: %w", err)
	}
	var rows []bench.Row
	var out []bench.Summary
	for _, n := range run.Spec.Concurrency {
		cals = []sim.Preset{before}
		r, err := bench.Compare(ctx, run.Setup, systems, []int{n}, opts, c.Rounds, c.Progress)
		if err != nil {
			return nil, nil, err
		}
		both, err := MergeCalibrations(c.Calibrate, cals...)
		if err != nil {
			return nil, nil, fmt.Errorf("--recalibrate: %w", err)
		}
		pm, err := predictModel(run, both, fmt.Sprintf("the calibrations around N=%d", n))
		if err != nil {
			return nil, nil, fmt.Errorf("--recalibrate: %w", err)
		}
		s := summarize(run, r, len(systems))
		if err := AddPredictions(ctx, run.Setup, perfmodel.NewPlanner(perfmodel.Options{}), pm, r, s); err != nil {
			return nil, nil, fmt.Errorf("--recalibrate: %w", err)
		}
		rows, out, before = append(rows, r...), append(out, s...), cals[len(cals)-1]
	}
	return rows, out, nil
}

// summarize summarises rows, with the run's placement on every system run
// in this process.
func summarize(run bench.Prepared, rows []bench.Row, systems int) []bench.Summary {
	out := bench.Summarize(rows, systems)
	for i := range out {
		if !bench.IsURL(out[i].System) {
			out[i].Placement = run.Placement()
		}
	}
	return out
}

// predictModel builds the throughput model of a compared run from a
// calibrated profile (named name in errors): r2r-random's routing at the
// run's p over the profile's step curves, with the run's prompts and
// outputs as the workload. The profile must have been calibrated under the
// run's placement and thread counts.
func predictModel(run bench.Prepared, preset sim.Preset, name string) (perfmodel.Model, error) {
	var m perfmodel.Model
	d := run.Spec
	if d.Algorithm != "r2r-random" || d.Params["p-after"] != "" {
		return m, fmt.Errorf("the throughput model knows r2r-random's routing at a fixed p, not %s %s", d.Algorithm, paramString(d.Params))
	}
	p, err := strconv.ParseFloat(d.Params["p"], 64)
	if err != nil {
		return m, fmt.Errorf("p %q: %w", d.Params["p"], err)
	}
	placed := string(run.Placed.Placement)
	if placed == "" {
		return m, errors.New("no system runs in this process")
	}
	if preset.Placement != "" && preset.Placement != placed {
		return m, fmt.Errorf("profile %s was calibrated under %s placement but the run is %s: give the %s profile (bench calibrate --calibrate-placement %s) or --placement %s",
			name, preset.Placement, placed, placed, placed, preset.Placement)
	}
	for i, c := range preset.Calibration {
		// Models on cores have threads; simulated ones sleep the curves.
		if i < len(run.Placed.Models) && c.Threads > 0 && run.Placed.Models[i].Threads > 0 && run.Placed.Models[i].Threads != c.Threads {
			mo := run.Placed.Models[i]
			return m, fmt.Errorf("profile %s measured %s on %d threads but the run gives it %d (--threads %s=%d)", name, preset.Models[i], c.Threads, mo.Threads, mo.Name, c.Threads)
		}
	}
	m, err = WithProfile(perfmodel.R2R(p, 1, 1), preset, placed, perfmodel.Workload{PromptLen: meanPromptLen(d.Loop.PromptLen, run.Options), OutputLen: d.Loop.MaxTokens})
	if err != nil {
		return m, err
	}
	m.Delta = perfmodel.AutoDelta(m)
	for i, mo := range d.Models {
		if mo.Replicas > 1 {
			if m.Replicas == nil {
				m.Replicas = make([]int, len(d.Models))
			}
			m.Replicas[i] = mo.Replicas
		}
	}
	return m, nil
}

// meanPromptLen returns the mean prompt length of a run: its prompts',
// or promptLen.
func meanPromptLen(promptLen int, o bench.Options) int {
	n, sum := 0, 0
	for _, p := range o.Prompts {
		if p.IDs != nil {
			n, sum = n+1, sum+len(p.IDs)
		}
	}
	if n == 0 {
		return promptLen
	}
	return (sum + n/2) / n
}

// compareSystems lists the systems a comma list and URLs name.
func compareSystems(list string, urls []string) ([]string, error) {
	var systems []string
	if list != "" {
		for s := range strings.SplitSeq(list, ",") {
			if s = strings.TrimSpace(s); s == "all" {
				systems = append(systems, bench.Systems()...)
			} else {
				systems = append(systems, s)
			}
		}
	}
	systems = append(systems, urls...)
	for _, s := range systems {
		if bench.SystemAbout(s) == "" {
			return nil, fmt.Errorf("--systems: unknown system %q (have %s, all, or a server's [LABEL=]URL)", s, strings.Join(bench.Systems(), ", "))
		}
	}
	return systems, nil
}
