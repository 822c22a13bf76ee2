package synth

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// write generates a model in memory and parses it.
func write(t *testing.T, s Shape, m quantize.Mix, opt Options) (*gguf.File, []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := Write(context.Background(), &b, s, m, opt); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f, b.Bytes()
}

// TestTinyShapes generates each tiny shape in two mixes and checks the
// file: tensor types as the mix decides, metadata llama.cpp reads, weights
// distributed as promised, and a tokenizer this repository loads.
func TestTinyShapes(t *testing.T) {
	for name, mixes := range map[string][]string{"tiny-llama": {"Q4_K_M", "F16"}, "tiny-qwen2": {"Q4_K_M", "Q8_0"},
		"tiny-qwen3": {"Q8_0"}, "tiny-llama3": {"Q8_0"}, "tiny-gemma2": {"Q8_0"}, "tiny-gemma3": {"Q8_0"}, "tiny-phi3": {"Q4_K_M"}} {
		s, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, mix := range mixes {
			m, _ := quantize.Lookup(mix)
			f, _ := write(t, s, m, Options{Seed: 7, Threads: 2})
			checkTypes(t, f, s, m)
			checkMeta(t, f, s)
			checkWeights(t, f, m)
		}
	}
}

// TestEveryType generates a one-layer model in every tensor type (pure
// mixes), so each type is written through the whole path.
func TestEveryType(t *testing.T) {
	s, _ := Lookup("tiny-qwen2")
	s.Layers, s.FFN, s.Vocab = 1, 256, 260
	for _, typ := range []gguf.TensorType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		m, err := quantize.Pure(typ)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := write(t, s, m, Options{Seed: 1, Threads: 2})
		checkTypes(t, f, s, m)
		checkWeights(t, f, m)
		if ti, _ := f.Tensor("blk.0.ffn_up.weight"); ti.Type != typ {
			t.Errorf("pure %s: ffn_up is %s", typ, ti.Type)
		}
	}
}

// checkTypes compares the file's tensors with the mix's choice.
func checkTypes(t *testing.T, f *gguf.File, s Shape, m quantize.Mix) {
	t.Helper()
	_, want := s.Header(m)
	if len(f.Tensors) != len(want) {
		t.Fatalf("%s %s: %d tensors, want %d", s.Name, m.Name, len(f.Tensors), len(want))
	}
	for i := range want {
		if got := f.Tensors[i]; got.Name != want[i].Name || got.Type != want[i].Type {
			t.Fatalf("%s %s: tensor %d is %s %s, want %s %s", s.Name, m.Name, i, got.Name, got.Type, want[i].Name, want[i].Type)
		}
	}
	if ft, _ := f.Uint("general.file_type"); ft != uint64(m.FileType) {
		t.Errorf("%s %s: file type %d", s.Name, m.Name, ft)
	}
}

func checkMeta(t *testing.T, f *gguf.File, s Shape) {
	t.Helper()
	a := s.Arch + "."
	for key, want := range map[string]uint64{
		a + "embedding_length": uint64(s.Dim), a + "block_count": uint64(s.Layers), a + "feed_forward_length": uint64(s.FFN),
		a + "attention.head_count": uint64(s.Heads), a + "attention.head_count_kv": uint64(s.KVHeads),
		a + "context_length": uint64(s.Context), "general.alignment": 32,
	} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s: %s = %d, %v; want %d", s.Name, key, got, ok, want)
		}
	}
	if base, _ := f.Float(a + "rope.freq_base"); base != float64(s.RopeBase) {
		t.Errorf("%s: rope base %v", s.Name, base)
	}
	if f.Arch() != s.Arch {
		t.Errorf("%s: arch %q", s.Name, f.Arch())
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatalf("%s: tokenizer: %v", s.Name, err)
	}
	if tok.VocabSize() != s.Vocab {
		t.Errorf("%s: %d tokens, want %d", s.Name, tok.VocabSize(), s.Vocab)
	}
	text := "hello world, the quick brown fox 42!"
	ids := tok.Encode(text, false)
	if got := tok.Decode(ids); got != text || len(ids) >= len(text) {
		t.Errorf("%s: %q encodes to %d ids and decodes to %q", s.Name, text, len(ids), got)
	}
	if id, ok := tok.Lookup("<|im_end|>"); !ok || !tok.IsControl(id) {
		t.Errorf("%s: <|im_end|> is not a control token", s.Name)
	}
}

