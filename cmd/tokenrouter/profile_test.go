package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileFlags runs a command with --cpuprofile and --trace: the
// profile is a gzipped pprof file and the trace a Go execution trace, both
// written when the command ends; a file that cannot be created is an
// error naming its flag.
func TestProfileFlags(t *testing.T) {
	dir := t.TempDir()
	prof, trace := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "run.trace")
	out, err := exec.Command(bin.path, "plan", "--latency-ms", "6,28", "--concurrency", "2",
		"--cpuprofile", prof, "--trace", trace).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	p, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) < 2 || p[0] != 0x1f || p[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes that are not gzip (a pprof profile)", len(p))
	}
	tr, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(tr, []byte("go 1.")) || !bytes.Contains(tr[:16], []byte(" trace")) {
		t.Fatalf("--trace wrote %q…, not a Go execution trace", tr[:min(len(tr), 16)])
	}
	out, err = exec.Command(bin.path, "plan", "--latency-ms", "6,28", "--cpuprofile", filepath.Join(dir, "no", "cpu.prof")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--cpuprofile") {
		t.Fatalf("--cpuprofile into a missing directory: err %v, output %q", err, out)
	}
}
