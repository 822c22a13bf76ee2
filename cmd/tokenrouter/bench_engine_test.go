package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
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
		// the kernel plan is measured afresh for each thread count and
		// reported per class with every level's time
		p := r.KernelPlan
		classes := map[string]bool{}
		for _, c := range p.Choices {
			classes[c.Class] = true
			if c.Level == "" || c.Times[c.Level] <= 0 {
				t.Fatalf("kernel choice %+v", c)
			}
		}
		if p.Source != "measured" || len(classes) != 4 || !strings.Contains(r.Kernels, "decode ") {
			t.Fatalf("kernel plan %+v, kernels %q", p, r.Kernels)
		}
	}
	text, err := runCmd(t, "bench", "engine", file, "--threads", "1", "--sequences", "2", "--prompt", "16",
		"--decode", "4", "--repeat", "1", "--bandwidth-mib", "16", "--kernels", "generic")
	if err != nil {
		t.Fatal(err, text)
	}
	if !strings.Contains(text, "kernel plans") || strings.Count(text, "forced") != 4 || !strings.Contains(text, "decode generic, batch generic") {
		t.Fatalf("text report with --kernels generic:\n%s", text)
	}
	if _, err := runCmd(t, "bench", "engine", file, "--format", "yaml"); err == nil {
		t.Fatal("--format yaml accepted")
	}
	if _, err := runCmd(t, "bench", "engine"); err == nil {
		t.Fatal("no file accepted")
	}
}
