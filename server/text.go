package server

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/tokenizer"
	"github.com/tokenrouter/tokenrouter/tokenizer/simtok"
)

// textModel is the text side of a deployment: encoding prompts (with BOS
// and special tokens) and decoding output incrementally.
type textModel struct {
	encode  func(string) []int32
	content func(string) []int32 // message text: control tokens never parsed
	piece   func([]byte, int32) []byte
	special func(string) (int32, bool)
	// chat are the tokenizer's texts a chat template renders with.
	chat   chat.Options
	eog    []int32 // the vocabulary's end-of-generation tokens
	bos    int32
	addBOS bool
	// stripFirstSpace removes the dummy-prefix space SentencePiece puts
	// before the first output piece.
	stripFirstSpace bool
	sim             bool
	kind            string
	// control reports the tokens that are not text.
	control func(int32) bool
}

// vocab returns, built on first use, the vocabulary of size tokens for
// structured output: each token's bytes as the text model prints them,
// none for control tokens (which a mask never allows) and ids it does not
// know.
func (t *textModel) vocab(size int) func() *constrain.Vocab {
	return sync.OnceValue(func() *constrain.Vocab {
		return constrain.NewVocab(size, func(id int) []byte {
			if t.control(int32(id)) {
				return nil
			}
			return t.piece(nil, int32(id))
		})
	})
}

// OutputVocab returns, built on first use, the structured-output
// vocabulary of a model with text side t and size tokens, for a
// sub-server that runs apart from the server (subserver.Config.Vocab).
func OutputVocab(t loader.Text, size int) func() *constrain.Vocab {
	return textOf(t).vocab(size)
}

// textOf is the text model of a model's text side: its tokenizer, or the
// simulated vocabulary when it has none.
func textOf(t loader.Text) *textModel {
	if t.Tokenizer == nil {
		return simText()
	}
	return realText(t.Tokenizer)
}

// simText is the sim tokenizer's text model.
func simText() *textModel {
	var t simtok.Tokenizer
	return &textModel{
		encode: t.Encode, content: t.Encode, piece: t.AppendPiece, bos: simtok.BOS, addBOS: true, sim: true, kind: "sim",
		chat:    chat.Options{AddGenerationPrompt: true},
		special: func(string) (int32, bool) { return 0, false },
		control: func(id int32) bool { return id < simtok.ByteBase },
	}
}

// realText wraps a model's own tokenizer.
func realText(t *tokenizer.Tokenizer) *textModel {
	kind := "spm"
	if t.Kind() == tokenizer.BPE {
		kind = "bpe"
	}
	return &textModel{
		encode:  func(s string) []int32 { return t.Encode(s, false) },
		content: t.EncodeContent,
		piece:   t.AppendPiece,
		chat:    chat.Options{AddGenerationPrompt: true, BOS: t.Token(t.BOS), EOS: t.Token(t.EOS), Specials: t.ControlTexts()},
		eog:     t.EOG(),
		special: func(name string) (int32, bool) {
			id, ok := t.Lookup(name)
			if !ok || !(t.IsControl(id) || name == "<s>" || name == "</s>" || strings.HasPrefix(name, "<|")) {
				return 0, false
			}
			return id, true
		},
		control: t.IsControl,
		bos:     t.BOS, addBOS: t.AddBOS && t.BOS >= 0,
		stripFirstSpace: t.Kind() == tokenizer.SPM && t.AddSpacePrefix,
		kind:            kind,
	}
}

// encodeText encodes a plain prompt, starting with BOS when the
// tokenizer asks for it.
func (t *textModel) encodeText(s string) []int32 {
	ids := t.encode(s)
	if t.addBOS && (len(ids) == 0 || ids[0] != t.bos) {
		ids = append([]int32{t.bos}, ids...)
	}
	return ids
}

