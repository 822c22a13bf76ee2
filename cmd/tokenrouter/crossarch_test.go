package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestArm64GeneratesTheSameText cross-builds tokenrouter for linux/arm64,
// runs it under qemu-user (qemu-aarch64), and checks that it generates,
// greedily, the same prompt ids, output ids and text as this amd64 build
// on the tiny real models of models/tiny: the F32 GGUF file, its
// llama2.c checkpoint, the second llama2.c model, and the GGUF file
// quantised to Q8_0, Q4_0 and Q4_K_M (whose 64-value rows take Q5_0), so
// the arm64 weight kernels of those types run end to end. Two generated
// models (tiny-qwen3 in Q4_K_M, tiny-gemma2 in Q6_K: random weights, rows
// long enough for the K-quant kernels) cover other architectures.
func TestArm64GeneratesTheSameText(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("compares an arm64 build under qemu-user with a linux/amd64 one; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if testing.Short() {
		t.Skip("-short: cross-builds tokenrouter and runs it under emulation")
	}
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("qemu-aarch64 not found (Debian package qemu-user): the arm64 build cannot run here")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	start := time.Now()
	arm := filepath.Join(dir, "tokenrouter-arm64")
	build := exec.CommandContext(ctx, "go", "build", "-o", arm, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go build: %v\n%s", err, out)
	}
	t.Logf("arm64 build: %v", time.Since(start).Round(time.Millisecond))

	// The runs below keep whatever they cache (the kernel plans each
	// build measures) in the test's folder, not the user's.
	env := append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	m := modelsDir(t)
	run := func(argv ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, stderr.Bytes())
		}
		return stdout.Bytes()
	}
	gguf := filepath.Join(m, "stories260K.gguf")
	for _, typ := range []string{"Q8_0", "Q4_0", "Q4_K_M"} {
		run(bin.path, "quantize", gguf, filepath.Join(dir, "stories260K-"+typ+".gguf"), "--type", typ)
	}
	for _, g := range []struct{ shape, typ string }{{"tiny-qwen3", "Q4_K_M"}, {"tiny-gemma2", "Q6_K"}} {
		run(bin.path, "gen-model", "--shape", g.shape, "--type", g.typ, "--out", filepath.Join(dir, g.shape+"-"+g.typ+".gguf"))
	}
	tok := filepath.Join(m, "tok512.bin")
	for _, c := range []struct {
		name  string
		model []string
	}{
		{"stories260K.gguf", []string{"--model", gguf}},
		{"stories260K.bin", []string{"--model", filepath.Join(m, "stories260K.bin"), "--tokenizer", tok}},
		{"llama2xs-model.bin", []string{"--model", filepath.Join(m, "llama2xs-model.bin"), "--tokenizer", tok}},
		{"stories260K-Q8_0", []string{"--model", filepath.Join(dir, "stories260K-Q8_0.gguf")}},
		{"stories260K-Q4_0", []string{"--model", filepath.Join(dir, "stories260K-Q4_0.gguf")}},
		{"stories260K-Q4_K_M", []string{"--model", filepath.Join(dir, "stories260K-Q4_K_M.gguf")}},
		{"tiny-qwen3-Q4_K_M", []string{"--model", filepath.Join(dir, "tiny-qwen3-Q4_K_M.gguf")}},
		{"tiny-gemma2-Q6_K", []string{"--model", filepath.Join(dir, "tiny-gemma2-Q6_K.gguf")}},
	} {
		args := append([]string{"generate", "--prompt", "Once upon a time", "--max-tokens", "64", "--temperature", "0", "--format", "json"}, c.model...)
		started := time.Now()
		want := decodeGenerate(t, run(append([]string{bin.path}, args...)...))
		mid := time.Now()
		got := decodeGenerate(t, run(append([]string{qemu, arm}, args...)...))
		t.Logf("%s: amd64 %v, arm64 (emulated) %v: %q", c.name, mid.Sub(started).Round(time.Millisecond), time.Since(mid).Round(time.Millisecond), got.Text)
		if len(want.OutputIDs) == 0 {
			t.Errorf("%s: amd64 generated nothing", c.name)
		}
		if !slices.Equal(got.PromptIDs, want.PromptIDs) || !slices.Equal(got.OutputIDs, want.OutputIDs) || got.Text != want.Text {
			t.Errorf("%s: arm64 and amd64 differ\narm64 prompt %v output %v\namd64 prompt %v output %v\narm64 text %q\namd64 text %q",
				c.name, got.PromptIDs, got.OutputIDs, want.PromptIDs, want.OutputIDs, got.Text, want.Text)
		}
	}
}

// decodeGenerate parses generate's --format json output.
func decodeGenerate(t *testing.T, out []byte) generateResult {
	t.Helper()
	var r generateResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("generate output %q: %v", out, err)
	}
	return r
}
