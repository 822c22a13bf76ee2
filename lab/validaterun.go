package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/bench/plot"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// ValidateRun is `tokenrouter bench validate`: the throughput model
// checked against the runtime (Validate) on a profile's simulated models,
// or on the real models it was calibrated on.
type ValidateRun struct {
	// Profile names the latency profile: a built-in sim profile or a
	// profile file (Calibrate's).
	Profile string
	// Engine is the engine of the profile's simulated models.
	Engine string
	// Agree is the simulated small model's agreement with the large one
	// (bench.SimModels).
	Agree float64
	// Algorithm and Params are the routing algorithm validated.
	Algorithm string
	// Params are its parameters.
	Params map[string]string
	// Thresholds and MaxWait are the launch policy (config.ParseLaunch);
	// every point sets its own tables.
	Thresholds string
	// MaxWait is the max-wait guard.
	MaxWait time.Duration
	// Speculate and BusDelay configure the routed system (bench.Setup).
	Speculate subserver.Speculation
	// BusDelay delays every event between sub-servers.
	BusDelay time.Duration
	// Models, if set, are the real models the profile was calibrated on,
	// small first: the points run on the cpu engine, placed as Placement
	// says.
	Models []config.Model
	// Placement is partitioned, time-shared or auto (with a profile, the
	// profile's placement).
	Placement string
	// KVReserveMB is the KV memory the cpu engines warm (bench.Kinds).
	KVReserveMB int
	// Recalibrate predicts every concurrency from calibrations of Models
	// as placed (ValidateConfig.Recalibrate) on the Calibrate grid, after
	// every round when RecalibrateEvery is "round" (else "concurrency").
	Recalibrate bool
	// RecalibrateEvery is "concurrency" or "round".
	RecalibrateEvery string
	// Calibrate is the grid Recalibrate measures.
	Calibrate CalibrateOptions
	// Config holds the measurement: Concurrency, Duration, Warmup,
	// Rounds, Tolerance, Retries, MaxLateness, MaxStepDev, Resolve,
	// MaxTokens, PromptLen and Seed. The deployment, the curves, the
	// placement, the recalibration and Progress are set from the fields
	// above.
	Config ValidateConfig
	// Plot, if set, is a folder validate.png is drawn into.
	Plot string
	// Format is table or json.
	Format string
	// Out receives the report, Progress the progress lines.
	Out, Progress io.Writer
}

// ValidateOutput is bench validate's JSON: the report and the profile it
// ran.
type ValidateOutput struct {
	// Profile names the profile validated.
	Profile string `json:"profile"`
	ValidateReport
}

// RunValidate runs v and writes its report to v.Out: a table, or
// ValidateOutput as JSON.
func RunValidate(ctx context.Context, v ValidateRun) error {
	if v.Format != "table" && v.Format != "json" {
		return fmt.Errorf("--format %q: want table or json", v.Format)
	}
	if v.Out == nil {
		v.Out = io.Discard
	}
	if v.Progress == nil {
		v.Progress = io.Discard
	}
	preset, err := sim.LoadPreset(v.Profile)
	if err != nil {
		return err
	}
	launch, err := config.ParseLaunch(v.Thresholds, len(preset.Models), v.MaxWait)
	if err != nil {
		return fmt.Errorf("--thresholds: %w", err)
	}
	vc := v.Config
	vc.Progress = v.Progress
	vc.Setup, vc.Steps, vc.Interference, vc.Placement, err = v.deployment(ctx, preset, launch)
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	if v.Recalibrate {
		if err := checkRecalibrateEvery(v.RecalibrateEvery); err != nil {
			return err
		}
		if len(v.Models) == 0 {
			return errors.New("validate --recalibrate: give the --model files the profile was calibrated on")
		}
		o := v.Calibrate
		vc.Recalibrate, vc.RecalibrateRounds = &o, v.RecalibrateEvery == "round"
	}
	rep, err := Validate(ctx, vc)
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	if err := plotValidate(v.Plot, v.Progress, rep); err != nil {
		return err
	}
	if v.Format == "json" {
		return json.NewEncoder(v.Out).Encode(ValidateOutput{Profile: preset.Name, ValidateReport: rep})
	}
	printValidate(v.Out, preset.Name, rep)
	return nil
}

