package tokenizer

import (
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
)

func modelsDir(t testing.TB) string { return testmodels.Dir(t) }

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
	f, err := gguf.OpenMeta(filepath.Join(dir, "stories260K.gguf")) // the tokenizer needs the header alone
	if err != nil {
		t.Fatal(err)
	}
	if gg, err = FromGGUF(f); err != nil {
		t.Fatal(err)
	}
	return
}
