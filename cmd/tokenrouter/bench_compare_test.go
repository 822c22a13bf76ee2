package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/lab"
)

// fastProfile writes a two-model sim profile with short steps.
func fastProfile(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fast.json")
	body := `{"name":"fast","models":[{"name":"slm","base_ms":0.5},{"name":"llm","base_ms":2}]}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchSystemsSideBySide(t *testing.T) {
	dir := t.TempDir()
	out, err := runCmd(t, "bench", "compare", "--profile", fastProfile(t, dir), "--systems", "tokenrouter,lockstep,slm-only",
		"--thresholds", "1,2", "--concurrency", "1,3", "--duration", "400ms", "--warmup", "50ms", "--rounds", "2",
		"--max-tokens", "20", "--format", "json", "--csv", filepath.Join(dir, "rows.csv"), "--plot", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rows []bench.Summary
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "[{"):]), &rows); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		if r.Tokens == 0 || r.Requests == 0 || r.TTFTp50MS <= 0 || r.TPOTp99MS < r.TPOTp50MS {
			t.Errorf("row %+v", r)
		}
		// Equal slices: the mean per-round difference from the first
		// system is the difference of the overall rates.
		first := rows[i-i%3]
		if math.Abs(r.VsFirst-(r.TokensPerSecond-first.TokensPerSecond)) > 1e-6 || r.VsFirstCI95 < 0 || (i%3 == 0 && r.VsFirstCI95 != 0) {
			t.Errorf("row %+v: vs first %v ± %v", r, r.VsFirst, r.VsFirstCI95)
		}
		if r.System == "slm-only" && r.LargeShare != 0 {
			t.Errorf("slm-only large share %v", r.LargeShare)
		}
	}
	fh, err := os.Open(filepath.Join(dir, "rows.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(fh).ReadAll()
	fh.Close()
	if err != nil || len(recs) != 7 || recs[0][0] != "system" {
		t.Fatalf("csv: %v, %d records", err, len(recs))
	}
	img, err := os.Open(filepath.Join(dir, "throughput.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if _, err := png.Decode(img); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "bench", "compare", "--systems", "tokenrouter,nope"); err == nil || !strings.Contains(err.Error(), "unknown system") {
		t.Fatalf("unknown system: %v", err)
	}
}

// TestCalibrateWritesALoadableProfile calibrates a pair of real models
// (stories260K twice) under both placements, then plans with and runs the
// sim engine from the profiles it wrote.
func TestCalibrateWritesALoadableProfile(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(modelsDir(t), "stories260K.gguf")
	out, err := runCmd(t, "bench", "calibrate", "--model", "small="+model, "--model", "large="+model,
		"--calibrate-batches", "1,2,4", "--calibrate-tokens", "1,2", "--calibrate-contexts", "8,24", "--calibrate-repeats", "2",
		"--calibrate-prompt-batches", "1,4", "--prompt-len", "6",
		"--calibrate-plan", "2-3", "--max-tokens", "64", "--out", filepath.Join(dir, "pair.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"fit max error", "interference", "time-shared placement", "best B"} {
		if !strings.Contains(out, want) {
			t.Fatalf("report lacks %q:\n%s", want, out)
		}
	}
	for _, pl := range []string{"partitioned", "time-shared"} {
		path := filepath.Join(dir, "pair."+pl+".json")
		p, err := sim.LoadPreset(path)
		if err != nil {
			t.Fatal(err)
		}
		// 3 batches × 2 token counts at context 8, decodes of 1, 2 and 4 at
		// 24, and prompt-sized steps (6 tokens a sequence) of 1 and 4.
		if p.Placement != pl || len(p.Models) != 2 || p.Models[0] != "small" || len(p.Calibration) != 2 || len(p.Calibration[0].Points) != 11 {
			t.Fatalf("%s: %+v", path, p)
		}
		if last := p.Calibration[0].Points[10]; last.Batch != 4 || last.Extend != 20 || !(p.Calibration[0].MeanOverMedian > 0) {
			t.Fatalf("%s: last point %+v, mean over median %v", path, last, p.Calibration[0].MeanOverMedian)
		}
		out, err = runCmd(t, "plan", "--profile", path, "--concurrency", "3", "--b0", "1", "--output-len", "64", "--format", "json")
		if err != nil || !strings.Contains(out, `"best": true`) {
			t.Fatalf("plan on the calibrated profile: %v\n%s", err, out)
		}
	}
	out, err = runCmd(t, "bench", "run", "--profile", filepath.Join(dir, "pair.partitioned.json"), "--thresholds", "1,2", "--concurrency", "2",
		"--duration", "200ms", "--warmup", "20ms", "--max-tokens", "16", "--format", "json")
	if err != nil || !strings.Contains(out, `"tokens_per_second"`) {
		t.Fatalf("bench on the calibrated profile: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "plan", "--profile", filepath.Join(dir, "pair.partitioned.json"), "--placement", "time-shared"); err == nil {
		t.Fatal("plan used a partitioned profile for time-shared placement")
	}
}

// TestBenchSystemsPredict calibrates the real tiny pair (partitioned, one
// thread each), runs every system with a formula and std-serving beside it
// with --predict, and checks each row's prediction, the CSV's columns, the
// table's and that a profile of another placement or thread count is
// refused before anything runs.
func TestBenchSystemsPredict(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "pair.json")
	if out, err := runBenchCmd(t, "calibrate", append(tinyPairArgs(t), "--calibrate-placement", "partitioned", "--calibrate-cores", "2",
		"--calibrate-batches", "1,2,4", "--calibrate-tokens", "1,2", "--calibrate-contexts", "8,24", "--calibrate-repeats", "2",
		"--calibrate-plan", "", "--out", prof)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	base := append(tinyPairArgs(t), "--placement", "partitioned", "--threads", "1", "--predict", prof, "--thresholds", "1,2", "--max-tokens", "20")
	systems := []string{"tokenrouter-auto", "tokenrouter", "tokenrouter-b1", "lockstep", "std-serving", "slm-only", "llm-only"}
	csvPath := filepath.Join(dir, "rows.csv")
	out, err := runBenchCmd(t, "compare", slices.Concat(base, []string{"--systems", strings.Join(systems, ","), "--concurrency", "1,3", "--duration", "300ms",
		"--warmup", "50ms", "--rounds", "1", "--format", "json", "--csv", csvPath})...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rows []bench.Summary
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(rows) != 2*len(systems) {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.System == "std-serving" {
			if r.Predicted != 0 || r.MeasuredOverPredicted != 0 {
				t.Errorf("std-serving has no formula, got %+v", r)
			}
			continue
		}
		if !(r.Predicted > 0) || r.TokensPerSecond <= 0 || math.Abs(r.MeasuredOverPredicted-r.TokensPerSecond/r.Predicted) > 1e-9 || r.PredictedMethod == "" {
			t.Errorf("%s N=%d: measured %.1f, predicted %.1f (%s), ratio %v", r.System, r.Concurrency, r.TokensPerSecond, r.Predicted, r.PredictedMethod, r.MeasuredOverPredicted)
		}
		if strings.HasPrefix(r.System, "tokenrouter") && len(r.PredictedB) != 2 {
			t.Errorf("%s N=%d: predicted thresholds %v", r.System, r.Concurrency, r.PredictedB)
		}
		// Every model that stepped has its steps priced on its curve, and
		// only those: slm-only never steps the large model.
		stepped := []bool{r.System != "llm-only", r.System != "slm-only"}
		if len(r.StepOverCurve) != 2 || (r.StepOverCurve[0] > 0) != stepped[0] || (r.StepOverCurve[1] > 0) != stepped[1] ||
			!(r.PredictedAtStepSpeed > 0) || math.Abs(r.MeasuredOverAtStepSpeed-r.TokensPerSecond/r.PredictedAtStepSpeed) > 1e-9 {
			t.Errorf("%s N=%d: steps over curve %v, at step speed %.1f (%.3f)", r.System, r.Concurrency, r.StepOverCurve, r.PredictedAtStepSpeed, r.MeasuredOverAtStepSpeed)
		}
		t.Logf("%-16s N=%d measured %7.1f predicted %7.1f (%s)", r.System, r.Concurrency, r.TokensPerSecond, r.Predicted, r.PredictedMethod)
	}
	fh, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(fh).ReadAll()
	fh.Close()
	col := slices.Index(recs[0], "predicted_tokens_per_second")
	if err != nil || len(recs) != len(rows)+1 || col < 0 || len(recs[0]) != col+5 || recs[5][col] != "" || recs[4][col] == "" || recs[4][col+2] == "" {
		t.Fatalf("csv: %v: %q", err, recs)
	}
	out, err = runBenchCmd(t, "compare", slices.Concat(base, []string{"--systems", "lockstep,std-serving", "--concurrency", "2", "--duration", "200ms", "--warmup", "20ms"})...)
	t.Log(out)
	if err != nil || !strings.Contains(out, "predicted") || !strings.Contains(out, "meas/pred") {
		t.Fatalf("table: %v\n%s", err, out)
	}
	// The simulated engine stepping the calibrated curves takes the same
	// prediction.
	out, err = runBenchCmd(t, "compare", "--profile", prof, "--predict", prof, "--systems", "lockstep,slm-only", "--concurrency", "2", "--duration", "200ms",
		"--warmup", "20ms", "--max-tokens", "20", "--format", "json")
	if err != nil || strings.Count(out, `"predicted_tokens_per_second"`) != 2 {
		t.Fatalf("sim engine: %v\n%s", err, out)
	}
	if _, err := runBenchCmd(t, "run", "--predict", prof, "--duration", "10ms"); err == nil || !strings.Contains(err.Error(), "unknown flag: --predict") {
		t.Errorf("bench run --predict: %v", err)
	}
	for _, c := range []struct{ placement, threads, want string }{
		{"time-shared", "1", "calibrated under partitioned placement but the run is time-shared"},
		{"partitioned", "2", "on 1 threads but the run gives it 2"},
	} {
		_, err := runBenchCmd(t, "compare", append(tinyPairArgs(t), "--placement", c.placement, "--threads", c.threads, "--predict", prof,
			"--systems", "lockstep", "--concurrency", "2", "--duration", "10ms", "--max-tokens", "20")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s placement, %s threads: %v, want %q", c.placement, c.threads, err, c.want)
		}
	}
}

// TestBenchSystemsRecalibrate predicts each concurrency's rows from
// calibrations of the run's models taken just before and after them.
func TestBenchSystemsRecalibrate(t *testing.T) {
	args := append(tinyPairArgs(t), "--placement", "time-shared", "--threads", "1", "--recalibrate", "--calibrate-batches", "1,2,4",
		"--calibrate-tokens", "1,2", "--calibrate-contexts", "8,24", "--calibrate-repeats", "1", "--max-tokens", "20",
		"--systems", "tokenrouter,lockstep,slm-only", "--concurrency", "1,3", "--duration", "300ms", "--warmup", "50ms", "--rounds", "1")
	cmd := newBenchCmd()
	var out, log bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&log)
	cmd.SetArgs(slices.Concat([]string{"compare"}, args, []string{"--format", "json"}))
	cmd.SetContext(context.Background())
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var rows []bench.Summary
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		if r.Concurrency != []int{1, 3}[i/3] || !(r.Predicted > 0) || len(r.StepOverCurve) != 2 || !(r.PredictedAtStepSpeed > 0) {
			t.Errorf("%s N=%d: predicted %.1f, steps over curve %v, at step speed %.1f", r.System, r.Concurrency, r.Predicted, r.StepOverCurve, r.PredictedAtStepSpeed)
		}
	}
	for _, n := range []string{"calibrated before N=1 ", "calibrated after N=1 round 1 ", "calibrated after N=3 round 1 "} {
		if strings.Count(log.String(), n) != 1 {
			t.Errorf("want one %q in the log:\n%s", n, log.String())
		}
	}
	table, err := runBenchCmd(t, "compare", args...)
	if err != nil || !strings.Contains(table, "calibrations taken just before and just after each concurrency's rounds") || !strings.Contains(table, "steps/curve") {
		t.Fatalf("table: %v\n%s", err, table)
	}
	// --recalibrate-every round: a calibration after each of N=1's two rounds.
	log.Reset()
	cmd = newBenchCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(&log)
	cmd.SetArgs(append(slices.Concat([]string{"compare"}, args[:len(args)-8]), "--concurrency", "1", "--duration", "400ms", "--warmup", "50ms", "--rounds", "2", "--recalibrate-every", "round"))
	cmd.SetContext(context.Background())
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, n := range []string{"calibrated before N=1 ", "calibrated after N=1 round 1 ", "calibrated after N=1 round 2 "} {
		if strings.Count(log.String(), n) != 1 {
			t.Errorf("--recalibrate-every round: want one %q in the log:\n%s", n, log.String())
		}
	}
	if _, err := runBenchCmd(t, "compare", append(args, "--predict", "x.json")...); err == nil || !strings.Contains(err.Error(), "drop --predict") {
		t.Errorf("--recalibrate with --predict: %v", err)
	}
	if _, err := runBenchCmd(t, "run", "--recalibrate", "--duration", "10ms"); err == nil || !strings.Contains(err.Error(), "unknown flag: --recalibrate") {
		t.Errorf("bench run --recalibrate: %v", err)
	}
}

// validateReport runs bench validate with args and --format json and
// returns the validation report and the log.
func validateReport(t *testing.T, args ...string) (lab.ValidateOutput, string) {
	t.Helper()
	cmd := newBenchCmd()
	var out, log bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&log)
	cmd.SetArgs(slices.Concat([]string{"validate"}, args, []string{"--format", "json"}))
	cmd.SetContext(context.Background())
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var rep lab.ValidateOutput
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return rep, log.String()
}

// TestValidateRecalibrates validates the real tiny pair with calibrations
// before the first concurrency and after each: each N reports the step
// times it was predicted from.
func TestValidateRecalibrates(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "pair.json")
	grid := []string{"--calibrate-batches", "1,2,4", "--calibrate-tokens", "1,2", "--calibrate-contexts", "8,24", "--calibrate-repeats", "1"}
	if out, err := runBenchCmd(t, "calibrate", slices.Concat(tinyPairArgs(t), []string{"--calibrate-placement", "partitioned", "--calibrate-cores", "2",
		"--calibrate-plan", "", "--out", prof}, grid)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	rep, log := validateReport(t, slices.Concat(tinyPairArgs(t), []string{"--profile", prof, "--recalibrate", "--concurrency", "2,3",
		"--duration", "300ms", "--warmup", "50ms", "--rounds", "1", "--retries", "0", "--max-tokens", "20"}, grid)...)
	if n := strings.Count(log, "validate: calibrated "); n != 3 || len(rep.PerConcurrency) != 2 || len(rep.Points) == 0 {
		t.Fatalf("%d calibrations, report %+v\n%s", n, rep, log)
	}
	for _, s := range rep.PerConcurrency {
		if len(s.LatencyMS) != 2 || !(s.LatencyMS[0] > 0) || !(s.LatencyMS[1] > 0) || len(s.Calibrations) != 2 || len(s.Calibrations[1].Calibration) != 2 {
			t.Errorf("N=%d: calibrated step times %v", s.Concurrency, s.LatencyMS)
		}
	}
	// The calibration after N=2 is the one before N=3.
	if a, b := rep.PerConcurrency[0].Calibrations, rep.PerConcurrency[1].Calibrations; len(a) == 2 && len(b) == 2 &&
		!reflect.DeepEqual(a[1].Calibration, b[0].Calibration) {
		t.Errorf("N=3 was not priced from the calibration after N=2")
	}
	for _, pt := range rep.Points {
		if !(pt.Predicted > 0) || !(pt.Seconds > 0) || len(pt.StepOverCurve) != 2 {
			t.Errorf("point %+v", pt)
		}
	}
	if _, err := runBenchCmd(t, "validate", "--recalibrate", "--concurrency", "2", "--duration", "100ms"); err == nil || !strings.Contains(err.Error(), "--model files") {
		t.Errorf("--recalibrate on a simulated profile: %v", err)
	}

	// --recalibrate-every round: a calibration after each of N=2's two
	// rounds, and N=2 priced on all three.
	rep, log = validateReport(t, slices.Concat(tinyPairArgs(t), []string{"--profile", prof, "--recalibrate", "--recalibrate-every", "round", "--concurrency", "2",
		"--duration", "400ms", "--warmup", "50ms", "--rounds", "2", "--retries", "0", "--max-tokens", "20"}, grid)...)
	for _, want := range []string{"calibrated before N=2 ", "calibrated after N=2 round 1 ", "calibrated after N=2 round 2 "} {
		if strings.Count(log, want) != 1 {
			t.Errorf("want one %q in the log:\n%s", want, log)
		}
	}
	if len(rep.PerConcurrency) != 1 || len(rep.PerConcurrency[0].Calibrations) != 3 {
		t.Fatalf("--recalibrate-every round: %+v", rep.PerConcurrency)
	}
	// --placement time-shared runs and calibrates the models time-shared;
	// without --recalibrate, the profile's placement must match.
	rep, _ = validateReport(t, slices.Concat(tinyPairArgs(t), []string{"--profile", prof, "--recalibrate", "--placement", "time-shared", "--concurrency", "2",
		"--duration", "300ms", "--warmup", "50ms", "--rounds", "1", "--retries", "0", "--max-tokens", "20"}, grid)...)
	if rep.Placement != "time-shared" || len(rep.PerConcurrency) != 1 || len(rep.PerConcurrency[0].Calibrations) != 2 ||
		rep.PerConcurrency[0].Calibrations[0].Placement != "time-shared" {
		t.Fatalf("--placement time-shared: placement %q, calibrations %+v", rep.Placement, rep.PerConcurrency)
	}
	if _, err := runBenchCmd(t, "validate", slices.Concat(tinyPairArgs(t), []string{"--profile", prof, "--placement", "time-shared", "--concurrency", "2",
		"--duration", "100ms"})...); err == nil || !strings.Contains(err.Error(), "was calibrated for partitioned placement") {
		t.Errorf("--placement time-shared on a partitioned profile: %v", err)
	}
	if _, err := runBenchCmd(t, "validate", "--recalibrate", "--recalibrate-every", "slice"); err == nil || !strings.Contains(err.Error(), "want concurrency or round") {
		t.Errorf("--recalibrate-every slice: %v", err)
	}
}