// deployment is what bench validate measures and what its prediction
// assumes, under launch: the sim engine stepping the profile's curves or, with Models,
// the cpu engine placed as Placement says and predicted by the profile's
// curves (which must be of that placement) or, with Recalibrate, by curves
// calibrated during the run. Auto with a profile is the profile's
// placement; with Recalibrate it measures and picks, as bench does, and
// says what it chose on Progress.
func (v ValidateRun) deployment(ctx context.Context, preset sim.Preset, launch sched.Launch) (bench.Setup, []steptime.Curve, []float64, perfmodel.Placement, error) {
	ms := bench.SimModels(preset, v.Agree)
	for i := range ms {
		ms[i].Engine = v.Engine
	}
	setup := bench.Setup{Models: ms, Algorithm: v.Algorithm, Params: v.Params, Registry: builtin.Registry(),
		Launch: launch, Speculate: v.Speculate, BusDelay: v.BusDelay}
	placement, err := ParsePlacement("", preset.Placement)
	if err != nil {
		return setup, nil, nil, "", err
	}
	steps, inter := preset.Curves()
	if len(v.Models) == 0 {
		if placement == perfmodel.TimeShared {
			return setup, nil, nil, "", fmt.Errorf("profile %s is for time-shared placement: validate it on the cpu engine with its --model files", preset.Name)
		}
		return setup, steps, inter, placement, nil
	}
	placed, err := v.place(ctx, preset, placement)
	if err != nil {
		return setup, nil, nil, "", err
	}
	setup.Models, setup.Kinds, setup.TimeShared = placed.Models, placed.kinds, placed.TimeShared()
	return setup, steps, inter, perfmodel.Placement(placed.Placement), nil
}

// placedModels are real models as placed, with the kinds that open them.
type placedModels struct {
	loader.Placed
	kinds loader.Kinds
}

// place places v.Models: as the profile was calibrated (its placement and
// threads) unless Recalibrate.
func (v ValidateRun) place(ctx context.Context, preset sim.Preset, placement perfmodel.Placement) (placedModels, error) {
	ms := append([]config.Model(nil), v.Models...)
	if len(ms) != len(preset.Models) {
		return placedModels{}, fmt.Errorf("%d --model files for the %d models of profile %s", len(ms), len(preset.Models), preset.Name)
	}
	want, err := config.ParsePlacement(v.Placement)
	if err != nil {
		return placedModels{}, fmt.Errorf("--placement: %w", err)
	}
	if !v.Recalibrate {
		// The profile's curves hold for the placement and threads it was
		// calibrated with.
		switch {
		case want == config.PlacementAuto:
			want = config.Placement(placement)
		case want != config.Placement(placement):
			return placedModels{}, fmt.Errorf("--placement %s: profile %s was calibrated for %s placement (calibrate that placement, or --recalibrate)", want, preset.Name, placement)
		}
		for i := range ms {
			if i < len(preset.Calibration) && preset.Calibration[i].Threads > 0 {
				ms[i].Threads = preset.Calibration[i].Threads
			}
		}
	}
	ks, err := bench.Kinds(ctx, v.KVReserveMB, ms, true)
	if err != nil {
		return placedModels{}, err
	}
	placed, err := ks.Place(ctx, ms, want, loader.PlaceOptions{})
	if err != nil {
		return placedModels{}, err
	}
	if placed.Reason != "" {
		fmt.Fprintf(v.Progress, "placement: %s (%s)\n", placed.Placement, placed.Reason)
	}
	return placedModels{Placed: placed, kinds: ks}, nil
}

// plotValidate draws predicted against measured throughput per threshold
// into dir, if set.
func plotValidate(dir string, progress io.Writer, rep ValidateReport) error {
	if dir == "" {
		return nil
	}
	var pts []plot.Point
	for _, p := range rep.Points {
		pts = append(pts, plot.Point{Series: fmt.Sprintf("N=%d", p.Concurrency), X: p.Predicted, Y: p.TokensPerSecond,
			Label: "B=" + perfmodel.FormatB(p.Thresholds)})
	}
	path := filepath.Join(dir, "validate.png")
	title := fmt.Sprintf("Throughput model vs runtime (%s %s, L=%v ms, max-wait %gms)", rep.Algorithm, paramString(rep.Params), rep.LatencyMS, rep.MaxWaitMS)
	if err := plot.Scatter(path, title, "predicted tokens/s (Markov chain)", "measured tokens/s", pts, true); err != nil {
		return err
	}
	fmt.Fprintln(progress, "wrote", path)
	return nil
}

// printSteps prints step-time curves that depend on the batch.
func printSteps(w io.Writer, steps []steptime.Curve) {
	for i, c := range steps {
		if !c.Constant() {
			fmt.Fprintf(w, "  model %d: L = %s\n", i, c)
		}
	}
}

// latencies formats step latencies as "6, 27.9".
func latencies(ms []float64) string {
	return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ms)), ", "), "[]")
}
