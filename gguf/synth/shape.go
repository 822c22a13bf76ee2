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
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Shape is a model architecture's sizes and conventions.
type Shape struct {
	// Name identifies the shape (smollm2-135m, …).
	Name string
	// Arch is general.architecture: llama or qwen2.
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
}

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
	{Name: "tiny-llama", Arch: "llama", Dim: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 400,
		Context: 512, RopeBase: 10000, Eps: 1e-5, Pre: "smollm", SpecialsFirst: true},
	{Name: "tiny-qwen2", Arch: "qwen2", Dim: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 1, Vocab: 400,
		Context: 512, RopeBase: 1e6, Eps: 1e-6, Tied: true, Biases: true, Pre: "qwen2"},
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
func (s Shape) HeadDim() int { return s.Dim / s.Heads }

// Check reports sizes that cannot make a model.
func (s Shape) Check() error {
	switch {
	case s.Arch != "llama" && s.Arch != "qwen2":
		return fmt.Errorf("synth: architecture %q (want llama or qwen2)", s.Arch)
	case s.Dim <= 0 || s.FFN <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.Context <= 0:
		return fmt.Errorf("synth: shape %s has a non-positive size", s.Name)
	case s.Dim%s.Heads != 0 || s.Heads%s.KVHeads != 0 || s.HeadDim()%2 != 0:
		return fmt.Errorf("synth: shape %s: %d wide with %d heads and %d KV heads", s.Name, s.Dim, s.Heads, s.KVHeads)
	case s.Vocab < minVocab:
		return fmt.Errorf("synth: shape %s: vocabulary of %d tokens (at least %d)", s.Name, s.Vocab, minVocab)
	}
	return nil
}

// Tensors lists the model's tensors (as F32) in file order: the
// embeddings, each block, the output norm and, unless tied, the output.
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
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Dim)
		add(p+"attn_q.weight", s.Dim, q)
		if s.Biases {
			add(p+"attn_q.bias", q)
		}
		add(p+"attn_k.weight", s.Dim, kv)
		if s.Biases {
			add(p+"attn_k.bias", kv)
		}
		add(p+"attn_v.weight", s.Dim, kv)
		if s.Biases {
			add(p+"attn_v.bias", kv)
		}
		add(p+"attn_output.weight", q, s.Dim)
		add(p+"ffn_norm.weight", s.Dim)
		add(p+"ffn_gate.weight", s.Dim, s.FFN)
		add(p+"ffn_up.weight", s.Dim, s.FFN)
		add(p+"ffn_down.weight", s.FFN, s.Dim)
	}
	add("output_norm.weight", s.Dim)
	if !s.Tied {
		add("output.weight", s.Dim, s.Vocab)
	}
	return ts
}
