// Package llama2c reads the file formats of Karpathy's llama2.c: legacy
// model checkpoints (.bin: a seven-int32 header followed by float32 weight
// arrays, with a tied or untied classifier) and tokenizer.bin vocabularies.
// Parsing checks every count and size against hard limits and the file
// length, so a corrupt file gives an error, never a panic or a huge
// allocation.
package llama2c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
)

// Hard limits applied while parsing.
const (
	MaxDim       = 1 << 16
	MaxLayers    = 1 << 10
	MaxVocab     = 1 << 20
	MaxSeqLen    = 1 << 20
	MaxTokenLen  = 1 << 16
	MaxFileBytes = 1 << 34
)

// ErrFormat reports a malformed file.
var ErrFormat = errors.New("llama2c: malformed file")

// Config is the checkpoint header.
type Config struct {
	Dim, HiddenDim, NLayers, NHeads, NKVHeads, VocabSize, SeqLen int
	// Shared is true when the classifier is tied to the token embedding
	// (a positive vocab_size in the header).
	Shared bool
}

// HeadSize is Dim / NHeads.
func (c Config) HeadSize() int { return c.Dim / c.NHeads }

// KVDim is the width of the key and value projections.
func (c Config) KVDim() int { return c.HeadSize() * c.NKVHeads }

// Checkpoint holds a model's weights, each row-major with the output
// dimension first (W[out][in]), as llama2.c stores them.
type Checkpoint struct {
	Config
	TokenEmbedding []float32 // [vocab][dim]
	RMSAtt         []float32 // [layer][dim]
	WQ             []float32 // [layer][dim][dim]
	WK             []float32 // [layer][kvdim][dim]
	WV             []float32 // [layer][kvdim][dim]
	WO             []float32 // [layer][dim][dim]
	RMSFFN         []float32 // [layer][dim]
	W1             []float32 // [layer][hidden][dim] (gate)
	W2             []float32 // [layer][dim][hidden] (down)
	W3             []float32 // [layer][hidden][dim] (up)
	RMSFinal       []float32 // [dim]
	WCls           []float32 // [vocab][dim]; aliases TokenEmbedding when Shared
}

// OpenCheckpoint reads a checkpoint file.
func OpenCheckpoint(path string) (*Checkpoint, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func readFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrFormat, path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	return b, nil
}

