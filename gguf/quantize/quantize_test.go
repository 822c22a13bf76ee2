package quantize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// shapeTensors lists the tensor infos of a llama/qwen2 model (no data).
func shapeTensors(dim, layers, qDim, kvDim, ffn, vocab int, tied, biases bool) []gguf.TensorInfo {
	var ts []gguf.TensorInfo
	add := func(name string, dims ...int) {
		d := make([]uint64, len(dims))
		for i, v := range dims {
			d[i] = uint64(v)
		}
		ts = append(ts, gguf.TensorInfo{Name: name, Type: gguf.F32, Dims: d})
	}
	add("token_embd.weight", dim, vocab)
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", dim)
		add(p+"attn_q.weight", dim, qDim)
		add(p+"attn_k.weight", dim, kvDim)
		add(p+"attn_v.weight", dim, kvDim)
		if biases {
			add(p+"attn_q.bias", qDim)
			add(p+"attn_k.bias", kvDim)
			add(p+"attn_v.bias", kvDim)
		}
		add(p+"attn_output.weight", qDim, dim)
		add(p+"ffn_norm.weight", dim)
		add(p+"ffn_gate.weight", dim, ffn)
		add(p+"ffn_up.weight", dim, ffn)
		add(p+"ffn_down.weight", ffn, dim)
	}
	add("output_norm.weight", dim)
	if !tied {
		add("output.weight", dim, vocab)
	}
	return ts
}

func typesByName(t *testing.T, name string, ts []gguf.TensorInfo, gqa int) map[string]gguf.TensorType {
	t.Helper()
	m, err := Lookup(name)
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
	ts := shapeTensors(896, 24, 896, 128, 4864, 151936, true, true)
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
	ts := shapeTensors(4096, 32, 4096, 1024, 11008, 32000, false, false)
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

// TestFallbacks checks the row-length fallbacks and the pure mixes.
func TestFallbacks(t *testing.T) {
	for _, c := range []struct {
		typ  gguf.TensorType
		n    uint64
		want gguf.TensorType
	}{
		{gguf.Q4_K, 896, gguf.Q5_0}, {gguf.Q5_K, 576, gguf.Q5_1}, {gguf.Q6_K, 960, gguf.Q8_0},
		{gguf.Q2_K, 896, gguf.Q4_0}, {gguf.Q3_K, 896, gguf.Q4_0}, {gguf.Q4_K, 1536, gguf.Q4_K},
		{gguf.Q4_0, 48, gguf.F16}, {gguf.Q6_K, 80, gguf.F16}, {gguf.F16, 7, gguf.F16},
	} {
		if got := fallback(c.typ, c.n); got != c.want {
			t.Errorf("fallback(%s, %d) = %s, want %s", c.typ, c.n, got, c.want)
		}
	}
	ts := shapeTensors(576, 2, 576, 192, 1536, 512, true, false)
	m, err := Pure(gguf.Q3_K)
	if err != nil || m.FileType != 12 {
		t.Fatalf("Pure(Q3_K) = %+v, %v", m, err)
	}
	for i, typ := range m.Types(ts, 3) {
		want := gguf.Q4_0
		switch {
		case !Quantized(&ts[i]):
			want = gguf.F32
		case ts[i].Dims[0] == 1536:
			want = gguf.Q3_K
		}
		if typ != want {
			t.Errorf("pure Q3_K: %s is %s, want %s", ts[i].Name, typ, want)
		}
	}
	if _, err := Pure(gguf.Q8_K); err == nil {
		t.Error("Pure(Q8_K): no error")
	}
	if _, err := Lookup("Q9_X"); err == nil {
		t.Error("Lookup(Q9_X): no error")
	}
	if m, err := Lookup("q4_k"); err != nil || m.Name != "Q4_K_M" {
		t.Errorf("Lookup(q4_k) = %+v, %v", m, err)
	}
}

// tinyFile builds an F32 model file with random weights in memory.
func tinyFile(t *testing.T, dim, ffn int) *gguf.File {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	w := gguf.NewWriter()
	for k, v := range map[string]any{"general.architecture": "llama", "llama.attention.head_count": uint32(4), "llama.attention.head_count_kv": uint32(2), "general.file_type": uint32(0), "keep.me": []string{"a", "b"}} {
		if err := w.AddKV(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range shapeTensors(dim, 1, dim, dim/2, ffn, 64, false, true) {
		v := make([]float32, ti.Elems())
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.02)
		}
		if err := w.AddFloats(ti.Name, gguf.F32, ti.Dims, v); err != nil {
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
	return f
}

// TestFileQuantizes quantises a small model with each preset and checks
// the output: types as Types says, metadata kept and file type set, every
// tensor close to the original, and the same bytes whatever the thread
// count.
func TestFileQuantizes(t *testing.T) {
	src := tinyFile(t, 256, 256)
	for _, name := range []string{"Q4_K_M", "Q6_K", "Q8_0", "Q4_0", "BF16", "Q3_K_L"} {
		m, _ := Lookup(name)
		var a, b bytes.Buffer
		sum, err := File(context.Background(), &a, src, m, Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		if name == "Q4_K_M" {
			if _, err := File(context.Background(), &b, src, m, Options{Threads: 3}); err != nil {
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
		if s, _ := out.Strings("keep.me"); len(s) != 2 {
			t.Errorf("%s: metadata lost", name)
		}
		types := m.Types(src.Tensors, 2)
		n := 0
		for i := range src.Tensors {
			in, got := &src.Tensors[i], &out.Tensors[i]
			if got.Name != in.Name || got.Type != types[i] {
				t.Fatalf("%s: tensor %d is %s %s, want %s %s", name, i, got.Name, got.Type, in.Name, types[i])
			}
			n += sum.Tensors[got.Type]
			x, y := decode(t, src, in), decode(t, out, got)
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

func decode(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	d, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, ti.Elems())
	if err := gguf.Dequantize(ti.Type, out, d); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFileRefusesRequantizeAndHonoursContext covers the refusals.
func TestFileRefusesRequantizeAndHonoursContext(t *testing.T) {
	src := tinyFile(t, 256, 256)
	q8, _ := Lookup("Q8_0")
	var b bytes.Buffer
	if _, err := File(context.Background(), &b, src, q8, Options{}); err != nil {
		t.Fatal(err)
	}
	quantised, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	q4, _ := Lookup("Q4_K_M")
	if _, err := File(context.Background(), &bytes.Buffer{}, quantised, q4, Options{}); !errors.Is(err, ErrRequantize) {
		t.Fatalf("requantize: %v", err)
	}
	if _, err := File(context.Background(), &bytes.Buffer{}, quantised, q4, Options{AllowRequantize: true}); err != nil {
		t.Fatalf("allowed requantize: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := File(ctx, &bytes.Buffer{}, src, q4, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
