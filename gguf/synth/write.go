package synth

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
)

// Sigma is the standard deviation of the random weights and biases.
const Sigma = 0.02

// Options tune Write.
type Options struct {
	// Seed selects the weights; the same seed gives the same file.
	Seed uint64
	// Threads generating and quantising rows (0 or 1: one). The output does
	// not depend on it.
	Threads int
}

// Metadata returns the file's metadata for mix m: general.*, the
// architecture's hyperparameters, and the tokenizer.
func (s Shape) Metadata(m quantize.Mix) []gguf.KV {
	v := buildVocab(s.Vocab, s.SpecialsFirst, s.extraTokens()...)
	var kvs []gguf.KV
	add := func(key string, val any) {
		kvs = append(kvs, gguf.KV{Key: key, Value: value(val)})
	}
	a := s.Arch + "."
	add("general.architecture", s.Arch)
	add("general.type", "model")
	add("general.name", "synthetic "+s.Name)
	add("general.file_type", m.FileType)
	if m.Base.BlockSize() > 1 {
		add("general.quantization_version", uint32(2))
	}
	add("general.alignment", uint32(gguf.DefaultAlignment))
	add(a+"vocab_size", uint32(s.Vocab))
	add(a+"context_length", uint32(s.Context))
	add(a+"embedding_length", uint32(s.Dim))
	add(a+"feed_forward_length", uint32(s.FFN))
	add(a+"block_count", uint32(s.Layers))
	add(a+"attention.head_count", uint32(s.Heads))
	add(a+"attention.head_count_kv", uint32(s.KVHeads))
	add(a+"attention.layer_norm_rms_epsilon", s.Eps)
	add(a+"rope.freq_base", s.RopeBase)
	add(a+"rope.dimension_count", uint32(s.HeadDim()))
	if s.KeyLength > 0 {
		add(a+"attention.key_length", uint32(s.KeyLength))
		add(a+"attention.value_length", uint32(s.KeyLength))
	}
	if s.Window > 0 || s.Arch == "phi3" { // llama.cpp requires phi3's (0: none)
		add(a+"attention.sliding_window", uint32(s.Window))
	}
	if s.AttnCap > 0 {
		add(a+"attn_logit_softcapping", s.AttnCap)
	}
	if s.FinalCap > 0 {
		add(a+"final_logit_softcapping", s.FinalCap)
	}
	if s.LongRope > 0 {
		add(a+"rope.scaling.original_context_length", uint32(s.LongRope))
		add(a+"rope.scaling.attn_factor", float32(math.Sqrt(1+math.Log(float64(s.Context)/float64(s.LongRope))/math.Log(float64(s.LongRope)))))
	}
	add("tokenizer.ggml.model", "gpt2")
	add("tokenizer.ggml.pre", s.Pre)
	add("tokenizer.ggml.tokens", v.tokens)
	add("tokenizer.ggml.token_type", v.types)
	add("tokenizer.ggml.merges", v.merges)
	add("tokenizer.ggml.bos_token_id", v.bos)
	add("tokenizer.ggml.eos_token_id", v.eos)
	add("tokenizer.ggml.padding_token_id", v.pad)
	add("tokenizer.ggml.add_bos_token", false)
	add("tokenizer.chat_template", chatTemplate)
	return kvs
}

// extraTokens are control tokens llama.cpp expects of the architecture:
// it looks up <unk>, <s> and </s> in models named phi3.
func (s Shape) extraTokens() []string {
	if s.Arch == "phi3" {
		return []string{"<unk>", "<s>", "</s>"}
	}
	return nil
}

