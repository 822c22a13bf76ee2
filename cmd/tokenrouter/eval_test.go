package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

// TestEvalParetoOnRealPair sweeps r-stitch's entropy threshold on the real
// model pair: the table has a point per value, quality is the large
// model's teacher-forced agreement, and the Pareto plot is a readable PNG.
// The dataset is docs/results/quality.md's example.
func TestEvalParetoOnRealPair(t *testing.T) {
	m := modelsDir(t)
	dir := t.TempDir()
	data := filepath.Join(testmodels.EvalDir(t), "stories.jsonl")
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
		Agreement  float64 `json:"agreement"`
		LogLik     float64 `json:"llm_loglik"`
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
		if p.Tokens != 5*24 || p.TPS <= 0 || p.Quality != p.Agreement || p.LogLik >= 0 {
			t.Fatalf("point %+v", p)
		}
		if p.Pareto {
			pareto++
		}
	}
	// τ = 0 switches to the large model whenever entropy is above 0 and it
	// never hands back: the large model writes almost everything, so the
	// output is the large model's own. τ = 1 never switches, and the small
	// model's text disagrees with the large model somewhere.
	if pts[0].Quality != 1 || pts[3].LargeShare != 0 || pts[0].LargeShare < 0.9 || pareto == 0 || pts[3].Agreement >= 1 {
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

// TestEvalCurveOnRealPair runs curve mode with two arms on the real pair:
// the JSON report has both series and their curves at the shares asked
// for, and the plot is a readable PNG; flags of the one-sweep mode are
// refused beside --arm.
func TestEvalCurveOnRealPair(t *testing.T) {
	m := modelsDir(t)
	dir := t.TempDir()
	args := []string{"eval", "--dataset", filepath.Join(testmodels.EvalDir(t), "stories.jsonl"),
		"--model", "slm=" + filepath.Join(m, "stories260K.gguf"), "--model", "llm=" + filepath.Join(m, "llama2xs-model.bin"),
		"--tokenizer", filepath.Join(m, "tok512.bin"), "--max-tokens", "16", "--threads", "1",
		"--arm", "r-stitch tau=0,0.3,1", "--arm", "random=r2r-random p=0,0.5,1", "--shares", "10%,50%",
		"--bootstrap", "50", "--reference", "random"}
	out, err := runCmd(t, append(args, "--format", "json", "--plot", dir)...)
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	var r struct {
		Shares []float64 `json:"shares"`
		Series []struct {
			Label  string `json:"label"`
			Points []struct {
				Agreement  float64 `json:"agreement"`
				LargeShare float64 `json:"large_model_share"`
			} `json:"points"`
		} `json:"series"`
		AtShare []struct {
			Label     string     `json:"label"`
			Agreement []*float64 `json:"agreement"`
			LogLik    []*float64 `json:"llm_loglik"`
		} `json:"at_share"`
		Bootstrap struct {
			Resamples int    `json:"resamples"`
			Reference string `json:"reference"`
			Series    []struct {
				Agreement struct {
					AtLeast float64 `json:"reference_at_least"`
				} `json:"agreement"`
			} `json:"series"`
		} `json:"bootstrap"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(r.Series) != 2 || r.Series[1].Label != "random" || len(r.Series[1].Points) != 3 || len(r.AtShare) != 2 ||
		len(r.Shares) != 2 || r.Shares[0] != 0.1 {
		t.Fatalf("report %+v", r)
	}
	if b := r.Bootstrap; b.Resamples != 50 || b.Reference != "random" || len(b.Series) != 2 || b.Series[1].Agreement.AtLeast != 1 {
		t.Fatalf("bootstrap %+v", b)
	}
	// p = 1: the large model writes everything and agrees with itself.
	if p := r.Series[1].Points[2]; p.LargeShare != 1 || p.Agreement != 1 {
		t.Fatalf("r2r-random p=1: %+v", p)
	}
	for _, a := range r.AtShare {
		if a.Agreement[0] == nil || a.LogLik[1] == nil || *a.Agreement[0] > *a.Agreement[1] {
			t.Fatalf("curve %s at 10%%, 50%%: %v %v", a.Label, a.Agreement, a.LogLik)
		}
	}
	f, err := os.Open(filepath.Join(dir, "quality-share.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatal(err)
	}
	// The saved report is read back and read at another share.
	saved := filepath.Join(dir, "report.json")
	if err := os.WriteFile(saved, []byte(out[strings.Index(out, "{"):]), 0o644); err != nil {
		t.Fatal(err)
	}
	md, err := runCmd(t, "eval", "--from", saved, "--shares", "20%", "--bootstrap", "0")
	if err != nil || !strings.Contains(md, "| algorithm | 20% |") || !strings.Contains(md, "| random | p=1 | 1.000 | 1.000 |") {
		t.Fatalf("--from: %v\n%s", err, md)
	}
	if out, err := runCmd(t, "eval", "--from", saved, "--from", saved); err == nil {
		t.Fatalf("one report read twice (the same labels) accepted:\n%s", out)
	}
	if out, err := runCmd(t, append(args, "--algorithm", "r2r")...); err == nil {
		t.Fatalf("--algorithm with --arm accepted:\n%s", out)
	}
}