// checkWeights decodes every tensor: norms are 1, weights and biases have
// mean about 0 and deviation about Sigma (within the type's error).
func checkWeights(t *testing.T, f *gguf.File, m quantize.Mix) {
	t.Helper()
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		x, err := f.Floats(ti)
		if err != nil {
			t.Fatal(err)
		}
		var sum, sq float64
		for _, v := range x {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		n := float64(len(x))
		mean, sd := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		if strings.HasPrefix(ti.Name, "rope_") { // frequency divisors: at least 1, rising
			if !slices.IsSorted(x) || x[0] != 1 || x[len(x)-1] <= 1 {
				t.Fatalf("%s %s: rotary factors %v", m.Name, ti.Name, x)
			}
			continue
		}
		if strings.HasSuffix(ti.Name, "_norm.weight") {
			if mean != 1 || sd != 0 {
				t.Fatalf("%s %s: norm mean %v sd %v", m.Name, ti.Name, mean, sd)
			}
			continue
		}
		if math.Abs(mean) > 5*Sigma/math.Sqrt(n)+0.002 || math.Abs(sd-Sigma) > 0.15*Sigma+5*Sigma/math.Sqrt(n) {
			t.Fatalf("%s %s (%s): mean %v, sd %v", m.Name, ti.Name, ti.Type, mean, sd)
		}
	}
}

// TestWriteDeterministic checks that the seed alone decides the file.
func TestWriteDeterministic(t *testing.T) {
	s, _ := Lookup("tiny-qwen2")
	m, _ := quantize.Lookup("Q4_K_M")
	_, a := write(t, s, m, Options{Seed: 3, Threads: 1})
	_, b := write(t, s, m, Options{Seed: 3, Threads: 4})
	_, c := write(t, s, m, Options{Seed: 4, Threads: 2})
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different thread counts: files differ")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds: same file")
	}
}

// TestRealShapesHeaders checks the tensors of the named real shapes
// without generating their weights: parameter counts as published.
func TestRealShapesHeaders(t *testing.T) {
	for name, params := range map[string]uint64{
		"smollm2-135m": 134515008, "smollm2-360m": 361821120, "qwen2.5-0.5b": 494032768, "qwen2.5-1.5b": 1543714304,
		"qwen3-0.6b": 596049920, "llama3.2-1b": 1235814400, "mistral-7b-v0.1": 7241732096, "gemma2-2b": 2614341888,
		"gemma3-270m": 268098176, "gemma3-1b": 999885952, "phi3-mini": 3821079552, "phi3.5-mini": 3821079552,
	} {
		s, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, ti := range s.Tensors() {
			if !strings.HasPrefix(ti.Name, "rope_") { // not parameters
				n += ti.Elems()
			}
		}
		if n != params {
			t.Errorf("%s: %d parameters, want %d", name, n, params)
		}
	}
}

// TestVocabularies checks every shape's vocabulary for what BPE loaders
// require: distinct tokens, merges of existing tokens into existing tokens.
func TestVocabularies(t *testing.T) {
	done := map[[3]int]bool{}
	for _, s := range Shapes() {
		key := [3]int{s.Vocab, b2i(s.SpecialsFirst), len(s.extraTokens())}
		if done[key] {
			continue
		}
		done[key] = true
		v := buildVocab(s.Vocab, s.SpecialsFirst, s.extraTokens()...)
		if len(v.tokens) != s.Vocab || len(v.types) != s.Vocab || !v.check() {
			t.Errorf("%s: %d tokens, %d types, check %v", s.Name, len(v.tokens), len(v.types), v.check())
		}
		if v.tokens[v.eos] != "<|im_end|>" || v.tokens[v.bos] != "<|im_start|>" {
			t.Errorf("%s: bos %q eos %q", s.Name, v.tokens[v.bos], v.tokens[v.eos])
		}
	}
	bad := vocab{tokens: []string{"a", "b"}, merges: []string{"a b"}}
	if bad.check() {
		t.Error("a merge into a missing token passes the check")
	}
}

// TestCheckRejectsBadShapes covers Shape.Check and Lookup.
func TestCheckRejectsBadShapes(t *testing.T) {
	s, _ := Lookup("tiny-llama")
	for _, mod := range []func(*Shape){
		func(s *Shape) { s.Arch = "gpt2" }, func(s *Shape) { s.Heads = 3 }, func(s *Shape) { s.KVHeads = 3 },
		func(s *Shape) { s.Vocab = 100 }, func(s *Shape) { s.Layers = 0 },
	} {
		b := s
		mod(&b)
		if b.Check() == nil {
			t.Errorf("%+v: no error", b)
		}
		if err := Write(context.Background(), &bytes.Buffer{}, b, quantize.Mix{Base: gguf.F32}, Options{}); err == nil {
			t.Errorf("Write %+v: no error", b)
		}
	}
	if _, err := Lookup("gpt-5"); err == nil {
		t.Error("Lookup(gpt-5): no error")
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
