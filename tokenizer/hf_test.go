package tokenizer

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hfSpec describes a tokenizer.json to write.
type hfSpec struct {
	tokens    []string // by id; added tokens are listed in added
	added     map[int]bool
	merges    []string
	byteLevel bool
	pattern   string // Split regex before ByteLevel ("" for none)
	digits    bool   // a Digits step (individual digits) before ByteLevel
	nfc       bool
	bos, eos  string
	unk       string
	genEOS    []int // generation_config.json eos_token_id
	template  string
}

// writeHF writes spec as a Hugging Face tokenizer folder and returns it.
func writeHF(t testing.TB, spec hfSpec) string {
	t.Helper()
	vocab := map[string]int{}
	var added []map[string]any
	for i, s := range spec.tokens {
		if special, ok := spec.added[i]; ok {
			added = append(added, map[string]any{"id": i, "content": s, "special": special, "normalized": false})
			continue
		}
		vocab[s] = i
	}
	model := map[string]any{"type": "BPE", "vocab": vocab, "merges": spec.merges, "byte_fallback": !spec.byteLevel}
	if spec.unk != "" {
		model["unk_token"] = spec.unk
	}
	f := map[string]any{"version": "1.0", "added_tokens": added, "model": model}
	var norms []any
	if spec.nfc {
		norms = append(norms, map[string]any{"type": "NFC"})
	}
	if spec.byteLevel {
		pre := []any{map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": spec.pattern == ""}}
		if spec.pattern != "" {
			pre = append([]any{map[string]any{"type": "Split", "pattern": map[string]any{"Regex": spec.pattern}, "behavior": "Isolated"}}, pre...)
		}
		if spec.digits {
			pre = append([]any{map[string]any{"type": "Digits", "individual_digits": true}}, pre...)
		}
		f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": pre}
	} else {
		norms = append(norms, map[string]any{"type": "Prepend", "prepend": spaceSymbol},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": spaceSymbol})
		f["post_processor"] = map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel"},
			map[string]any{"type": "TemplateProcessing", "single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": spec.bos, "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}}}}}
	}
	if len(norms) > 0 {
		f["normalizer"] = map[string]any{"type": "Sequence", "normalizers": norms}
	}
	dir := t.TempDir()
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer.json", f)
	write("tokenizer_config.json", map[string]any{"bos_token": spec.bos, "eos_token": map[string]any{"content": spec.eos}, "chat_template": spec.template})
	if spec.genEOS != nil {
		write("generation_config.json", map[string]any{"eos_token_id": spec.genEOS})
	}
	return dir
}

// spmMerges derives BPE merges from a SentencePiece vocabulary the way
// converters do: each piece, best score first, merges every split of it
// into two pieces of the vocabulary.
func spmMerges(tk *Tokenizer) []string {
	ids := make([]int32, 0, tk.VocabSize())
	for id := range int32(tk.VocabSize()) {
		if tk.types[id] == TypeNormal {
			ids = append(ids, id)
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case tk.scores[a] > tk.scores[b]:
			return -1
		case tk.scores[a] < tk.scores[b]:
			return 1
		}
		return 0
	})
	var out []string
	for _, id := range ids {
		p := tk.tokens[id]
		for i := 1; i < len(p); i++ {
			if _, ok := tk.mergeable(p[:i]); ok {
				if _, ok := tk.mergeable(p[i:]); ok {
					out = append(out, p[:i]+" "+p[i:])
				}
			}
		}
	}
	return out
}

// TestHFByteFallbackMatchesGGUF converts the stories260K vocabulary to a
// tokenizer.json (byte-fallback BPE, U+2581 spaces) and checks that it
// encodes like the GGUF file's own tokenizer.
func TestHFByteFallbackMatchesGGUF(t *testing.T) {
	_, _, gg := loadAll(t)
	spec := hfSpec{tokens: gg.tokens, added: map[int]bool{1: true, 2: true}, merges: spmMerges(gg), bos: "<s>", eos: "</s>", unk: "<unk>"}
	tk, err := Open(writeHF(t, spec), 0)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Kind() != SPM || !tk.AddBOS || !tk.AddSpacePrefix || tk.BOS != 1 || tk.EOS != 2 || tk.UNK != 0 || tk.types[0] != TypeUnknown {
		t.Fatalf("kind %v addBOS %v prefix %v BOS %d EOS %d UNK %d", tk.Kind(), tk.AddBOS, tk.AddSpacePrefix, tk.BOS, tk.EOS, tk.UNK)
	}
	if got := tk.Encode(refText, true); !slices.Equal(got, gg.Encode(refText, true)) {
		t.Fatalf("reference text:\n got %v\nwant %v", got, gg.Encode(refText, true))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		s := randomText(rng)
		if got, want := tk.Encode(s, false), gg.Encode(s, false); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", s, got, want)
		}
	}
	if !slices.Equal(tk.EOG(), []int32{2}) {
		t.Fatalf("EOG %v", tk.EOG())
	}
}

// TestHFByteLevelMatchesGGUF writes the byte-level vocabulary of tinyGPT2
// as a tokenizer.json with a Llama 3 split pattern and added tokens.
func TestHFByteLevelMatchesGGUF(t *testing.T) {
	gg := tinyGPT2(t, "llama3")
	tokens := append(slices.Clone(gg.tokens), "<|im_start|>", "<|im_end|>", "<think>")
	n := len(gg.tokens)
	spec := hfSpec{
		tokens: tokens, added: map[int]bool{n - 1: true, n: true, n + 1: true, n + 2: false},
		merges: mergesOf(gg), byteLevel: true, nfc: true, eos: "<|im_end|>", genEOS: []int{n + 1, n - 1},
		pattern:  `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		template: "{{ messages }}",
	}
	dir := writeHF(t, spec)
	tk, err := Open(filepath.Join(dir, "tokenizer.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Kind() != BPE || tk.AddBOS || tk.EOS != int32(n+1) || tk.pre != preLlama3 {
		t.Fatalf("kind %v addBOS %v EOS %d pre %v", tk.Kind(), tk.AddBOS, tk.EOS, tk.pre)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		s := randomText(rng) + " the cat 12345\n\n"
		if got, want := tk.Encode(s, false), gg.Encode(s, false); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", s, got, want)
		}
	}
	// NFC: a decomposed é encodes as the composed one.
	if got, want := tk.Encode("cafe\u0301", false), tk.Encode("caf\u00e9", false); !slices.Equal(got, want) {
		t.Fatalf("NFC: %v vs %v", got, want)
	}
	if !slices.Equal(tk.EOG(), []int32{int32(n + 1), int32(n - 1)}) {
		t.Fatalf("EOG %v", tk.EOG())
	}
	padded, err := Open(dir, n+10)
	if err != nil || padded.VocabSize() != n+10 || padded.Token(int32(n+5)) != "" || len(padded.AppendPiece(nil, int32(n+5))) != 0 ||
		!slices.Equal(padded.Encode("the cat", false), tk.Encode("the cat", false)) {
		t.Fatalf("padded to %d: %v, %d tokens", n+10, err, padded.VocabSize())
	}
	if s, err := HFChatTemplate(dir); err != nil || s != "{{ messages }}" {
		t.Fatalf("chat template %q, %v", s, err)
	}
	if !slices.Equal(tk.ControlTexts(), []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
		t.Fatalf("control texts %q", tk.ControlTexts())
	}
	// Content: user-defined tokens match, control tokens stay text.
	got := tk.EncodeContent("<think>the<|im_start|>")
	if got[0] != int32(n+2) || slices.Contains(got, int32(n)) || tk.Decode(got[1:]) != "the<|im_start|>" {
		t.Fatalf("EncodeContent: %v", got)
	}
	if got := tk.EncodeSpecial("<|im_start|>the", false); got[0] != int32(n) {
		t.Fatalf("EncodeSpecial: %v", got)
	}
}

// TestHFDigits: a Digits step before GPT-2's pattern (SmolLM2) splits
// digits as GGUF's "smollm" pre-tokenizer does.
func TestHFDigits(t *testing.T) {
	gg := tinyGPT2(t, "smollm")
	n := len(gg.tokens)
	tk, err := Open(writeHF(t, hfSpec{tokens: gg.tokens, added: map[int]bool{n - 1: true}, merges: mergesOf(gg),
		byteLevel: true, digits: true, eos: "<|endoftext|>"}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if tk.pre != preDigits {
		t.Fatalf("pre %v", tk.pre)
	}
	for _, s := range []string{"the cat 123", "x12 y", "a  1\n\n2"} {
		if got, want := tk.Encode(s, false), gg.Encode(s, false); !slices.Equal(got, want) || slices.Contains(got, gg.index["12"]) {
			t.Fatalf("%q: got %v, want %v (digits one by one)", s, got, want)
		}
	}
}

func mergesOf(tk *Tokenizer) []string {
	out := make([]string, len(tk.merges))
	for m, r := range tk.merges {
		out[r] = m
	}
	return out
}

func TestGGUFEndOfGeneration(t *testing.T) {
	gg := tinyGPT2(t, "gpt2") // <|endoftext|> is EOS
	if !slices.Equal(gg.EOG(), []int32{int32(gg.VocabSize() - 1)}) {
		t.Fatalf("EOG %v", gg.EOG())
	}
	if !gg.IsEOG(int32(gg.VocabSize()-1)) || gg.IsEOG(0) {
		t.Fatal("IsEOG")
	}
}

func TestHFRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"wordpiece.json": `{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`,
		"plain.json":     `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`,
		"badmerge.json":  `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}, "pre_tokenizer": {"type": "ByteLevel"}}`,
		"negative.json":  `{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}}`,
		"broken.json":    `{"model": `,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(p, 0); err == nil || !strings.Contains(err.Error(), "tokenizer") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzHFTokenizer: any tokenizer.json is refused with ErrFormat or gives a
// tokenizer that encodes to ids of its vocabulary and decodes them.
func FuzzHFTokenizer(f *testing.F) {
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel"}}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"<0x61>": 0, "▁": 1}, "merges": [], "byte_fallback": true}, "normalizer": {"type": "NFC"}}`))
	f.Add([]byte(`{"added_tokens": [{"id": 3, "content": "<s>", "special": true}], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a"]]}, "pre_tokenizer": {"type": "Metaspace"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var file hfFile
		if json.Unmarshal(b, &file) != nil {
			return
		}
		tk, err := fromHF(&file, &hfConfig{})
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		ids := tk.Encode("ab a", true)
		for _, id := range ids {
			if id < 0 || int(id) >= tk.VocabSize() {
				t.Fatalf("id %d outside %d tokens", id, tk.VocabSize())
			}
		}
		_ = tk.Decode(ids)
	})
}
