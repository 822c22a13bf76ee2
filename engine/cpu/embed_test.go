package cpu

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/llama2c"
)

// TestEmbedMatchesCheckpointTable checks Embed against the token-embedding
// table read straight from the llama2.c checkpoint.
func TestEmbedMatchesCheckpointTable(t *testing.T) {
	path := filepath.Join(modelsDir(t), "stories260K.gguf")
	e, err := Open(path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ck, err := llama2c.OpenCheckpoint(filepath.Join(modelsDir(t), "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	d := e.Info().HiddenSize
	got := make([]float32, d)
	for _, tok := range []int32{0, 1, 403, 511} {
		e.Embed(tok, got)
		want := ck.TokenEmbedding[int(tok)*d : (int(tok)+1)*d]
		if !slices.Equal(got, want) {
			t.Fatalf("token %d: embedding differs from the checkpoint's table", tok)
		}
	}
	e.Embed(9999, got)
	if slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
		t.Fatal("out-of-vocabulary id gave a non-zero embedding")
	}
}
