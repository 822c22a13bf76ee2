// Package synth writes GGUF model files with the shapes of real models and
// random weights: matrices and biases drawn from N(0, 0.02), norms 1.0, a
// synthetic byte-level BPE vocabulary (tokenizer.ggml.model "gpt2", with
// merges) and the metadata llama.cpp and this repository's loaders read.
// Weights are typed by the same mixes as package quantize, generated
// directly in their target type a chunk of rows at a time, so memory stays
// small whatever the shape; a seed gives the same file whatever the thread
// count. The files serve benchmarks and tests (random weights make fluent
// nonsense, but every kernel and type runs as on a real model).
package synth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Shape is a model architecture's sizes and conventions.
type Shape struct {
	// Name identifies the shape (smollm2-135m, …).
	Name string
	// Arch is general.architecture: llama, qwen2, qwen3, gemma2, gemma3 or
	// phi3.
	Arch string
	// Dim is the embedding width; FFN the feed-forward width.
	Dim, FFN int
	// Layers, Heads and KVHeads count blocks, query and key/value heads.
	Layers, Heads, KVHeads int
	// Vocab is the number of tokens (rows of token_embd).
	Vocab int
	// Context is the trained context length.
	Context int
	// RopeBase is the rotary base frequency; Eps the RMS norm epsilon.
	RopeBase, Eps float32
	// Tied models have no output.weight: the output reuses token_embd.
	Tied bool
	// Biases adds attn_q/k/v.bias (qwen2).
	Biases bool
	// Pre is tokenizer.ggml.pre, the pre-tokenizer llama.cpp applies.
	Pre string
	// SpecialsFirst puts the special tokens at ids 0, 1, 2 rather than at
	// the end of the vocabulary.
	SpecialsFirst bool
	// KeyLength is the width of an attention head when it is not Dim/Heads
	// (attention.key_length and value_length).
	KeyLength int
	// QKNorm adds attn_q_norm and attn_k_norm (qwen3, gemma3).
	QKNorm bool
	// Window is attention.sliding_window (0: not written): every layer's
	// for llama and phi3, the sliding layers' for gemma2 and gemma3.
	Window int
	// AttnCap and FinalCap are gemma2's attention and final logit
	// soft-capping.
	AttnCap, FinalCap float32
	// Llama3 adds Llama 3.x rope scaling, as llama.cpp's files hold it: a
	// rope_freqs.weight tensor of per-pair frequency divisors.
	Llama3 *Llama3Rope
	// LongRope adds Phi-3's long-context rope scaling: rope_factors_long
	// and rope_factors_short tensors, rope.scaling.original_context_length
	// and rope.scaling.attn_factor.
	LongRope int
}

// Llama3Rope is Llama 3.x's rope scaling.
type Llama3Rope struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalContext                       int
}

