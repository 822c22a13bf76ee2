// Package testmodels locates the real trained model files that tests read
// from the repository's models/tiny folder (provenance and licences in its
// SOURCES.md and LICENSES.md; the binary embeds three of them, see package
// models/tiny).
package testmodels

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the repository's models/tiny folder: the one beside the
// go.mod found above the test's working directory. A missing folder fails
// the test: the files are part of the repository.
func Dir(t testing.TB) string {
	t.Helper()
	m := filepath.Join(root(t), "models", "tiny")
	if _, err := os.Stat(filepath.Join(m, "stories260K.gguf")); err != nil {
		t.Fatalf("model files missing from %s: %v", m, err)
	}
	return m
}

// EvalDir returns the repository's testdata/eval folder: the prompt sets
// the tests run the models on.
func EvalDir(t testing.TB) string {
	t.Helper()
	e := filepath.Join(root(t), "testdata", "eval")
	if _, err := os.Stat(e); err != nil {
		t.Fatalf("prompt sets missing: %v", err)
	}
	return e
}

// root returns the repository's root: the folder of the go.mod found above
// the test's working directory.
func root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root (go.mod) not found")
		}
		dir = parent
	}
}
