package quantize_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/gguf/synth"
)

// shapeTensors lists the tensor infos of a model shape (no data).
func shapeTensors(dim, layers, heads, kvHeads, ffn, vocab int, tied, biases bool) []gguf.TensorInfo {
	s := synth.Shape{Arch: "llama", Dim: dim, Layers: layers, Heads: heads, KVHeads: kvHeads, FFN: ffn, Vocab: vocab, Tied: tied, Biases: biases}
	return s.Tensors()
}

func typesByName(t *testing.T, name string, ts []gguf.TensorInfo, gqa int) map[string]gguf.TensorType {
	t.Helper()
	m, err := quantize.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]gguf.TensorType{}
	for i, typ := range m.Types(ts, gqa) {
		out[ts[i].Name] = typ
	}
	return out
}

// TestQ4KMOnQwen05BShape pins the Q4_K_M mix of the Qwen2.5-0.5B shape
// (896 wide, 24 layers, tied embeddings) described in the package doc.
func TestQ4KMOnQwen05BShape(t *testing.T) {
	s, _ := synth.Lookup("qwen2.5-0.5b")
	ts := s.Tensors()
	got := typesByName(t, "q4_k_m", ts, 7)
	more := map[int]bool{0: true, 1: true, 2: true, 5: true, 8: true, 11: true, 14: true, 17: true, 20: true, 21: true, 22: true, 23: true}
	want := map[string]gguf.TensorType{"token_embd.weight": gguf.Q8_0, "output_norm.weight": gguf.F32}
	for l := range 24 {
		p := fmt.Sprintf("blk.%d.", l)
		for _, n := range []string{"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"} {
			want[p+n] = gguf.Q5_0
		}
		for _, n := range []string{"attn_norm.weight", "ffn_norm.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias"} {
			want[p+n] = gguf.F32
		}
		want[p+"attn_v.weight"], want[p+"ffn_down.weight"] = gguf.Q5_0, gguf.Q4_K
		if more[l] {
			want[p+"attn_v.weight"], want[p+"ffn_down.weight"] = gguf.Q8_0, gguf.Q6_K
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d tensors typed, want %d", len(got), len(want))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s, want %s", name, got[name], w)
		}
	}
}

// TestMixesOnWideShape checks the presets on a 4096-wide model with a
// separate output matrix, where every K-quant fits.
func TestMixesOnWideShape(t *testing.T) {
	ts := shapeTensors(4096, 32, 32, 8, 11008, 32000, false, false)
	cases := []struct {
		mix                                string
		embd, output, q, v0, v5, down0, d5 gguf.TensorType
		attnOut                            gguf.TensorType
	}{
		{"Q4_K_M", gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q4_K},
		{"Q5_K_M", gguf.Q5_K, gguf.Q6_K, gguf.Q5_K, gguf.Q6_K, gguf.Q5_K, gguf.Q6_K, gguf.Q5_K, gguf.Q5_K},
		{"Q6_K", gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K},
		{"Q8_0", gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0},
		{"Q4_0", gguf.Q4_0, gguf.Q6_K, gguf.Q4_0, gguf.Q4_0, gguf.Q4_0, gguf.Q4_0, gguf.Q4_0, gguf.Q4_0},
		{"F16", gguf.F16, gguf.F16, gguf.F16, gguf.F16, gguf.F16, gguf.F16, gguf.F16, gguf.F16},
		{"Q4_K_S", gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q5_K, gguf.Q4_K, gguf.Q5_K, gguf.Q4_K, gguf.Q4_K},
		{"Q3_K_M", gguf.Q3_K, gguf.Q6_K, gguf.Q3_K, gguf.Q5_K, gguf.Q4_K, gguf.Q5_K, gguf.Q4_K, gguf.Q4_K},
		{"Q2_K", gguf.Q2_K, gguf.Q6_K, gguf.Q2_K, gguf.Q4_K, gguf.Q4_K, gguf.Q3_K, gguf.Q3_K, gguf.Q3_K},
	}
	for _, c := range cases {
		got := typesByName(t, c.mix, ts, 4)
		for name, w := range map[string]gguf.TensorType{
			"token_embd.weight": c.embd, "output.weight": c.output, "blk.7.attn_q.weight": c.q,
			"blk.0.attn_v.weight": c.v0, "blk.5.attn_v.weight": c.v5, "blk.0.ffn_down.weight": c.down0,
			"blk.5.ffn_down.weight": c.d5, "blk.9.attn_output.weight": c.attnOut, "blk.9.ffn_norm.weight": gguf.F32,
		} {
			if got[name] != w {
				t.Errorf("%s: %s is %s, want %s", c.mix, name, got[name], w)
			}
		}
	}
}