// ParseCheckpoint decodes a legacy llama2.c checkpoint held in memory.
func ParseCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) < 28 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the 28-byte header", ErrFormat, len(b))
	}
	var h [7]int32
	for i := range h {
		h[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	c := Config{Dim: int(h[0]), HiddenDim: int(h[1]), NLayers: int(h[2]), NHeads: int(h[3]), NKVHeads: int(h[4]), VocabSize: int(h[5]), SeqLen: int(h[6])}
	c.Shared = c.VocabSize > 0
	if c.VocabSize < 0 {
		c.VocabSize = -c.VocabSize
	}
	switch {
	case c.Dim <= 0 || c.Dim > MaxDim, c.HiddenDim <= 0 || c.HiddenDim > 4*MaxDim:
		return nil, fmt.Errorf("%w: dim %d, hidden_dim %d", ErrFormat, c.Dim, c.HiddenDim)
	case c.NLayers <= 0 || c.NLayers > MaxLayers:
		return nil, fmt.Errorf("%w: n_layers %d", ErrFormat, c.NLayers)
	case c.NHeads <= 0 || c.Dim%c.NHeads != 0 || c.HeadSize()%2 != 0:
		return nil, fmt.Errorf("%w: n_heads %d does not divide dim %d into even heads", ErrFormat, c.NHeads, c.Dim)
	case c.NKVHeads <= 0 || c.NHeads%c.NKVHeads != 0:
		return nil, fmt.Errorf("%w: n_kv_heads %d does not divide n_heads %d", ErrFormat, c.NKVHeads, c.NHeads)
	case c.VocabSize == 0 || c.VocabSize > MaxVocab:
		return nil, fmt.Errorf("%w: vocab_size %d", ErrFormat, c.VocabSize)
	case c.SeqLen <= 0 || c.SeqLen > MaxSeqLen:
		return nil, fmt.Errorf("%w: seq_len %d", ErrFormat, c.SeqLen)
	}
	dim, hid, L, kv, V := int64(c.Dim), int64(c.HiddenDim), int64(c.NLayers), int64(c.KVDim()), int64(c.VocabSize)
	sizes := []int64{V * dim, L * dim, L * dim * dim, L * kv * dim, L * kv * dim, L * dim * dim, L * dim, L * hid * dim, L * dim * hid, L * hid * dim, dim,
		int64(c.SeqLen) * int64(c.HeadSize()) / 2, int64(c.SeqLen) * int64(c.HeadSize()) / 2}
	if !c.Shared {
		sizes = append(sizes, V*dim)
	}
	total := int64(0)
	for _, s := range sizes {
		total += s
	}
	if need := 28 + 4*total; int64(len(b)) < need {
		return nil, fmt.Errorf("%w: header needs %d bytes of weights, file has %d", ErrFormat, need, len(b))
	}
	off := int64(28)
	next := func(n int64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off+4*int64(i):]))
		}
		off += 4 * n
		return out
	}
	ck := &Checkpoint{Config: c}
	ck.TokenEmbedding = next(sizes[0])
	ck.RMSAtt = next(sizes[1])
	ck.WQ = next(sizes[2])
	ck.WK = next(sizes[3])
	ck.WV = next(sizes[4])
	ck.WO = next(sizes[5])
	ck.RMSFFN = next(sizes[6])
	ck.W1 = next(sizes[7])
	ck.W2 = next(sizes[8])
	ck.W3 = next(sizes[9])
	ck.RMSFinal = next(sizes[10])
	off += 4 * (sizes[11] + sizes[12]) // freq_cis_real and freq_cis_imag (unused: RoPE is computed)
	if c.Shared {
		ck.WCls = ck.TokenEmbedding
	} else {
		ck.WCls = next(sizes[13])
	}
	return ck, nil
}

// Vocab is a tokenizer.bin vocabulary. Token texts use a plain space where
// SentencePiece uses U+2581; BOS and EOS are spelled "\n<s>\n" and "\n</s>\n".
type Vocab struct {
	MaxTokenLength int
	Tokens         []string
	Scores         []float32
}

// OpenTokenizer reads a tokenizer.bin file. vocabSize is the number of
// tokens to read (the file does not store it); 0 reads until the end.
func OpenTokenizer(path string, vocabSize int) (*Vocab, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	v, err := ParseTokenizer(b, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ParseTokenizer decodes a tokenizer.bin held in memory; see OpenTokenizer.
func ParseTokenizer(b []byte, vocabSize int) (*Vocab, error) {
	if vocabSize < 0 || vocabSize > MaxVocab {
		return nil, fmt.Errorf("%w: vocab size %d", ErrFormat, vocabSize)
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: tokenizer shorter than its 4-byte header", ErrFormat)
	}
	maxLen := binary.LittleEndian.Uint32(b)
	if maxLen > MaxTokenLen {
		return nil, fmt.Errorf("%w: max_token_length %d", ErrFormat, maxLen)
	}
	v := &Vocab{MaxTokenLength: int(maxLen)}
	off := 4
	for i := 0; vocabSize == 0 || i < vocabSize; i++ {
		if vocabSize == 0 && off == len(b) {
			break
		}
		if len(v.Tokens) >= MaxVocab {
			return nil, fmt.Errorf("%w: more than %d tokens", ErrFormat, MaxVocab)
		}
		if len(b)-off < 8 {
			return nil, fmt.Errorf("%w: token %d truncated at byte %d", ErrFormat, i, off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
		n := binary.LittleEndian.Uint32(b[off+4:])
		off += 8
		if n > maxLen && n > MaxTokenLen || int64(n) > int64(len(b)-off) {
			return nil, fmt.Errorf("%w: token %d length %d at byte %d", ErrFormat, i, n, off)
		}
		v.Tokens = append(v.Tokens, string(b[off:off+int(n)]))
		v.Scores = append(v.Scores, score)
		off += int(n)
	}
	if len(v.Tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrFormat)
	}
	return v, nil
}
