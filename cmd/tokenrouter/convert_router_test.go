package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/r2r"
)

// TestConvertRouter converts an R2R router saved as torch.save would save
// it, prints what it wrote, and r2r serves the result.
func TestConvertRouter(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "router.pt")
	if err := routetest.WriteR2RTorch(in, 64, 3, 0, 0.25); err != nil {
		t.Fatal(err)
	}
	msg, err := runCmd(t, "convert-router", in)
	if err != nil {
		t.Fatalf("convert-router: %v\n%s", err, msg)
	}
	out := filepath.Join(dir, "router.safetensors")
	for _, want := range []string{out + ": HiddenStatesTokenLMHeadLogitsClassifier, 24 tensors", "threshold 0.25",
		"backbone.blocks.0.dim_change.weight", "[24 32]", "logits_projection.weight", "[64 16]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("output lacks %q:\n%s", want, msg)
		}
	}
	a, err := r2r.New(route.Spec{Model: 0, Models: []string{"s", "l"}, Params: map[string]string{"weights": out}})
	if err != nil {
		t.Fatal(err)
	}
	if thr := a.(*r2r.Algorithm).Threshold; thr != 0.25 {
		t.Errorf("converted router's threshold %v, want 0.25", thr)
	}

	other := filepath.Join(dir, "other.safetensors")
	if msg, err := runCmd(t, "convert-router", in, "--out", other); err != nil || !strings.HasPrefix(msg, other+":") {
		t.Fatalf("--out: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.pt")
	if err := os.WriteFile(bad, raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"convert-router", bad}, {"convert-router", in, "--out", in}, {"convert-router"}} {
		if _, err := runCmd(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.safetensors")); err == nil {
		t.Error("a failed conversion left its output behind")
	}
}
