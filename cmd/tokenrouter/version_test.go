package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestVersion runs the built binary's --version: it prints the module
// version and the VCS revision the go command recorded in the binary
// (TestMain builds with -buildvcs=auto, so a git checkout records one).
func TestVersion(t *testing.T) {
	out, err := exec.Command(bin.path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := string(out)
	if !strings.HasPrefix(got, "tokenrouter ") || !strings.Contains(got, ", revision ") {
		t.Fatalf("--version printed %q", got)
	}
	meta, err := exec.Command("go", "version", "-m", bin.path).Output()
	if err != nil {
		t.Fatal(err)
	}
	rev := regexp.MustCompile(`(?m)^\s*build\s+vcs\.revision=(\S+)`).FindSubmatch(meta)
	mod := regexp.MustCompile(`(?m)^\s*mod\s+github\.com/tokenrouter/tokenrouter\s+(\S+)`).FindSubmatch(meta)
	if mod == nil || !strings.HasPrefix(got, "tokenrouter "+string(mod[1])+",") {
		t.Fatalf("--version printed %q; the binary records module version %q", got, mod)
	}
	if rev == nil {
		t.Logf("the build recorded no VCS revision (not a git clone?): %q", got)
		return
	}
	if !strings.Contains(got, "revision "+string(rev[1])) {
		t.Fatalf("--version printed %q, want revision %s", got, rev[1])
	}
}