// TestPureMixes checks a pure mix with its row-length fallbacks.
func TestPureMixes(t *testing.T) {
	ts := shapeTensors(576, 2, 9, 3, 1536, 512, true, false)
	m, err := quantize.Pure(gguf.Q3_K)
	if err != nil || m.FileType != 12 {
		t.Fatalf("quantize.Pure(Q3_K) = %+v, %v", m, err)
	}
	for i, typ := range m.Types(ts, 3) {
		want := gguf.Q4_0
		switch {
		case !quantize.Quantized(&ts[i]):
			want = gguf.F32
		case ts[i].Dims[0] == 1536:
			want = gguf.Q3_K
		}
		if typ != want {
			t.Errorf("pure Q3_K: %s is %s, want %s", ts[i].Name, typ, want)
		}
	}
	if _, err := quantize.Pure(gguf.Q8_K); err == nil {
		t.Error("quantize.Pure(Q8_K): no error")
	}
	if _, err := quantize.Lookup("Q9_X"); err == nil {
		t.Error("quantize.Lookup(Q9_X): no error")
	}
	if m, err := quantize.Lookup("q4_k"); err != nil || m.Name != "Q4_K_M" {
		t.Errorf("quantize.Lookup(q4_k) = %+v, %v", m, err)
	}
}

// tinyFile generates a one-layer F32 model in memory.
func tinyFile(t *testing.T) *gguf.File {
	t.Helper()
	s, _ := synth.Lookup("tiny-llama")
	s.Layers, s.FFN = 1, 256
	f32, _ := quantize.Lookup("F32")
	var b bytes.Buffer
	if err := synth.Write(context.Background(), &b, s, f32, synth.Options{Seed: 9}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFileQuantizes quantises a small model with each preset and checks
// the output: types as Types says, metadata kept and file type set, every
// tensor close to the original, and the same bytes whatever the thread
// count.
func TestFileQuantizes(t *testing.T) {
	src := tinyFile(t)
	for _, name := range []string{"Q4_K_M", "Q6_K", "Q8_0", "Q4_0", "BF16", "Q3_K_L"} {
		m, _ := quantize.Lookup(name)
		var a, b bytes.Buffer
		sum, err := quantize.File(context.Background(), &a, src, m, quantize.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		if name == "Q4_K_M" {
			if _, err := quantize.File(context.Background(), &b, src, m, quantize.Options{Threads: 3}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("%s: output depends on the thread count", name)
			}
		}
		out, err := gguf.Parse(a.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if ft, _ := out.Uint("general.file_type"); ft != uint64(m.FileType) {
			t.Errorf("%s: file type %d, want %d", name, ft, m.FileType)
		}
		if s, _ := out.Strings("tokenizer.ggml.merges"); len(s) == 0 || len(out.KVs) < len(src.KVs) {
			t.Errorf("%s: metadata lost: %d entries from %d", name, len(out.KVs), len(src.KVs))
		}
		types := m.Types(src.Tensors, 2)
		if ft, _ := src.Uint("general.file_type"); ft != 0 {
			t.Fatalf("source file type %d", ft)
		}
		n := 0
		for i := range src.Tensors {
			in, got := &src.Tensors[i], &out.Tensors[i]
			if got.Name != in.Name || got.Type != types[i] {
				t.Fatalf("%s: tensor %d is %s %s, want %s %s", name, i, got.Name, got.Type, in.Name, types[i])
			}
			n += sum.Tensors[got.Type]
			x, err := src.Floats(in)
			if err != nil {
				t.Fatal(err)
			}
			y, err := out.Floats(got)
			if err != nil {
				t.Fatal(err)
			}
			var se, ss float64
			for j := range x {
				se += float64((x[j] - y[j]) * (x[j] - y[j]))
				ss += float64(x[j] * x[j])
			}
			if e := math.Sqrt(se / ss); e > 0.35 {
				t.Errorf("%s: %s (%s) relative error %.3f", name, got.Name, got.Type, e)
			}
		}
		if n == 0 || len(out.Tensors) != len(src.Tensors) {
			t.Fatalf("%s: summary %v", name, sum)
		}
	}
}

// TestFileRefusesRequantizeAndHonoursContext covers the refusals.
func TestFileRefusesRequantizeAndHonoursContext(t *testing.T) {
	src := tinyFile(t)
	q8, _ := quantize.Lookup("Q8_0")
	var b bytes.Buffer
	if _, err := quantize.File(context.Background(), &b, src, q8, quantize.Options{}); err != nil {
		t.Fatal(err)
	}
	quantised, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	q4, _ := quantize.Lookup("Q4_K_M")
	if _, err := quantize.File(context.Background(), &bytes.Buffer{}, quantised, q4, quantize.Options{}); !errors.Is(err, quantize.ErrRequantize) {
		t.Fatalf("requantize: %v", err)
	}
	if _, err := quantize.File(context.Background(), &bytes.Buffer{}, quantised, q4, quantize.Options{AllowRequantize: true}); err != nil {
		t.Fatalf("allowed requantize: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := quantize.File(ctx, &bytes.Buffer{}, src, q4, quantize.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
