package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIsFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.bin")
	if err := os.WriteFile(good, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("GG"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !IsFile(good) || IsFile(bad) || IsFile(filepath.Join(dir, "missing")) {
		t.Fatal("IsFile misjudges the magic")
	}
}
