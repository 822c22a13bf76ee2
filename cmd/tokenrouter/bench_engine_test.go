package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine/cpu/cpubench"
)

// TestBenchEngineJSON runs bench engine on the tiny test model and checks
// the report's shape (no speed assertions: timing on shared machines is
// noisy).
func TestBenchEngineJSON(t *testing.T) {
	file := filepath.Join(modelsDir(t), "stories260K.gguf")
	out, err := runCmd(t, "bench", "engine", file, "--threads", "1,2", "--sequences", "2", "--prompt", "16",
		"--decode", "4", "--repeat", "1", "--bandwidth-mib", "16", "--format", "json")
	if err != nil {
		t.Fatal(err, out)
	}
	var rep cpubench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err, out)
	}
	if len(rep.Results) != 2 || rep.Bandwidth[1] <= 0 || rep.Bandwidth[2] <= 0 {
		t.Fatalf("report %+v", rep)
	}
	for i, r := range rep.Results {
		if r.File != file || r.Threads != i+1 || r.DecodeTokS <= 0 || r.PromptTokS <= 0 || len(r.Aggregate) != 1 ||
			r.Aggregate[0].Seqs != 2 || r.Aggregate[0].TokS <= 0 || r.WeightBytes <= 0 || r.BoundTokS <= 0 {
			t.Fatalf("result %+v", r)
		}
	}
	if _, err := runCmd(t, "bench", "engine", file, "--format", "yaml"); err == nil {
		t.Fatal("--format yaml accepted")
	}
	if _, err := runCmd(t, "bench", "engine"); err == nil {
		t.Fatal("no file accepted")
	}
}
