// Package quantize writes GGUF model files with quantised weights, choosing
// each tensor's type by the same rules as llama.cpp's presets, so that a
// file made here holds the same mix of types as one llama-quantize makes
// from the same input.
//
// Which tensors are quantised: weights (names ending in "weight") with at
// least two dimensions, except norms ("_norm.weight"). 1-D tensors (norms,
// biases) keep their type, F32 in practice.
//
// The mixes (general.file_type in parentheses, as llama.cpp numbers them):
//
//   - F32 (0), F16 (1), BF16 (32): every quantised tensor in that type.
//   - Q4_0 (2), Q4_1 (3), Q5_0 (8), Q5_1 (9), Q8_0 (7): every quantised
//     tensor in that type, except the output matrix (below).
//   - Q6_K (18), Q5_K_S (16): all Q6_K or Q5_K, output as below.
//   - Q5_K_M (17), Q4_K_M (15): Q5_K or Q4_K, but attn_v.weight and
//     ffn_down.weight are Q6_K in the layers i of n where i < n/8, or
//     i ≥ 7n/8, or (i − n/8) mod 3 = 2 (llama.cpp's use_more_bits: for 24
//     layers, 0–2, 5, 8, 11, 14, 17, 20–23).
//   - Q4_K_S (14): Q4_K; attn_v Q5_K in layers 0–3, ffn_down Q5_K in
//     layers below n/8.
//   - Q3_K_S (11): Q3_K. Q3_K_M (12): Q3_K; attn_v Q5_K in layers 0–1 and
//     Q4_K after, ffn_down Q5_K below n/16 and Q4_K after, attn_output Q4_K.
//     Q3_K_L (13): Q3_K with attn_v, ffn_down and attn_output Q5_K.
//   - Q2_K (10): Q2_K; attn_v Q4_K when there are at least 4 query heads per
//     KV head and Q3_K otherwise, ffn_down and attn_output Q3_K.
//
// The output matrix (output.weight, or token_embd.weight when the model
// ties its output to the embeddings and has no output.weight) is Q6_K in
// every quantised mix except Q8_0, where it stays Q8_0, and Q8_0 when its
// rows are not a whole number of the mix's blocks.
//
// K-quant blocks hold 256 values, so a tensor whose rows (ggml ne[0]) are
// not a multiple of 256 falls back to a type with 32-value blocks, as
// llama.cpp does: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0. llama.cpp falls
// back from Q2_K and Q3_K to IQ4_NL, which this package does not write;
// it uses Q4_0 instead, which has the same 4.5 bits per weight. A row
// length that is not a multiple of 32 either falls back to F16 (where
// llama.cpp refuses the file). For example, the Qwen2.5-0.5B shape (896 =
// 3.5·256 wide) makes a Q4_K_M file that is mostly Q5_0 (attn_q, attn_k,
// attn_output, ffn_gate, ffn_up), Q8_0 for attn_v in the use_more_bits
// layers and for the tied embeddings, and K-quants only on ffn_down, whose
// rows are 4864 = 19·256 long (Q6_K or Q4_K by layer).
//
// A Pure mix puts every quantised tensor in one type (llama-quantize
// --pure), with the same row-length fallbacks.
package quantize

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Mix is a rule for choosing each tensor's type.
type Mix struct {
	// Name is the preset's name (Q4_K_M, …) or "pure <type>".
	Name string
	// FileType is the value of general.file_type for files of this mix.
	FileType uint32
	// Base is the type of most tensors.
	Base gguf.TensorType
	// Pure disables the per-tensor rules.
	Pure bool
}

// presets lists the named mixes in llama.cpp's numbering.
var presets = []Mix{
	{Name: "F32", FileType: 0, Base: gguf.F32},
	{Name: "F16", FileType: 1, Base: gguf.F16},
	{Name: "BF16", FileType: 32, Base: gguf.BF16},
	{Name: "Q4_0", FileType: 2, Base: gguf.Q4_0},
	{Name: "Q4_1", FileType: 3, Base: gguf.Q4_1},
	{Name: "Q5_0", FileType: 8, Base: gguf.Q5_0},
	{Name: "Q5_1", FileType: 9, Base: gguf.Q5_1},
	{Name: "Q8_0", FileType: 7, Base: gguf.Q8_0},
	{Name: "Q2_K", FileType: 10, Base: gguf.Q2_K},
	{Name: "Q3_K_S", FileType: 11, Base: gguf.Q3_K},
	{Name: "Q3_K_M", FileType: 12, Base: gguf.Q3_K},
	{Name: "Q3_K_L", FileType: 13, Base: gguf.Q3_K},
	{Name: "Q4_K_S", FileType: 14, Base: gguf.Q4_K},
	{Name: "Q4_K_M", FileType: 15, Base: gguf.Q4_K},
	{Name: "Q5_K_S", FileType: 16, Base: gguf.Q5_K},
	{Name: "Q5_K_M", FileType: 17, Base: gguf.Q5_K},
	{Name: "Q6_K", FileType: 18, Base: gguf.Q6_K},
}