// archs lists the architectures Shape can write.
func archs() []string { return []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"} }

// shapes are the named shapes: real models' sizes, and tiny ones of each
// architecture for tests (256 wide, so K-quants apply).
var shapes = []Shape{
	{Name: "smollm2-135m", Arch: "llama", Dim: 576, FFN: 1536, Layers: 30, Heads: 9, KVHeads: 3, Vocab: 49152,
		Context: 8192, RopeBase: 100000, Eps: 1e-5, Tied: true, Pre: "smollm", SpecialsFirst: true},
	{Name: "smollm2-360m", Arch: "llama", Dim: 960, FFN: 2560, Layers: 32, Heads: 15, KVHeads: 5, Vocab: 49152,
		Context: 8192, RopeBase: 100000, Eps: 1e-5, Tied: true, Pre: "smollm", SpecialsFirst: true},
	{Name: "qwen2.5-0.5b", Arch: "qwen2", Dim: 896, FFN: 4864, Layers: 24, Heads: 14, KVHeads: 2, Vocab: 151936,
		Context: 32768, RopeBase: 1e6, Eps: 1e-6, Tied: true, Biases: true, Pre: "qwen2"},
	{Name: "qwen2.5-1.5b", Arch: "qwen2", Dim: 1536, FFN: 8960, Layers: 28, Heads: 12, KVHeads: 2, Vocab: 151936,
		Context: 32768, RopeBase: 1e6, Eps: 1e-6, Tied: true, Biases: true, Pre: "qwen2"},
	{Name: "qwen3-0.6b", Arch: "qwen3", Dim: 1024, FFN: 3072, Layers: 28, Heads: 16, KVHeads: 8, KeyLength: 128, Vocab: 151936,
		Context: 40960, RopeBase: 1e6, Eps: 1e-6, Tied: true, QKNorm: true, Pre: "qwen2"},
	{Name: "llama3.2-1b", Arch: "llama", Dim: 2048, FFN: 8192, Layers: 16, Heads: 32, KVHeads: 8, Vocab: 128256,
		Context: 131072, RopeBase: 500000, Eps: 1e-5, Tied: true, Pre: "llama-bpe",
		Llama3: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
	{Name: "mistral-7b-v0.1", Arch: "llama", Dim: 4096, FFN: 14336, Layers: 32, Heads: 32, KVHeads: 8, Vocab: 32000,
		Context: 32768, RopeBase: 10000, Eps: 1e-5, Window: 4096, Pre: "default", SpecialsFirst: true},
	{Name: "gemma2-2b", Arch: "gemma2", Dim: 2304, FFN: 9216, Layers: 26, Heads: 8, KVHeads: 4, KeyLength: 256, Vocab: 256000,
		Context: 8192, RopeBase: 10000, Eps: 1e-6, Tied: true, Window: 4096, AttnCap: 50, FinalCap: 30, Pre: "default", SpecialsFirst: true},
	{Name: "gemma3-270m", Arch: "gemma3", Dim: 640, FFN: 2048, Layers: 18, Heads: 4, KVHeads: 1, KeyLength: 256, Vocab: 262144,
		Context: 32768, RopeBase: 1e6, Eps: 1e-6, Tied: true, QKNorm: true, Window: 512, Pre: "default", SpecialsFirst: true},
	{Name: "gemma3-1b", Arch: "gemma3", Dim: 1152, FFN: 6912, Layers: 26, Heads: 4, KVHeads: 1, KeyLength: 256, Vocab: 262144,
		Context: 32768, RopeBase: 1e6, Eps: 1e-6, Tied: true, QKNorm: true, Window: 512, Pre: "default", SpecialsFirst: true},
	{Name: "phi3-mini", Arch: "phi3", Dim: 3072, FFN: 8192, Layers: 32, Heads: 32, KVHeads: 32, Vocab: 32064,
		Context: 4096, RopeBase: 10000, Eps: 1e-5, Window: 2047, Pre: "default", SpecialsFirst: true},
	{Name: "phi3.5-mini", Arch: "phi3", Dim: 3072, FFN: 8192, Layers: 32, Heads: 32, KVHeads: 32, Vocab: 32064,
		Context: 131072, RopeBase: 10000, Eps: 1e-5, Window: 262144, LongRope: 4096, Pre: "default", SpecialsFirst: true},
	{Name: "tiny-llama", Arch: "llama", Dim: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 400,
		Context: 512, RopeBase: 10000, Eps: 1e-5, Pre: "smollm", SpecialsFirst: true},
	{Name: "tiny-qwen2", Arch: "qwen2", Dim: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 1, Vocab: 400,
		Context: 512, RopeBase: 1e6, Eps: 1e-6, Tied: true, Biases: true, Pre: "qwen2"},
	{Name: "tiny-qwen3", Arch: "qwen3", Dim: 256, FFN: 256, Layers: 2, Heads: 4, KVHeads: 2, KeyLength: 128, Vocab: 400,
		Context: 512, RopeBase: 1e6, Eps: 1e-6, Tied: true, QKNorm: true, Pre: "qwen2"},
	{Name: "tiny-llama3", Arch: "llama", Dim: 256, FFN: 256, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 400,
		Context: 512, RopeBase: 500000, Eps: 1e-5, Tied: true, Window: 64, Pre: "llama-bpe",
		Llama3: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}},
	{Name: "tiny-gemma2", Arch: "gemma2", Dim: 256, FFN: 256, Layers: 2, Heads: 2, KVHeads: 1, KeyLength: 128, Vocab: 400,
		Context: 512, RopeBase: 10000, Eps: 1e-6, Tied: true, Window: 64, AttnCap: 50, FinalCap: 30, Pre: "default", SpecialsFirst: true},
	{Name: "tiny-gemma3", Arch: "gemma3", Dim: 256, FFN: 256, Layers: 6, Heads: 2, KVHeads: 1, KeyLength: 128, Vocab: 400,
		Context: 512, RopeBase: 1e6, Eps: 1e-6, Tied: true, QKNorm: true, Window: 64, Pre: "default", SpecialsFirst: true},
	{Name: "tiny-phi3", Arch: "phi3", Dim: 256, FFN: 256, Layers: 2, Heads: 4, KVHeads: 4, Vocab: 400,
		Context: 512, RopeBase: 10000, Eps: 1e-5, Window: 64, LongRope: 128, Pre: "default", SpecialsFirst: true},
}

// Shapes lists the named shapes.
func Shapes() []Shape { return append([]Shape(nil), shapes...) }

// Lookup returns the named shape.
func Lookup(name string) (Shape, error) {
	names := make([]string, len(shapes))
	for i, s := range shapes {
		if strings.EqualFold(s.Name, name) {
			return s, nil
		}
		names[i] = s.Name
	}
	return Shape{}, fmt.Errorf("synth: unknown shape %q (want one of %s)", name, strings.Join(names, ", "))
}

// HeadDim is the width of one attention head.
func (s Shape) HeadDim() int {
	if s.KeyLength > 0 {
		return s.KeyLength
	}
	return s.Dim / s.Heads
}

// Check reports sizes that cannot make a model.
func (s Shape) Check() error {
	switch {
	case !slices.Contains(archs(), s.Arch):
		return fmt.Errorf("synth: architecture %q (want %s)", s.Arch, strings.Join(archs(), ", "))
	case s.Dim <= 0 || s.FFN <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.Context <= 0 || s.KeyLength < 0:
		return fmt.Errorf("synth: shape %s has a non-positive size", s.Name)
	case s.KeyLength == 0 && s.Dim%s.Heads != 0 || s.Heads%s.KVHeads != 0 || s.HeadDim()%2 != 0:
		return fmt.Errorf("synth: shape %s: %d wide with %d heads and %d KV heads", s.Name, s.Dim, s.Heads, s.KVHeads)
	case s.Vocab < minVocab:
		return fmt.Errorf("synth: shape %s: vocabulary of %d tokens (at least %d)", s.Name, s.Vocab, minVocab)
	}
	return nil
}

// Tensors lists the model's tensors (as F32) in file order: the
// embeddings, the rotary factors, each block, the output norm and, unless
// tied, the output.
func (s Shape) Tensors() []gguf.TensorInfo {
	q, kv := s.Heads*s.HeadDim(), s.KVHeads*s.HeadDim()
	var ts []gguf.TensorInfo
	add := func(name string, dims ...int) {
		d := make([]uint64, len(dims))
		for i, v := range dims {
			d[i] = uint64(v)
		}
		ts = append(ts, gguf.TensorInfo{Name: name, Type: gguf.F32, Dims: d})
	}
	add("token_embd.weight", s.Dim, s.Vocab)
	if s.Llama3 != nil {
		add("rope_freqs.weight", s.HeadDim()/2)
	}
	if s.LongRope > 0 {
		add("rope_factors_long.weight", s.HeadDim()/2)
		add("rope_factors_short.weight", s.HeadDim()/2)
	}
	gemma := strings.HasPrefix(s.Arch, "gemma")
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Dim)
		if s.Arch == "phi3" {
			add(p+"attn_qkv.weight", s.Dim, q+2*kv)
		} else {
			s.addQKV(add, p, q, kv)
		}
		add(p+"attn_output.weight", q, s.Dim)
		if gemma {
			add(p+"post_attention_norm.weight", s.Dim)
		}
		add(p+"ffn_norm.weight", s.Dim)
		if s.Arch == "phi3" {
			add(p+"ffn_up.weight", s.Dim, 2*s.FFN)
		} else {
			add(p+"ffn_gate.weight", s.Dim, s.FFN)
			add(p+"ffn_up.weight", s.Dim, s.FFN)
		}
		add(p+"ffn_down.weight", s.FFN, s.Dim)
		if gemma {
			add(p+"post_ffw_norm.weight", s.Dim)
		}
	}
	add("output_norm.weight", s.Dim)
	if !s.Tied {
		add("output.weight", s.Dim, s.Vocab)
	}
	return ts
}

// addQKV adds the separate query, key and value tensors of block p, with
// their biases and norms.
func (s Shape) addQKV(add func(string, ...int), p string, q, kv int) {
	for _, t := range []struct {
		name string
		rows int
	}{{"attn_q", q}, {"attn_k", kv}, {"attn_v", kv}} {
		add(p+t.name+".weight", s.Dim, t.rows)
		if s.Biases {
			add(p+t.name+".bias", t.rows)
		}
	}
	if s.QKNorm {
		add(p+"attn_q_norm.weight", s.HeadDim())
		add(p+"attn_k_norm.weight", s.HeadDim())
	}
}
