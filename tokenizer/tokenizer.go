// Package tokenizer turns text into token ids and back for the model files
// TokenRouter runs: SentencePiece-style BPE with scores, byte fallback and a
// dummy-prefix space (GGUF tokenizer.ggml.model = "llama", SentencePiece
// .model protobufs and llama2.c tokenizer.bin), and byte-level BPE with
// merges and regex-style pre-tokenization (tokenizer.ggml.model = "gpt2").
// Encoding adds BOS the way llama.cpp does, and Decode inverts Encode.
package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
)

// Kind is the tokenization algorithm.
type Kind int

// Tokenizer kinds.
const (
	// SPM is SentencePiece-style BPE over characters with scores.
	SPM Kind = iota
	// BPE is byte-level BPE with ranked merges (GPT-2 style).
	BPE
)

// Token types as GGUF and SentencePiece number them.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// ErrFormat reports tokenizer data that cannot be used.
var ErrFormat = errors.New("tokenizer: malformed vocabulary")

const spaceSymbol = "\u2581"

// Tokenizer encodes and decodes text. It is immutable after construction
// and safe for concurrent use.
type Tokenizer struct {
	kind   Kind
	tokens []string // token texts as stored (▁ for spaces in SPM, byte-level runes in BPE)
	scores []float32
	types  []int32
	index  map[string]int32
	bytes  [256]int32 // SPM byte-fallback token for each byte, -1 if none
	merges map[string]int
	pre    preKind
	nfc    bool // normalise text to NFC before encoding

	special     []special // control and user-defined tokens
	userDefined []special // user-defined tokens alone
	eog         []int32   // end-of-generation tokens (setEOG)

	// BOS, EOS and UNK are special token ids (-1 when absent).
	BOS, EOS, UNK int32
	// AddBOS tells Encode to start with BOS when asked to add special tokens.
	AddBOS bool
	// AddEOS tells Encode to end with EOS when asked to add special tokens.
	AddEOS bool
	// AddSpacePrefix prepends a space (SentencePiece's dummy prefix).
	AddSpacePrefix bool
	// RemoveExtraWhitespace strips leading and trailing spaces and collapses
	// runs of spaces, as SentencePiece's normaliser does when its model asks.
	RemoveExtraWhitespace bool
}

// Kind reports the algorithm.
func (t *Tokenizer) Kind() Kind { return t.kind }

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the stored text of token id ("" when out of range).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Lookup returns the id of a token's stored text.
func (t *Tokenizer) Lookup(s string) (int32, bool) {
	id, ok := t.index[s]
	return id, ok
}

// IsControl reports whether id is a control token (BOS, EOS, ...).
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.types) && t.types[id] == TypeControl
}

func newTokenizer(kind Kind, tokens []string, scores []float32, types []int32) (*Tokenizer, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrFormat)
	}
	if len(tokens) > 1<<24 {
		return nil, fmt.Errorf("%w: %d tokens", ErrFormat, len(tokens))
	}
	if scores == nil {
		scores = make([]float32, len(tokens))
	}
	if types == nil {
		types = make([]int32, len(tokens))
		for i := range types {
			types[i] = TypeNormal
		}
	}
	if len(scores) != len(tokens) || len(types) != len(tokens) {
		return nil, fmt.Errorf("%w: %d tokens, %d scores, %d types", ErrFormat, len(tokens), len(scores), len(types))
	}
	t := &Tokenizer{kind: kind, tokens: tokens, scores: scores, types: types, BOS: -1, EOS: -1, UNK: -1}
	t.index = make(map[string]int32, len(tokens))
	for i := range t.bytes {
		t.bytes[i] = -1
	}
	for i, s := range tokens {
		if _, dup := t.index[s]; !dup {
			t.index[s] = int32(i)
		}
		if types[i] == TypeByte {
			var b byte
			if n, _ := fmt.Sscanf(s, "<0x%02X>", &b); n == 1 && len(s) == 6 {
				t.bytes[b] = int32(i)
			}
		}
	}
	t.indexSpecials()
	return t, nil
}

func (t *Tokenizer) validID(id int64) int32 {
	if id < 0 || id >= int64(len(t.tokens)) {
		return -1
	}
	return int32(id)
}

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, _ := f.String("tokenizer.ggml.model")
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: no tokenizer.ggml.tokens", ErrFormat)
	}
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	var t *Tokenizer
	var err error
	switch model {
	case "llama":
		if t, err = newTokenizer(SPM, tokens, scores, types); err != nil {
			return nil, err
		}
		t.AddBOS, t.AddSpacePrefix = true, true
		t.BOS, t.EOS, t.UNK = t.validID(1), t.validID(2), t.validID(0)
	case "gpt2":
		if t, err = newTokenizer(BPE, tokens, scores, types); err != nil {
			return nil, err
		}
		merges, _ := f.Strings("tokenizer.ggml.merges")
		t.setMerges(merges)
		pre, _ := f.String("tokenizer.ggml.pre")
		t.pre = preFor(pre)
		if s, ok := f.Strings("tokenizer.ggml.merges"); ok && len(s) == 0 {
			return nil, fmt.Errorf("%w: gpt2 tokenizer without merges", ErrFormat)
		}
	default:
		return nil, fmt.Errorf("%w: tokenizer.ggml.model %q is not supported (want llama or gpt2)", ErrFormat, model)
	}
	if v, ok := f.Uint("tokenizer.ggml.bos_token_id"); ok {
		t.BOS = t.validID(int64(v))
	}
	if v, ok := f.Uint("tokenizer.ggml.eos_token_id"); ok {
		t.EOS = t.validID(int64(v))
	}
	if v, ok := f.Uint("tokenizer.ggml.unknown_token_id"); ok {
		t.UNK = t.validID(int64(v))
	}
	if b, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		t.AddBOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_eos_token"); ok {
		t.AddEOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok && t.kind == SPM {
		t.AddSpacePrefix = b
	}
	if t.BOS < 0 {
		t.AddBOS = false
	}
	if t.EOS < 0 {
		t.AddEOS = false
	}
	var turn []int32
	for _, k := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if v, ok := f.Uint(k); ok {
			turn = append(turn, t.validID(int64(v)))
		}
	}
	t.setEOG(turn...)
	return t, nil
}

