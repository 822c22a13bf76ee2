package tokenizer

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
)

// Open reads a standalone tokenizer file: a GGUF file (its tokenizer
// metadata), a Hugging Face tokenizer.json (or a folder holding one), a
// SentencePiece .model protobuf, or a llama2.c tokenizer.bin holding
// vocabSize tokens (0 reads them all). A Hugging Face tokenizer with fewer
// than vocabSize ids gets unused ones up to it, as models pad their
// embeddings (Qwen2.5: 151,665 tokens, 151,936 rows).
func Open(path string, vocabSize int) (*Tokenizer, error) {
	if IsHF(path) {
		t, err := OpenHF(path)
		if err != nil {
			return nil, err
		}
		t.padTo(vocabSize)
		return t, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var magic [4]byte
	n, _ := fh.Read(magic[:])
	fh.Close()
	switch {
	case bytes.Equal(magic[:n], []byte(gguf.Magic)):
		f, err := gguf.OpenMeta(path)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		return FromGGUF(f)
	case strings.HasSuffix(path, ".model"):
		return OpenSentencePiece(path)
	}
	v, err := llama2c.OpenTokenizer(path, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return FromLlama2c(v)
}

// IsHF reports whether a tokenizer path names a Hugging Face tokenizer: a
// .json file or a folder (holding tokenizer.json).
func IsHF(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir() || strings.HasSuffix(path, ".json")
}
