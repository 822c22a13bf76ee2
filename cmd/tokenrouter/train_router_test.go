package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/route/r2r"
)

// TestTrainRouterTinyPair trains a small r2r router on the tiny pair from
// the command line: the file carries the contract's metadata, loads
// through r2r's New with the threshold it was trained with, and the
// figures are written beside it; progress goes to stderr as plain lines.
func TestTrainRouterTinyPair(t *testing.T) {
	m := modelsDir(t)
	out := filepath.Join(t.TempDir(), "tiny.safetensors")
	text, err := runCmd(t, "train-router", "--slm", "stories260K="+filepath.Join(m, "stories260K.gguf"),
		"--llm", filepath.Join(m, "llama2xs-model.bin"), "--prompts", filepath.Join(testmodels.EvalDir(t), "stories.jsonl"),
		"--out", out, "--max-tokens", "32", "--topk", "8", "--hidden-dims", "16,32,16", "--expansion", "2",
		"--epochs", "4", "--threads", "1", "--target-share", "0.3")
	if err != nil {
		t.Fatalf("train-router: %v\n%s", err, text)
	}
	if !strings.Contains(text, "epoch 1/4") || strings.Contains(text, "\r") || !strings.Contains(text, "held-out AUC") {
		t.Fatalf("output:\n%s", text)
	}
	for _, f := range []string{"tiny-loss.png", "tiny-roc.png", "tiny-pr.png"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(out), f)); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("%s: %v", f, err)
		}
	}
	w, err := nn.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	meta, ok, err := nn.ReadMeta(w)
	if err != nil || !ok || meta.Algorithm != "r2r" || meta.SLM != "stories260K" || meta.LLM != "llama2xs-model" ||
		meta.HiddenSize != 64 || meta.VocabSize != 512 || meta.TopK != 8 || meta.EmbedSize != 64 || meta.Target["share"] != 0.3 {
		t.Fatalf("metadata %+v (%v, %v)", meta, ok, err)
	}
	if w.Meta["model_type"] != "HiddenStatesTokenLMHeadLogitsClassifier" {
		t.Fatalf("model_type %q", w.Meta["model_type"])
	}
	a, err := r2r.New(route.Spec{Models: []string{"s", "l"}, Params: map[string]string{"weights": out}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.(*r2r.Algorithm).Threshold; got != meta.Threshold {
		t.Fatalf("served threshold %v, trained %v", got, meta.Threshold)
	}
}

func TestTrainRouterRefuses(t *testing.T) {
	m := modelsDir(t)
	base := []string{"train-router", "--slm", filepath.Join(m, "stories260K.gguf"), "--llm", filepath.Join(m, "llama2xs-model.bin"),
		"--prompts", filepath.Join(testmodels.EvalDir(t), "stories.jsonl")}
	out := filepath.Join(t.TempDir(), "r.safetensors")
	for name, args := range map[string][]string{
		"no out":       base,
		"two targets":  append(base, "--out", out, "--target-share", "0.2", "--target-recall", "0.9"),
		"bad judge":    append(base, "--out", out, "--verify", "2", "--judge", "vibes"),
		"co-llm dims":  append(base, "--out", out, "--algorithm", "co-llm", "--hidden-dims", "8"),
		"no such file": append(slices.Clone(base[:len(base)-1]), filepath.Join(m, "missing.jsonl"), "--out", out),
	} {
		if text, err := runCmd(t, args...); err == nil {
			t.Errorf("%s: accepted\n%s", name, text)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused run wrote its router")
	}
}
