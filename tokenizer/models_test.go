package tokenizer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
)

// modelsDir returns ../shared/models relative to the repository root, or
// skips the test when it is absent.
func modelsDir(t testing.TB) string {
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

func loadAll(t *testing.T) (spModel, bin, gg *Tokenizer) {
	dir := modelsDir(t)
	var err error
	spModel, err = OpenSentencePiece(filepath.Join(dir, "tok512.model"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := llama2c.OpenTokenizer(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	if bin, err = FromLlama2c(v); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(filepath.Join(dir, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if gg, err = FromGGUF(f); err != nil {
		t.Fatal(err)
	}
	return
}