// encodeChat encodes rendered chat segments: special segments become their
// token ids (or text when the vocabulary lacks them), text segments are
// encoded without parsing control tokens.
func (t *textModel) encodeChat(segs []chat.Segment) []int32 {
	var ids []int32
	for _, s := range segs {
		if s.Special {
			if id, ok := t.special(s.Text); ok {
				ids = append(ids, id)
				continue
			}
		}
		ids = append(ids, t.content(s.Text)...)
	}
	if t.addBOS && (len(ids) == 0 || ids[0] != t.bos) {
		ids = append([]int32{t.bos}, ids...)
	}
	return ids
}

// detok decodes output tokens incrementally: it only releases whole UTF-8
// characters (a character may span several byte tokens) and it strips the
// dummy-prefix space of the first piece.
type detok struct {
	t       *textModel
	pending []byte
	started bool
}

// add decodes id and returns the text that became complete.
func (d *detok) add(id int32) string {
	n := len(d.pending)
	d.pending = d.t.piece(d.pending, id)
	if !d.started && len(d.pending) > n {
		d.started = true
		if d.t.stripFirstSpace && d.pending[n] == ' ' {
			d.pending = append(d.pending[:n], d.pending[n+1:]...)
		}
	}
	// Release everything up to the last incomplete character.
	end := len(d.pending)
	for i := 1; i <= utf8.UTFMax && i <= len(d.pending); i++ {
		b := d.pending[len(d.pending)-i]
		if b < 0x80 {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(d.pending[len(d.pending)-i:]) {
				end = len(d.pending) - i
			}
			break
		}
	}
	out := strings.ToValidUTF8(string(d.pending[:end]), "\uFFFD")
	d.pending = append(d.pending[:0], d.pending[end:]...)
	return out
}

// flush returns what is left (an incomplete character becomes U+FFFD).
func (d *detok) flush() string {
	out := strings.ToValidUTF8(string(d.pending), "\uFFFD")
	d.pending = d.pending[:0]
	return out
}

// stopper finds stop strings in streamed text. It holds back only the
// text that could still be the start of a stop string (the longest end of
// the text that is a beginning of one), so a stop string split across
// pieces is still found, and never releases text past a stop.
type stopper struct {
	stops []string
	fail  [][]int // per stop, its failure function (longest proper border of each prefix)
	buf   string
}

func newStopper(stops []string) *stopper {
	s := &stopper{}
	for _, x := range stops {
		if x == "" {
			continue
		}
		s.stops = append(s.stops, x)
		s.fail = append(s.fail, borders(x))
	}
	return s
}

// borders returns f with f[i] the length of the longest proper prefix of
// x[:i+1] that is also its suffix.
func borders(x string) []int {
	f := make([]int, len(x))
	k := 0
	for i := 1; i < len(x); i++ {
		for k > 0 && x[i] != x[k] {
			k = f[k-1]
		}
		if x[i] == x[k] {
			k++
		}
		f[i] = k
	}
	return f
}

// partial returns the length of the longest end of text that is a proper
// beginning of stop k (a stop that may continue in the next piece).
func (s *stopper) partial(k int, text string) int {
	x, f := s.stops[k], s.fail[k]
	m := 0
	for i := 0; i < len(text); i++ {
		for m > 0 && (m == len(x) || text[i] != x[m]) {
			m = f[m-1]
		}
		if text[i] == x[m] {
			m++
		}
	}
	if m == len(x) { // a whole match: add looks for those first
		m = f[m-1]
	}
	return m
}

// add appends text; it returns the text safe to release and whether a
// stop string was found (the released text ends before it).
func (s *stopper) add(text string) (string, bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	s.buf += text
	cut := -1
	for _, x := range s.stops {
		if i := strings.Index(s.buf, x); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := s.buf[:cut]
		s.buf = ""
		return out, true
	}
	hold := 0
	for k := range s.stops {
		hold = max(hold, s.partial(k, s.buf))
	}
	keep := len(s.buf) - hold
	for keep > 0 && keep < len(s.buf) && !utf8.RuneStart(s.buf[keep]) {
		keep--
	}
	if keep <= 0 {
		return "", false
	}
	out := s.buf[:keep]
	s.buf = s.buf[keep:]
	return out, false
}

// flush releases the held text at the end of the output.
func (s *stopper) flush() string {
	out := s.buf
	s.buf = ""
	return out
}