// FromLlama2c builds an SPM tokenizer from a llama2.c tokenizer.bin
// vocabulary: spaces become U+2581, "\n<s>\n" and "\n</s>\n" become the
// control tokens <s> and </s>, and <0xXX> pieces are byte tokens.
func FromLlama2c(v *llama2c.Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	tokens := make([]string, n)
	types := make([]int32, n)
	for i, s := range v.Tokens {
		types[i] = TypeNormal
		switch {
		case s == "\n<s>\n" || s == "<s>":
			s, types[i] = "<s>", TypeControl
		case s == "\n</s>\n" || s == "</s>":
			s, types[i] = "</s>", TypeControl
		case s == "<unk>":
			types[i] = TypeUnknown
		case len(s) == 6 && strings.HasPrefix(s, "<0x") && s[5] == '>':
			types[i] = TypeByte
		}
		tokens[i] = strings.ReplaceAll(s, " ", spaceSymbol)
	}
	t, err := newTokenizer(SPM, tokens, append([]float32(nil), v.Scores...), types)
	if err != nil {
		return nil, err
	}
	t.AddBOS, t.AddSpacePrefix = true, true
	t.UNK = t.lookupType("<unk>", TypeUnknown)
	t.BOS = t.lookupType("<s>", TypeControl)
	t.EOS = t.lookupType("</s>", TypeControl)
	if t.BOS < 0 {
		t.AddBOS = false
	}
	t.setEOG()
	return t, nil
}

func (t *Tokenizer) lookupType(s string, typ int32) int32 {
	if id, ok := t.index[s]; ok && t.types[id] == typ {
		return id
	}
	return -1
}

// Encode tokenizes text. With addSpecial it adds BOS (and EOS) as the
// vocabulary asks, like llama.cpp's tokenizer with add_special set.
// Control-token texts inside text are treated as plain text.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	var out []int32
	if addSpecial && t.AddBOS {
		out = append(out, t.BOS)
	}
	out = t.encodeFragment(out, text)
	if addSpecial && t.AddEOS {
		out = append(out, t.EOS)
	}
	return out
}

// AppendPiece appends the text of token id to dst, as a streaming printer
// shows it: control tokens add nothing, byte tokens add their raw byte (so
// a multi-byte character spans several calls) and U+2581 becomes a space.
func (t *Tokenizer) AppendPiece(dst []byte, id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return dst
	}
	s := t.tokens[id]
	switch t.types[id] {
	case TypeControl, TypeUnused:
		return dst
	case TypeUnknown:
		if t.kind == SPM {
			return append(dst, " \u2047 "...)
		}
	case TypeByte:
		if t.kind == SPM {
			for b, bid := range t.bytes {
				if bid == id {
					return append(dst, byte(b))
				}
			}
		}
	}
	if t.kind == BPE {
		if t.types[id] == TypeUserDefined {
			return append(dst, s...)
		}
		for _, r := range s {
			if b, ok := unicodeToByte(r); ok {
				dst = append(dst, b)
			} else {
				dst = utf8.AppendRune(dst, r)
			}
		}
		return dst
	}
	for len(s) > 0 {
		if strings.HasPrefix(s, spaceSymbol) {
			dst = append(dst, ' ')
			s = s[len(spaceSymbol):]
			continue
		}
		i := strings.Index(s, spaceSymbol)
		if i < 0 {
			i = len(s)
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
	}
	return dst
}

// Decode turns ids back into text: Decode(Encode(s, false)) == s for text
// the vocabulary covers (SentencePiece normalisation aside). Control tokens
// are skipped and the dummy-prefix space of the first piece is removed.
func (t *Tokenizer) Decode(ids []int32) string {
	var b []byte
	first := true
	for _, id := range ids {
		n := len(b)
		b = t.AppendPiece(b, id)
		if first && len(b) > n {
			first = false
			if t.kind == SPM && t.AddSpacePrefix && b[n] == ' ' {
				b = append(b[:n], b[n+1:]...)
			}
		}
	}
	return string(b)
}

// SameVocabulary checks that two tokenizers give every id the same text
// (control tokens are compared by id, since their spellings differ between
// file formats) and the same special tokens, so that models using them can
// share one sequence.
func SameVocabulary(a, b *Tokenizer) error {
	if a.VocabSize() != b.VocabSize() {
		return fmt.Errorf("vocabularies of %d and %d tokens", a.VocabSize(), b.VocabSize())
	}
	if a.BOS != b.BOS || a.EOS != b.EOS {
		return fmt.Errorf("BOS/EOS %d/%d and %d/%d differ", a.BOS, a.EOS, b.BOS, b.EOS)
	}
	for id := range int32(a.VocabSize()) {
		if a.IsControl(id) != b.IsControl(id) {
			return fmt.Errorf("token %d is a control token in one vocabulary only", id)
		}
		if !a.IsControl(id) && !bytes.Equal(a.AppendPiece(nil, id), b.AppendPiece(nil, id)) {
			return fmt.Errorf("token %d is %q in one vocabulary and %q in the other", id, a.AppendPiece(nil, id), b.AppendPiece(nil, id))
		}
	}
	return nil
}
