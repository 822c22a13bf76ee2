package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"testing"
)

func TestParseThresholds(t *testing.T) {
	if tabs, err := parseThresholds("auto", 2); err != nil || tabs != nil {
		t.Fatalf("auto: %v, %v", tabs, err)
	}
	tabs, err := parseThresholds("1,3", 2)
	if err != nil || len(tabs) != 2 || tabs[1][0] != 3 {
		t.Fatalf("1,3: %v, %v", tabs, err)
	}
	for _, bad := range []string{"1", "0,2", "x,1"} {
		if _, err := parseThresholds(bad, 2); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestValidateJSON runs a tiny validation and checks the report's shape
// (no throughput assertions: timing on shared machines is noisy).
func TestValidateJSON(t *testing.T) {
	cmd := newBenchCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--validate", "--concurrency", "2", "--duration", "300ms", "--warmup", "50ms", "--rounds", "1",
		"--retries", "0", "--format", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep validateReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rep.Points) != 2 || len(rep.PerConcurrency) != 1 || rep.P != 0.35 || !slices.Equal(rep.LatencyMS, []float64{6, 27.9}) {
		t.Fatalf("report %+v", rep)
	}
	for _, pt := range rep.Points {
		if pt.Concurrency != 2 || pt.Predicted <= 0 || pt.Method != "exact" || pt.Seconds <= 0 {
			t.Fatalf("point %+v", pt)
		}
	}
	if s := rep.PerConcurrency[0]; s.PredictedBestB1 != 2 {
		t.Fatalf("predicted best B1 at N=2: %d, want 2", s.PredictedBestB1)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--validate", "--algorithm", "single"},
		{"--validate", "--profile", "paper-r2r-batched"},
		{"--validate", "--param", "p-after=0.1", "--param", "switch-at=1s"},
		{"--validate", "--system", "lockstep"},
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
