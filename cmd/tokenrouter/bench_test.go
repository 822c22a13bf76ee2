package main

import (
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/lab"
)

// TestValidateJSON runs a tiny validation and checks the report's shape
// (no throughput assertions: timing on shared machines is noisy).
func TestValidateJSON(t *testing.T) {
	rep := validateJSON(t, "--duration", "300ms")
	if len(rep.Points) != 2 || len(rep.PerConcurrency) != 1 || rep.Params["p"] != "0.35" || rep.Profile != "paper-r2r" || !slices.Equal(rep.LatencyMS, []float64{6, 27.9}) {
		t.Fatalf("report %+v", rep)
	}
	for _, pt := range rep.Points {
		if pt.Concurrency != 2 || pt.Predicted <= 0 || pt.Method != "exact" || pt.Seconds <= 0 {
			t.Fatalf("point %+v", pt)
		}
		// The simulated engine sleeps its profile's step time, so its steps
		// take at least their curve's time (a late timer only adds), and
		// the prediction at that speed is the one the error is taken from.
		if len(pt.StepOverCurve) != 2 || pt.StepOverCurve[0] < 0.99 || pt.StepOverCurve[1] < 0.99 || !(pt.PredictedAtStepSpeed > 0) ||
			math.Abs(pt.ErrorAtStepSpeedPercent-100*(pt.TokensPerSecond-pt.PredictedAtStepSpeed)/pt.PredictedAtStepSpeed) > 1e-9 {
			t.Errorf("B=%v: steps over curve %v, at step speed %.2f (%+.2f%%)", pt.Thresholds, pt.StepOverCurve, pt.PredictedAtStepSpeed, pt.ErrorAtStepSpeedPercent)
		}
	}
	if s := rep.PerConcurrency[0]; s.PredictedBestB1 != 2 {
		t.Fatalf("predicted best B1 at N=2: %d, want 2", s.PredictedBestB1)
	}
}

// TestValidateBatchDependent validates a batch-dependent profile: the
// report carries its curves and an exact prediction per point.
func TestValidateBatchDependent(t *testing.T) {
	rep := validateJSON(t, "--duration", "200ms", "--profile", "paper-r2r-batched", "--max-step-dev", "1")
	if len(rep.Steps) != 2 || rep.Steps[0].Constant() || rep.Placement != "partitioned" || len(rep.Points) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, pt := range rep.Points {
		if pt.Predicted <= 0 || pt.Method != "exact" {
			t.Fatalf("point %+v", pt)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	for _, args := range [][]string{
		{"validate", "--algorithm", "single"},
		{"validate", "--param", "p-after=0.1", "--param", "switch-at=1s"},
		{"validate", "--system", "lockstep"}, // validation runs tokenrouter: no such flag
		{"validate", "--format", "yaml"},
	} {
		cmd := newBenchCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestValidateResolve checks that --resolve measures an unresolved best
// again within its budget: with one round no point has an interval, so the
// best and its runner-up are measured again until they are told apart or
// the budget runs out.
func TestValidateResolve(t *testing.T) {
	rep := validateJSON(t, "--duration", "200ms", "--resolve", "1s")
	s := rep.PerConcurrency[0]
	// Each extra round measures both points for 200 ms: 0.4 s.
	if s.ExtraSeconds < 0.4-1e-9 || s.ExtraSeconds > 1+1e-9 || s.RunnerUpB1 == 0 || s.Pairs < 2 {
		t.Fatalf("resolve: %+v", s)
	}
	extra := int(math.Round(s.ExtraSeconds / 0.4))
	for _, pt := range rep.Points {
		if pt.Slices != 1+extra || pt.Seconds < float64(pt.Slices)*0.2-1e-9 {
			t.Fatalf("point %+v: want %d slices", pt, 1+extra)
		}
	}
	if s.Resolved != (s.Margin-s.MarginCI95 > 0) {
		t.Fatalf("resolved=%v with margin %v ± %v", s.Resolved, s.Margin, s.MarginCI95)
	}
}

// validateJSON runs a one-round validation at N = 2 with extra flags and
// returns its JSON report.
func validateJSON(t *testing.T, extra ...string) lab.ValidateOutput {
	t.Helper()
	rep, _ := validateReport(t, append([]string{"--concurrency", "2", "--warmup", "50ms", "--rounds", "1", "--retries", "0"}, extra...)...)
	return rep
}

// TestBenchHelp checks that bench alone prints its help, listing every
// subcommand, and that the old mode flags are gone.
func TestBenchHelp(t *testing.T) {
	out, err := runCmd(t, "bench")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"run", "compare", "validate", "calibrate", "interference", "engine"} {
		if !strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("help lacks %q:\n%s", sub, out)
		}
	}
	for _, old := range []string{"--validate", "--calibrate", "--interference", "--systems"} {
		if _, err := runCmd(t, "bench", old); err == nil {
			t.Errorf("bench %s: no error", old)
		}
	}
}
