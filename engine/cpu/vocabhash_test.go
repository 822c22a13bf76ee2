package cpu

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// writeTokenizerBin writes a llama2.c tokenizer.bin of tokens (score 0).
func writeTokenizerBin(t *testing.T, tokens []string) string {
	t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, 16)
	for _, s := range tokens {
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.bin")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInfoVocabHash checks Info.VocabHash against the hash of the token
// strings read straight from each vocabulary's file.
func TestInfoVocabHash(t *testing.T) {
	dir := modelsDir(t)
	f, err := gguf.OpenMeta(filepath.Join(dir, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ggufTokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(ggufTokens) != 512 {
		t.Fatalf("stories260K.gguf: %d tokens (ok %v), want 512", len(ggufTokens), ok)
	}
	own := make([]string, 512)
	for i := range own {
		own[i] = fmt.Sprintf("t%d", i)
	}
	ownPath := writeTokenizerBin(t, own)
	for _, c := range []struct {
		model, tokenizer string
		want             string
	}{
		{"stories260K.gguf", "", engine.VocabHash(ggufTokens)},
		{"stories260K.bin", "", ""}, // a checkpoint carries no vocabulary
		// The same vocabulary as a llama2.c tokenizer.bin (spaces read as
		// U+2581, "\n<s>\n" as "<s>") hashes like the GGUF file's.
		{"stories260K.bin", filepath.Join(dir, "tok512.bin"), engine.VocabHash(ggufTokens)},
		{"stories260K.bin", ownPath, engine.VocabHash(own)},
		{"stories260K.gguf", ownPath, engine.VocabHash(own)}, // the tokenizer file wins
	} {
		e := openModel(t, c.model, Options{Threads: 1, Tokenizer: c.tokenizer})
		if got := e.Info().VocabHash; got != c.want {
			t.Errorf("%s with tokenizer %q: VocabHash %q, want %q", c.model, c.tokenizer, got, c.want)
		}
	}
	if _, err := Open(filepath.Join(dir, "stories260K.bin"), Options{Threads: 1, Tokenizer: filepath.Join(dir, "missing.bin")}); err == nil {
		t.Error("a missing tokenizer file opened")
	}
}
