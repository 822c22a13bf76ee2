// Package testmodels locates the real trained model files that tests read
// from ../shared/models beside the repository (they are never copied into
// it), and skips a test clearly when they are absent.
package testmodels

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns ../shared/models relative to the repository root (the
// folder holding go.mod above the test's working directory), or skips the
// test when that folder is absent.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root (go.mod) not found")
		}
		dir = parent
	}
	m := filepath.Join(dir, "..", "shared", "models")
	if _, err := os.Stat(m); err != nil {
		t.Skipf("shared models directory %s is absent; skipping tests on real model files", m)
	}
	return m
}

// Path returns the path of one model file, skipping the test when the
// shared models folder is absent.
func Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), name)
}
