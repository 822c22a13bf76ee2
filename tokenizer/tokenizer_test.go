package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// refStories are the first 100 greedy ids of stories260K (SOURCES.md); the
// model wrote canonical tokenizations, so its text must encode back to them.
var refStories = []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13, 438, 310, 439, 419, 357, 336, 432, 313, 438, 310, 432, 278, 316, 439, 419, 298, 414, 267, 265, 282, 295, 433, 426, 436, 317, 286, 296, 418, 269, 279, 292, 416, 439, 413, 409, 416, 327, 263}

const refText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know w"

func TestReferenceTextRoundTrip(t *testing.T) {
	sp, bin, gg := loadAll(t)
	for name, tk := range map[string]*Tokenizer{"tok512.model": sp, "tok512.bin": bin, "stories260K.gguf": gg} {
		if got := tk.Decode(refStories); got != refText {
			t.Errorf("%s: decode %q", name, got)
		}
		got := tk.Encode(refText, true)
		if got[0] != 1 || !slices.Equal(got[1:], refStories) {
			t.Errorf("%s: encode\n got %v\nwant [1 %v]", name, got, refStories)
		}
	}
	// The three files describe the same vocabulary.
	for i := range int32(512) {
		if sp.Token(i) != gg.Token(i) || bin.Token(i) != gg.Token(i) || sp.types[i] != gg.types[i] || bin.types[i] != gg.types[i] || sp.scores[i] != gg.scores[i] || bin.scores[i] != gg.scores[i] {
			t.Fatalf("token %d differs: %q %q %q", i, sp.Token(i), bin.Token(i), gg.Token(i))
		}
	}
}

// TestSentencePieceCases checks hand-derived tokenizations: ids of byte
// tokens are 3 + the byte; U+2581 is 410; SentencePiece's normaliser
// (tok512.model sets remove_extra_whitespaces) strips and collapses spaces,
// while GGUF vocabularies keep them as llama.cpp does.
func TestSentencePieceCases(t *testing.T) {
	sp, _, gg := loadAll(t)
	cases := []struct {
		text   string
		sp, gg []int32 // gg nil means same as sp
	}{
		{"", []int32{}, nil},
		{"Hello world", []int32{346, 306, 414, 263, 304, 341}, nil},                           // ▁He ll o ▁w or ld
		{"a\nb", []int32{261, 13, 430}, nil},                                                  // ▁a <0x0A> b
		{"x\t1", []int32{410, 444, 12, 475}, nil},                                             // ▁ x <0x09> 1
		{"é", []int32{410, 485}, nil},                                                         // ▁ é
		{"日本", []int32{410, 3 + 0xE6, 3 + 0x97, 3 + 0xA5, 3 + 0xE6, 3 + 0x9C, 3 + 0xAC}, nil}, // bytes outside the vocabulary
		{"😀", []int32{410, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}, nil},
		{"Tom's dog, \"Max\", ran!", []int32{274, 287, 439, 419, 400, 428, 432, 313, 446, 412, 444, 436, 432, 352, 303, 443}, nil},
		{"a  b", []int32{261, 268}, []int32{261, 410, 268}},
		{" lead", []int32{278, 411, 380}, []int32{410, 278, 411, 380}},
		{"trail ", []int32{259, 420, 412, 290}, []int32{259, 420, 412, 290, 410}},
		{"   ", []int32{}, []int32{410, 410, 410, 410}},
	}
	for _, c := range cases {
		if got := sp.Encode(c.text, false); !slices.Equal(got, c.sp) {
			t.Errorf("SentencePiece %q: got %v, want %v", c.text, got, c.sp)
		}
		want := c.gg
		if want == nil {
			want = c.sp
		}
		if got := gg.Encode(c.text, false); !slices.Equal(got, want) {
			t.Errorf("GGUF %q: got %v, want %v", c.text, got, want)
		}
	}
	if got := gg.Encode("", true); !slices.Equal(got, []int32{1}) {
		t.Errorf("empty text with BOS: %v", got)
	}
}

