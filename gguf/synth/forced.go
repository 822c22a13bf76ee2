package synth

import (
	"context"
	"fmt"
	"io"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
)

// Forced describes a llama model whose greedy output is fixed: after any
// prompt it writes Chain[0], Chain[1], …, and after the last token of the
// chain it repeats it. One block with zero attention and feed-forward
// output passes each token's embedding through; the embeddings are one-hot
// (each chain token has a direction of its own, every other token shares
// direction 0) and the output matrix maps each direction to the next
// token of the chain. Tests use it to check where generation stops.
type Forced struct {
	// Tokens, Types and Merges are the byte-level BPE vocabulary
	// (tokenizer.ggml.tokens, token_type, merges: at least one merge).
	Tokens []string
	Types  []int32
	Merges []string
	// BOS and EOS are the special token ids (-1: absent).
	BOS, EOS int32
	// Template is tokenizer.chat_template ("" for none).
	Template string
	// Chain is the output after any prompt; its tokens are distinct.
	Chain []int32
}

// forcedHeadDim is the head width of a Forced model (one head).
const forcedHeadDim = 2

// dims returns the model width: one direction per chain position, even.
func (f Forced) dims() int {
	d := len(f.Chain) + 1
	return d + d%forcedHeadDim
}

// WriteForced writes the model f describes to w as F32.
func WriteForced(ctx context.Context, w io.Writer, f Forced) error {
	if len(f.Tokens) == 0 || len(f.Types) != len(f.Tokens) || len(f.Merges) == 0 || len(f.Chain) == 0 {
		return fmt.Errorf("synth: forced model needs tokens, their types, a merge and a chain")
	}
	slot, err := f.chainSlots()
	if err != nil {
		return err
	}
	tensors := f.tensors(slot)
	enc, err := gguf.NewEncoder(w, f.metadata(), forcedInfos(tensors))
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	for _, t := range tensors {
		if err := quantize.Rows(ctx, enc, gguf.F32, t.rows, t.cols, 1, t.fill); err != nil {
			return fmt.Errorf("synth: tensor %s: %w", t.name, err)
		}
	}
	return enc.Close()
}

// chainSlots maps each chain token to its direction (1, 2, …), rejecting
// tokens outside the vocabulary and repeats; other tokens map to nothing.
func (f Forced) chainSlots() (map[int32]int, error) {
	slot := map[int32]int{}
	for i, id := range f.Chain {
		if id < 0 || int(id) >= len(f.Tokens) {
			return nil, fmt.Errorf("synth: chain token %d is outside the vocabulary", id)
		}
		if _, dup := slot[id]; dup {
			return nil, fmt.Errorf("synth: chain token %d repeats", id)
		}
		slot[id] = i + 1
	}
	return slot, nil
}

// metadata returns the model's GGUF metadata.
func (f Forced) metadata() []gguf.KV {
	d := f.dims()
	kvs := []gguf.KV{}
	add := func(key string, val any) { kvs = append(kvs, gguf.KV{Key: key, Value: value(val)}) }
	add("general.architecture", "llama")
	add("general.name", "forced")
	add("general.alignment", uint32(gguf.DefaultAlignment))
	for k, v := range map[string]uint32{"context_length": 256, "embedding_length": uint32(d), "feed_forward_length": 2,
		"block_count": 1, "attention.head_count": uint32(d / forcedHeadDim), "attention.head_count_kv": uint32(d / forcedHeadDim)} {
		add("llama."+k, v)
	}
	add("llama.attention.layer_norm_rms_epsilon", float32(1e-5))
	add("tokenizer.ggml.model", "gpt2")
	add("tokenizer.ggml.tokens", f.Tokens)
	add("tokenizer.ggml.token_type", f.Types)
	add("tokenizer.ggml.merges", f.Merges)
	add("tokenizer.ggml.add_bos_token", f.BOS >= 0)
	if f.BOS >= 0 {
		add("tokenizer.ggml.bos_token_id", uint32(f.BOS))
	}
	if f.EOS >= 0 {
		add("tokenizer.ggml.eos_token_id", uint32(f.EOS))
	}
	if f.Template != "" {
		add("tokenizer.chat_template", f.Template)
	}
	return kvs
}

// forcedTensor is one F32 tensor of a forced model and its row filler.
type forcedTensor struct {
	name       string
	rows, cols int
	fill       func(int, []float32) error
}

// tensors returns the model's tensors in file order, given the chain slots.
func (f Forced) tensors(slot map[int32]int) []forcedTensor {
	d, vocab := f.dims(), len(f.Tokens)
	last := f.Chain[len(f.Chain)-1]
	embd := func(r int, dst []float32) error { // token r's direction
		clear(dst)
		if s, ok := slot[int32(r)]; ok {
			dst[s] = 1
		} else {
			dst[0] = 1
		}
		return nil
	}
	output := func(r int, dst []float32) error { // token r follows the direction that leads to it
		clear(dst)
		if s, ok := slot[int32(r)]; ok {
			dst[s-1] = 1
		}
		if int32(r) == last { // and the last one follows itself
			dst[len(f.Chain)] = 1
		}
		return nil
	}
	zero := func(_ int, dst []float32) error { clear(dst); return nil }
	return []forcedTensor{
		{"token_embd.weight", vocab, d, embd},
		{"blk.0.attn_norm.weight", 1, d, ones},
		{"blk.0.attn_q.weight", d, d, zero},
		{"blk.0.attn_k.weight", d, d, zero},
		{"blk.0.attn_v.weight", d, d, zero},
		{"blk.0.attn_output.weight", d, d, zero},
		{"blk.0.ffn_norm.weight", 1, d, ones},
		{"blk.0.ffn_gate.weight", 2, d, zero},
		{"blk.0.ffn_up.weight", 2, d, zero},
		{"blk.0.ffn_down.weight", d, 2, zero},
		{"output_norm.weight", 1, d, ones},
		{"output.weight", vocab, d, output},
	}
}

// forcedInfos returns the tensor infos for tensors: cols first, then rows
// for matrices and the two vocabulary tensors.
func forcedInfos(tensors []forcedTensor) []gguf.TensorInfo {
	infos := make([]gguf.TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = gguf.TensorInfo{Name: t.name, Type: gguf.F32, Dims: []uint64{uint64(t.cols)}}
		if t.rows > 1 || t.name == "token_embd.weight" || t.name == "output.weight" {
			infos[i].Dims = append(infos[i].Dims, uint64(t.rows))
		}
	}
	return infos
}

// WriteForcedFile writes the model f describes to path.
func WriteForcedFile(ctx context.Context, path string, f Forced) error {
	return gguf.WriteFile(path, func(w io.Writer) error { return WriteForced(ctx, w, f) })
}
