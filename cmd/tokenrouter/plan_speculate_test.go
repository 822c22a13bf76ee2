package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
)

// TestPlanSpeculation: plan --depth predicts the speculative system beside
// the plain one at B*: depth 0 is the plain system exactly; full agreement
// at a depth no result reaches keeps every request in every small-model
// step (N/T0, here 4000/6 tok/s); --depth auto picks a depth, and a bus
// delay adds twice its length to each hand-off of the bound; bad depths
// fail.
func TestPlanSpeculation(t *testing.T) {
	run := func(args ...string) ([]planSpecRow, error) {
		cmd := newPlanCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"--concurrency", "4", "--b0", "1", "--format", "json"}, args...))
		if err := cmd.Execute(); err != nil {
			return nil, err
		}
		var rows []planSpecRow
		err := json.Unmarshal(out.Bytes(), &rows)
		return rows, err
	}
	rows, err := run("--depth", "0", "--agree", "0.5")
	if err != nil || len(rows) != 1 || rows[0].TokensPerSecond != rows[0].Plain || math.Abs(rows[0].Plain-207.95) > 0.005 ||
		math.Abs(rows[0].Bound-4000/(6+0.35*27.9)) > 0.01 || rows[0].Method != "exact" {
		t.Fatalf("depth 0: %+v (%v)", rows, err)
	}
	rows, err = run("--depth", "20", "--agree", "1")
	if err != nil || len(rows) != 1 || math.Abs(rows[0].TokensPerSecond-4000/6.0) > 3*rows[0].CIHalfWidth+1e-6 || rows[0].Depth != 20 {
		t.Fatalf("full agreement: %+v (%v)", rows, err)
	}
	rows, err = run("--depth", "auto", "--max-depth", "3", "--agree", "0.9", "--bus-delay", "5ms")
	if err != nil || len(rows) != 1 || rows[0].Depth < 1 || rows[0].Depth > 3 || rows[0].DelayMS != 5 || !(rows[0].TokensPerSecond > rows[0].Plain) ||
		math.Abs(rows[0].Bound-4000/(6+0.35*(27.9+10))) > 0.01 {
		t.Fatalf("auto depth: %+v (%v)", rows, err)
	}
	rows, err = run("--depth", "2", "--agree", "0.5", "--b1", "1")
	if err != nil || len(rows) != 1 || len(rows[0].Thresholds) != 2 || rows[0].Thresholds[1] != 1 {
		t.Fatalf("--b1 1: %+v (%v)", rows, err)
	}
	var table bytes.Buffer
	cmd := newPlanCmd()
	cmd.SetOut(&table)
	cmd.SetArgs([]string{"--concurrency", "2", "--b0", "1", "--depth", "1", "--agree", "0.5"})
	if err := cmd.Execute(); err != nil || !strings.Contains(table.String(), "×plain") {
		t.Fatalf("table: %q (%v)", table.String(), err)
	}
	if _, err := run("--depth", "-1"); err == nil {
		t.Error("--depth -1: no error")
	}
}
