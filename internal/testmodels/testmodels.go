// Package testmodels locates the real trained model files that tests read
// from the repository's testdata/models folder (provenance and licences in
// its SOURCES.md and LICENSES.md).
package testmodels

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the repository's testdata/models folder: the one beside the
// go.mod found above the test's working directory. A missing folder fails
// the test: the files are part of the repository.
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
	m := filepath.Join(dir, "testdata", "models")
	if _, err := os.Stat(filepath.Join(m, "stories260K.gguf")); err != nil {
		t.Fatalf("model files missing from %s: %v", m, err)
	}
	return m
}
