package cpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// TestOpenBytes opens model files held in memory, a GGUF file and a
// llama2.c checkpoint with its vocabulary given as Options.Vocab: the same
// facts and greedy tokens as the files opened from disk. Cut-off bytes are
// refused with the format's error.
func TestOpenBytes(t *testing.T) {
	dir := modelsDir(t)
	tok, err := tokenizer.Open(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	vocab := make([]string, tok.VocabSize())
	for i := range vocab {
		vocab[i] = tok.Token(int32(i))
	}
	for _, c := range []struct {
		file string
		opts Options
		want []int32
	}{
		{"stories260K.gguf", Options{Threads: 1}, refStories[:40]},
		{"stories260K.bin", Options{Threads: 1, Vocab: vocab}, refStories[:40]},
		{"llama2xs-model.bin", Options{Threads: 1, Tokenizer: filepath.Join(dir, "tok512.bin")}, refLlama2xs},
	} {
		b, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		mem, err := OpenBytes(context.Background(), c.file, b, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		file := openModel(t, c.file, Options{Threads: 1, Tokenizer: filepath.Join(dir, "tok512.bin")})
		mi, fi := mem.Info(), file.Info()
		if mi.Name != fi.Name || mi.VocabHash != fi.VocabHash || mi.VocabHash == "" || mi.ContextLength != fi.ContextLength {
			t.Errorf("%s: in memory %+v, file %+v", c.file, mi, fi)
		}
		if got := greedy(t, mem, 1, []int32{1}, len(c.want)); !slices.Equal(got, c.want) {
			t.Errorf("%s in memory: greedy %v, want %v", c.file, got, c.want)
		}
		if _, err := OpenBytes(context.Background(), c.file, b[:len(b)/2], c.opts); !errors.Is(err, gguf.ErrFormat) && !errors.Is(err, llama2c.ErrFormat) {
			t.Errorf("%s cut in half: %v", c.file, err)
		}
	}
}