// aliases are the short names llama-quantize accepts.
var aliases = map[string]string{"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}

// Names lists the preset names.
func Names() []string {
	out := make([]string, len(presets))
	for i, m := range presets {
		out[i] = m.Name
	}
	return out
}

// Lookup returns the named preset (case does not matter; Q3_K, Q4_K and
// Q5_K mean their _M mixes).
func Lookup(name string) (Mix, error) {
	n := strings.ToUpper(name)
	if a, ok := aliases[n]; ok {
		n = a
	}
	for _, m := range presets {
		if m.Name == n {
			return m, nil
		}
	}
	return Mix{}, fmt.Errorf("quantize: unknown type %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// Pure returns the mix that puts every quantised tensor in type t (or its
// row-length fallback). Its file type is that of the preset with base t
// (Q3_K_M, Q4_K_M, Q5_K_M for the K-quants with several).
func Pure(t gguf.TensorType) (Mix, error) {
	for _, name := range []string{t.String(), aliases[t.String()]} {
		if m, err := Lookup(name); err == nil && m.Base == t {
			m.Name, m.Pure = "pure "+t.String(), true
			return m, nil
		}
	}
	return Mix{}, fmt.Errorf("quantize: no file type for pure %s", t)
}

// Quantized reports whether a tensor is one the mix retypes: a weight with
// at least two dimensions that is not a norm.
func Quantized(t *gguf.TensorInfo) bool {
	rows := uint64(1)
	for _, d := range t.Dims[1:] {
		rows *= d
	}
	return rows > 1 && strings.HasSuffix(t.Name, "weight") && !strings.HasSuffix(t.Name, "_norm.weight")
}

// Types returns the type of each tensor under the mix; tensors not
// Quantized keep theirs. gqa is the number of query heads per KV head (0
// when unknown; only the Q2_K rule for attn_v reads it).
func (m Mix) Types(tensors []gguf.TensorInfo, gqa int) []gguf.TensorType {
	out := make([]gguf.TensorType, len(tensors))
	hasOutput, layers := false, 0
	for i := range tensors {
		hasOutput = hasOutput || tensors[i].Name == "output.weight"
		if l, ok := layerOf(tensors[i].Name); ok {
			layers = max(layers, l+1)
		}
	}
	for i := range tensors {
		t := &tensors[i]
		if !Quantized(t) {
			out[i] = t.Type
			continue
		}
		typ := m.Base
		if !m.Pure && isQuantType(m.Base) {
			typ = m.rule(t, hasOutput, layers, gqa)
		}
		out[i] = fallback(typ, t.Dims[0])
	}
	return out
}

// rule applies the per-tensor rules of the preset.
func (m Mix) rule(t *gguf.TensorInfo, hasOutput bool, n, gqa int) gguf.TensorType {
	name := t.Name
	if name == "output.weight" || !hasOutput && name == "token_embd.weight" {
		switch {
		case t.Dims[0]%uint64(m.Base.BlockSize()) != 0:
			return gguf.Q8_0
		case m.Base == gguf.Q8_0:
			return gguf.Q8_0
		}
		return gguf.Q6_K
	}
	i, _ := layerOf(name)
	for _, kind := range []string{"attn_v.weight", "ffn_down", "attn_output.weight"} {
		if strings.Contains(name, kind) {
			return m.layerRule(strings.TrimSuffix(kind, ".weight"), i, n, gqa)
		}
	}
	return m.Base
}

// layerRule is the type of tensor kind (attn_v, ffn_down, attn_output) in
// layer i of n under the preset.
func (m Mix) layerRule(kind string, i, n, gqa int) gguf.TensorType {
	pick := func(cond bool, a, b gguf.TensorType) gguf.TensorType {
		if cond {
			return a
		}
		return b
	}
	switch m.Name + " " + kind {
	case "Q2_K attn_v":
		return pick(gqa >= 4, gguf.Q4_K, gguf.Q3_K)
	case "Q2_K ffn_down", "Q2_K attn_output":
		return gguf.Q3_K
	case "Q3_K_M attn_v":
		return pick(i < 2, gguf.Q5_K, gguf.Q4_K)
	case "Q3_K_M ffn_down":
		return pick(i < n/16, gguf.Q5_K, gguf.Q4_K)
	case "Q3_K_M attn_output":
		return gguf.Q4_K
	case "Q3_K_L attn_v", "Q3_K_L ffn_down", "Q3_K_L attn_output":
		return gguf.Q5_K
	case "Q4_K_M attn_v", "Q4_K_M ffn_down", "Q5_K_M attn_v", "Q5_K_M ffn_down":
		return pick(moreBits(i, n), gguf.Q6_K, m.Base)
	case "Q4_K_S attn_v":
		return pick(i < 4, gguf.Q5_K, m.Base)
	case "Q4_K_S ffn_down":
		return pick(i < n/8, gguf.Q5_K, m.Base)
	}
	return m.Base
}

// moreBits reports whether layer i of n gets the larger type in the _M
// mixes: the first and last eighth, and every third layer between.
func moreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// fallback replaces t by a type whose blocks fit rows of n values.
func fallback(t gguf.TensorType, n uint64) gguf.TensorType {
	if n%uint64(t.BlockSize()) == 0 {
		return t
	}
	switch t {
	case gguf.Q4_K:
		t = gguf.Q5_0
	case gguf.Q5_K:
		t = gguf.Q5_1
	case gguf.Q6_K:
		t = gguf.Q8_0
	case gguf.Q2_K, gguf.Q3_K:
		t = gguf.Q4_0
	}
	if n%uint64(t.BlockSize()) != 0 {
		return gguf.F16
	}
	return t
}

// isQuantType reports whether t is a block type (not F32, F16 or BF16).
func isQuantType(t gguf.TensorType) bool { return t.BlockSize() > 1 }

// layerOf parses the layer index of a tensor named "blk.N.…".
func layerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	return i, err == nil && i >= 0
}
