package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
)

func TestParseConcurrency(t *testing.T) {
	got, err := parseConcurrency("2-4, 3,8")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{2, 3, 4, 8}) {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", "0", "4-2", "x", "2-y"} {
		if _, err := parseConcurrency(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPlanJSON(t *testing.T) {
	cmd := newPlanCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--algorithm", "r2r", "--p", "0.35", "--latency-ms", "6.0,27.9", "--concurrency", "2,3,4", "--b0", "1", "--format", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var rows []perfmodel.PlanRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows, want 9", len(rows))
	}
	want := map[[2]int]float64{{2, 1}: 98.96, {2, 2}: 110.32, {3, 1}: 142.34, {3, 2}: 158.12, {3, 3}: 151.89, {4, 1}: 187.19, {4, 2}: 195.44, {4, 3}: 207.95, {4, 4}: 190.74}
	best := map[int]int{}
	for _, r := range rows {
		w := want[[2]int{r.Concurrency, r.Thresholds[1]}]
		if r.TokensPerSecond == nil || math.Abs(*r.TokensPerSecond-w) > 0.05 || !r.Feasible || r.Method != "exact" || r.Thresholds[0] != 1 {
			t.Errorf("row %+v, want %.2f", r, w)
		}
		if r.Best {
			best[r.Concurrency] = r.Thresholds[1]
		}
	}
	if !maps.Equal(best, map[int]int{2: 2, 3: 2, 4: 3}) {
		t.Errorf("best %v", best)
	}
}

func TestPlanTableEnsemble(t *testing.T) {
	cmd := newPlanCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--algorithm", "ensemble", "--weights", "0.5,0.3,0.2", "--latency-ms", "6,12,27.9", "--concurrency", "2"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "infeasible") || !strings.Contains(s, "exact") || strings.Count(s, "\n") != 9 {
		t.Errorf("table:\n%s", s)
	}
}

// TestPlanFeedsServeAndBench writes a plan as JSON and gives it to serve
// and bench as their thresholds: each model gets the table of the plan's
// best B per concurrency.
func TestPlanFeedsServeAndBench(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.json")
	out, err := runCmd(t, "plan", "--concurrency", "2-4", "--b0", "1", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--engine", "sim", "--thresholds", "@" + path}); err != nil {
		t.Fatal(err)
	}
	cfg, err := serveConfig(cmd, flagsOf(t, cmd))
	if err != nil {
		t.Fatal(err)
	}
	l, err := cfg.Presets[0].Launch()
	if err != nil || l.Auto || !slices.Equal(l.Tables[1], sched.Table{2, 2, 2, 2, 3}) || !slices.Equal(l.Tables[0], sched.Table{1, 1, 1, 1, 1}) {
		t.Fatalf("serve --thresholds @plan.json: %+v, %v", l, err)
	}
	out, err = runCmd(t, "bench", "run", "--thresholds", "@"+path, "--concurrency", "4", "--profile", "zero", "--algorithm", "single",
		"--duration", "100ms", "--warmup", "10ms", "--max-tokens", "16", "--format", "json")
	if err == nil {
		t.Fatalf("a two-model plan accepted for the three-model profile zero: %s", out)
	}
	out, err = runCmd(t, "bench", "run", "--thresholds", "@"+path, "--concurrency", "4", "--duration", "300ms", "--warmup", "50ms",
		"--max-tokens", "64", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var row struct {
		Thresholds []int   `json:"thresholds"`
		TPS        float64 `json:"tokens_per_second"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &row); err != nil || !slices.Equal(row.Thresholds, []int{1, 3}) || row.TPS <= 0 {
		t.Fatalf("bench run --thresholds @plan.json at N=4: %+v, %v\n%s", row, err, out)
	}
}

// TestPlanReplicas: plan --replicas prices the small model's replicas (two
// replicas at twice the concurrency predict nearly twice the throughput
// of one on a profile whose steps grow with the batch), and a count per
// model is required.
func TestPlanReplicas(t *testing.T) {
	tps := func(args ...string) float64 {
		t.Helper()
		cmd := newPlanCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"--profile", "paper-r2r-batched", "--p", "0.1", "--b0", "1", "--b1", "1", "--format", "json"}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		var rows []perfmodel.PlanRow
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].TokensPerSecond == nil {
			t.Fatalf("rows %s: %v", out.String(), err)
		}
		return *rows[0].TokensPerSecond
	}
	one, two := tps("--concurrency", "8"), tps("--concurrency", "16", "--replicas", "2,1")
	if r := two / one; r < 1.8 || r > 2.05 {
		t.Fatalf("2 replicas at N=16: %.1f tok/s, 1 at N=8: %.1f (×%.2f, want about 2)", two, one, r)
	}
	cmd := newPlanCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"--replicas", "2", "--concurrency", "4"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--replicas") {
		t.Fatalf("one count for two models: %v", err)
	}
}