// naiveSPM is an independent oracle: llama2.c's greedy merge loop (merge the
// best-scoring adjacent pair, leftmost on ties, until none is in the
// vocabulary) over characters, with byte fallback.
func naiveSPM(tk *Tokenizer, text string, collapse bool) []int32 {
	if collapse {
		text = strings.Trim(text, " ")
		for strings.Contains(text, "  ") {
			text = strings.ReplaceAll(text, "  ", " ")
		}
	}
	if text == "" {
		return []int32{}
	}
	text = strings.ReplaceAll(" "+text, " ", "\u2581")
	var syms []string
	for _, r := range text {
		syms = append(syms, string(r))
	}
	for {
		best, bestScore := -1, float32(0)
		for i := 0; i+1 < len(syms); i++ {
			id, ok := tk.index[syms[i]+syms[i+1]]
			if ok && tk.types[id] == TypeNormal && (best < 0 || tk.scores[id] > bestScore) {
				best, bestScore = i, tk.scores[id]
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	out := []int32{}
	for _, s := range syms {
		if id, ok := tk.index[s]; ok {
			out = append(out, id)
			continue
		}
		for i := 0; i < len(s); i++ {
			out = append(out, 3+int32(s[i]))
		}
	}
	return out
}

func randomText(rng *rand.Rand) string {
	alphabet := []string{"a", "e", "t", "h", "o", "n", "s", "i", "l", "r", "d", "y", "T", "L", "O", " ", " ", " ", " ", "  ", ",", ".", "'", "\"", "!", "?", "\n", "\t", "é", "ü", "日", "😀", "1", "2", "0", "-", "ing", "the", "was"}
	var sb strings.Builder
	for range rng.IntN(40) {
		sb.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return sb.String()
}

func TestSentencePieceAgainstOracle(t *testing.T) {
	sp, bin, gg := loadAll(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		s := randomText(rng)
		if got, want := sp.Encode(s, false), naiveSPM(sp, s, true); !slices.Equal(got, want) {
			t.Fatalf("SentencePiece %q: got %v, oracle %v", s, got, want)
		}
		want := naiveSPM(gg, s, false)
		if got := gg.Encode(s, false); !slices.Equal(got, want) {
			t.Fatalf("GGUF %q: got %v, oracle %v", s, got, want)
		}
		if got := bin.Encode(s, false); !slices.Equal(got, want) {
			t.Fatalf("tokenizer.bin %q: got %v, oracle %v", s, got, want)
		}
		if back := gg.Decode(gg.Encode(s, true)); back != s {
			t.Fatalf("round trip %q -> %q", s, back)
		}
	}
}

// tinyGPT2 is a byte-level BPE vocabulary: the 256 byte runes plus merges.
func tinyGPT2(t testing.TB, pre string) *Tokenizer {
	var tokens []string
	for b := range 256 {
		tokens = append(tokens, string(byteToRune(byte(b))))
	}
	merges := []string{"Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at", "1 2", "12 3", "Ċ Ċ", "Ġ Ġ"}
	for _, m := range merges {
		tokens = append(tokens, strings.ReplaceAll(m, " ", ""))
	}
	tokens = append(tokens, "<|endoftext|>")
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = TypeNormal
	}
	types[len(types)-1] = TypeControl
	w := gguf.NewWriter()
	for k, v := range map[string]any{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
		"tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": merges,
		"tokenizer.ggml.bos_token_id": uint32(len(tokens) - 1), "tokenizer.ggml.eos_token_id": uint32(len(tokens) - 1),
		"tokenizer.ggml.add_bos_token": false,
	} {
		if err := w.AddKV(k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestByteLevelBPE(t *testing.T) {
	tk := tinyGPT2(t, "gpt2")
	if tk.Kind() != BPE || tk.AddBOS {
		t.Fatalf("kind %v addBOS %v", tk.Kind(), tk.AddBOS)
	}
	pieces := func(ids []int32) []string {
		var out []string
		for _, id := range ids {
			out = append(out, tk.Token(id))
		}
		return out
	}
	got := pieces(tk.Encode("the cat 123", false))
	want := []string{"t", "he", "Ġcat", "Ġ", "123"}
	if !slices.Equal(got, want) {
		t.Errorf("gpt2 pieces %q, want %q", got, want)
	}
	// Pre-tokenization patterns.
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		{"gpt2", "Hello world's  x!!\n\n", []string{"Hello", " world", "'s", " ", " x", "!!", "\n\n"}},
		{"gpt2", "a 12345 b", []string{"a", " 12345", " b"}},
		{"llama-bpe", "Hello world'S  x!!\n\n y", []string{"Hello", " world", "'S", " ", " x", "!!\n\n", " y"}},
		{"llama-bpe", "a 12345 b", []string{"a", " ", "123", "45", " b"}},
		{"llama-bpe", "x  \n\ty", []string{"x", "  \n", "\ty"}},
		{"qwen2", "a 123 b", []string{"a", " ", "1", "2", "3", " b"}},
		{"smollm", "a 123 b's", []string{"a", " ", "1", "2", "3", " b", "'s"}},
		{"smollm", "x2y  z", []string{"x", "2", "y", " ", " z"}},
	} {
		if got := preTokenize(preFor(c.pre), c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.pre, c.text, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, pre := range []string{"gpt2", "llama-bpe", "qwen2", "smollm"} {
		tk := tinyGPT2(t, pre)
		for range 500 {
			s := randomText(rng)
			if back := tk.Decode(tk.Encode(s, true)); back != s {
				t.Fatalf("%s round trip %q -> %q", pre, s, back)
			}
		}
	}
}

func TestByteRuneMapIsABijection(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteToRune(byte(b))
		if seen[r] {
			t.Fatalf("rune %U used twice", r)
		}
		seen[r] = true
		if back, ok := unicodeToByte(r); !ok || back != byte(b) {
			t.Fatalf("byte %d -> %U -> %d", b, r, back)
		}
	}
	if byteToRune(' ') != 'Ġ' || byteToRune('\n') != 'Ċ' {
		t.Fatal("GPT-2 byte map differs from the standard one")
	}
}

func TestBrokenSentencePieceModels(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":          {},
		"bad key":        {0x80},
		"field zero":     {0x00, 0x01},
		"bad length":     {0x0a, 0xff, 0xff, 0x03},
		"wire type 7":    {0x0f},
		"no pieces":      {0x12, 0x02, 0x18, 0x02}, // trainer_spec{model_type: BPE}
		"unigram model":  {0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x01},
		"truncated f32":  {0x0a, 0x03, 0x15, 0x00, 0x00},
		"truncated f64":  {0x09, 0x00},
		"varint overrun": {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := ParseSentencePiece(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzSentencePiece(f *testing.F) {
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x02})
	f.Add([]byte{0x0a, 0x05, 0x0a, 0x03, 0xe2, 0x96, 0x81, 0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := ParseSentencePiece(b)
		if err != nil {
			return
		}
		ids := tk.Encode("a ab\n日", true)
		_ = tk.Decode(ids)
	})
}

// FuzzEncodeRoundTrip checks Decode(Encode(s)) == s for valid UTF-8 on a
// small SentencePiece vocabulary with byte fallback and on a byte-level BPE
// vocabulary.
func FuzzEncodeRoundTrip(f *testing.F) {
	spm := tinySPM(f)
	bpe := tinyGPT2(f, "llama-bpe")
	f.Add("Hello, world!\n")
	f.Add("  leading and trailing  ")
	f.Add("日本語 😀 é\t")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if back := spm.Decode(spm.Encode(s, true)); back != s {
			t.Fatalf("spm %q -> %q", s, back)
		}
		if back := bpe.Decode(bpe.Encode(s, true)); back != s {
			t.Fatalf("bpe %q -> %q", s, back)
		}
	})
}

// tinySPM is a SentencePiece-style vocabulary with byte fallback.
func tinySPM(t testing.TB) *Tokenizer {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{TypeUnknown, TypeControl, TypeControl}
	for b := range 256 {
		tokens = append(tokens, "<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">")
		types = append(types, TypeByte)
	}
	for _, p := range []string{"\u2581", "\u2581t", "he", "\u2581the", "l", "o", "lo", "H", "e", "\u2581w", "r", "d"} {
		tokens = append(tokens, p)
		types = append(types, TypeNormal)
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	tk, err := newTokenizer(SPM, tokens, scores, types)
	if err != nil {
		t.Fatal(err)
	}
	tk.BOS, tk.EOS, tk.UNK, tk.AddBOS, tk.AddSpacePrefix = 1, 2, 0, true, true
	return tk
}

func TestEncodeSpecial(t *testing.T) {
	_, _, gg := loadAll(t)
	// "</s>" inside text is EOS; each fragment gets the dummy prefix again.
	got := gg.EncodeSpecial("Hello world</s>a", true)
	want := append(append([]int32{1}, gg.Encode("Hello world", false)...), 2)
	want = append(want, gg.Encode("a", false)...)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if plain := gg.Encode("</s>", false); slices.Contains(plain, 2) {
		t.Fatalf("Encode must treat special texts as plain text: %v", plain)
	}
	bpe := tinyGPT2(t, "gpt2")
	eot := int32(bpe.VocabSize() - 1)
	got = bpe.EncodeSpecial("the<|endoftext|>the", false)
	if len(got) != 5 || got[2] != eot || !slices.Equal(got[:2], got[3:]) {
		t.Fatalf("gpt2 special: %v", got)
	}
	if back := bpe.Decode(got); back != "thethe" {
		t.Fatalf("decode skips control tokens: %q", back)
	}
}