// value wraps a Go value of the types Metadata uses.
func value(v any) gguf.Value {
	switch x := v.(type) {
	case string:
		return gguf.Value{Type: gguf.TypeString, V: x}
	case uint32:
		return gguf.Value{Type: gguf.TypeUint32, V: x}
	case float32:
		return gguf.Value{Type: gguf.TypeFloat32, V: x}
	case bool:
		return gguf.Value{Type: gguf.TypeBool, V: x}
	case []string:
		return gguf.Value{Type: gguf.TypeArray, ElemType: gguf.TypeString, V: x}
	case []int32:
		return gguf.Value{Type: gguf.TypeArray, ElemType: gguf.TypeInt32, V: x}
	}
	panic(fmt.Sprintf("synth: no GGUF value for %T", v))
}

// Header returns the metadata and typed tensor infos of the file Write
// makes.
func (s Shape) Header(m quantize.Mix) ([]gguf.KV, []gguf.TensorInfo) {
	tensors := s.Tensors()
	for i, t := range m.Types(tensors, s.Heads/s.KVHeads) {
		tensors[i].Type = t
	}
	return s.Metadata(m), tensors
}

// Write streams a model of shape s with its tensors typed by mix m to w.
// Tensors are written in order, each generated and quantised a chunk of
// rows at a time on opt.Threads goroutines; row r of tensor i draws from
// its own generator seeded by (opt.Seed, i, r), so the output depends on
// the seed alone.
func Write(ctx context.Context, w io.Writer, s Shape, m quantize.Mix, opt Options) error {
	if err := s.Check(); err != nil {
		return err
	}
	kvs, tensors := s.Header(m)
	enc, err := gguf.NewEncoder(w, kvs, tensors)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	for i := range tensors {
		t := &tensors[i]
		n := int(t.Dims[0])
		fill := s.fill(t.Name, randomRow(opt.Seed, uint64(i)))
		if err := quantize.Rows(ctx, enc, t.Type, int(t.Elems())/n, n, opt.Threads, fill); err != nil {
			return fmt.Errorf("synth: tensor %s: %w", t.Name, err)
		}
	}
	return enc.Close()
}

// WriteFile writes the model to path (replacing it only on success).
func WriteFile(ctx context.Context, path string, s Shape, m quantize.Mix, opt Options) error {
	return gguf.WriteFile(path, func(w io.Writer) error { return Write(ctx, w, s, m, opt) })
}

// randomRow fills rows of tensor i with N(0, Sigma) values from a
// generator seeded by (seed, i, row).
func randomRow(seed, i uint64) func(r int, dst []float32) error {
	return func(r int, dst []float32) error {
		rng := rand.New(rand.NewPCG(seed, i<<40|uint64(r)))
		for j := range dst {
			dst[j] = float32(rng.NormFloat64() * Sigma)
		}
		return nil
	}
}

// fill returns the filler of tensor name: ones for norms, the rotary
// factors for theirs, random values for the rest.
func (s Shape) fill(name string, random func(int, []float32) error) func(int, []float32) error {
	switch {
	case strings.HasSuffix(name, "_norm.weight"):
		return ones
	case name == "rope_freqs.weight":
		return s.llama3Factors
	case name == "rope_factors_long.weight":
		return ramp(float64(s.Context) / float64(s.LongRope))
	case name == "rope_factors_short.weight":
		return ramp(1.5)
	}
	return random
}

// llama3Factors writes Llama 3.x's rotary frequency divisors.
func (s Shape) llama3Factors(_ int, dst []float32) error {
	r := s.Llama3
	copy(dst, gguf.Llama3RopeFactors(float64(s.RopeBase), s.HeadDim(), r.Factor, r.LowFreqFactor, r.HighFreqFactor, r.OriginalContext))
	return nil
}

// ramp fills a row with factors rising smoothly from 1 to top (synthetic
// longrope factors: real models' rise much the same way).
func ramp(top float64) func(int, []float32) error {
	return func(_ int, dst []float32) error {
		for j := range dst {
			dst[j] = float32(1 + (top-1)*float64(j)/float64(max(1, len(dst)-1)))
		}
		return nil
	}
}

// ones fills a row with 1.0 (norm weights).
func ones(_ int, dst []float32) error {
	for j := range dst {
		dst[j] = 1
	}
	return nil
}
