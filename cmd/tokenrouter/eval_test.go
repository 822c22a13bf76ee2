package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalParetoOnRealPair sweeps r-stitch's entropy threshold on the real
// model pair with a dataset the test writes: the table has a point per
// value, quality is agreement with the large model alone, and the Pareto
// plot is a readable PNG. The dataset is docs/results/quality.md's example.
func TestEvalParetoOnRealPair(t *testing.T) {
	m := modelsDir(t)
	dir := t.TempDir()
	data := filepath.Join(m, "..", "eval", "stories.jsonl")
	out, err := runCmd(t, "eval", "--dataset", data,
		"--model", "slm="+filepath.Join(m, "llama2xs-model.bin"), "--model", "llm="+filepath.Join(m, "stories260K.gguf"),
		"--tokenizer", filepath.Join(m, "tok512.bin"), "--algorithm", "r-stitch", "--sweep", "tau=0.0,0.3,0.6,1.0",
		"--max-tokens", "24", "--threads", "1", "--format", "json", "--plot", dir)
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	var pts []struct {
		Value      string  `json:"value"`
		Quality    float64 `json:"quality"`
		TPS        float64 `json:"tokens_per_second"`
		LargeShare float64 `json:"large_model_share"`
		Tokens     int     `json:"tokens"`
		Pareto     bool    `json:"pareto"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &pts); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(pts) != 4 {
		t.Fatalf("%d points", len(pts))
	}
	pareto := 0
	for _, p := range pts {
		if p.Tokens != 5*24 || p.TPS <= 0 {
			t.Fatalf("point %+v", p)
		}
		if p.Pareto {
			pareto++
		}
	}
	// τ = 0 switches to the large model whenever entropy is above 0 and it
	// never hands back: the large model writes almost everything, so the
	// output is the large model's own. τ = 1 never switches.
	if pts[0].Quality != 1 || pts[3].LargeShare != 0 || pts[0].LargeShare < 0.9 || pareto == 0 {
		t.Fatalf("sweep %+v", pts)
	}
	f, err := os.Open(filepath.Join(dir, "pareto.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatal(err)
	}
}
