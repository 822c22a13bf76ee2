package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// tinyShape is the shape of the generated test models.
type tinyShape struct {
	arch                       string
	dim, hidden, layers, vocab int
	heads, kvHeads, headDim    int
	ropeDim                    int
	ropeBase                   float32
	tied                       bool
	typ                        gguf.TensorType
}

// buildTiny writes a small random model of the given shape as GGUF.
func buildTiny(t testing.TB, s tinyShape, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	w := gguf.NewWriter()
	a := s.arch
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.AddKV("general.architecture", a))
	must(w.AddKV("general.name", "tiny-"+a))
	must(w.AddKV(a+".context_length", uint32(64)))
	must(w.AddKV(a+".embedding_length", uint32(s.dim)))
	must(w.AddKV(a+".feed_forward_length", uint32(s.hidden)))
	must(w.AddKV(a+".block_count", uint32(s.layers)))
	must(w.AddKV(a+".attention.head_count", uint32(s.heads)))
	must(w.AddKV(a+".attention.head_count_kv", uint32(s.kvHeads)))
	must(w.AddKV(a+".attention.key_length", uint32(s.headDim)))
	must(w.AddKV(a+".attention.value_length", uint32(s.headDim)))
	must(w.AddKV(a+".rope.dimension_count", uint32(s.ropeDim)))
	must(w.AddKV(a+".rope.freq_base", s.ropeBase))
	must(w.AddKV(a+".attention.layer_norm_rms_epsilon", float32(1e-6)))
	must(w.AddKV("tokenizer.ggml.bos_token_id", uint32(1)))
	must(w.AddKV("tokenizer.ggml.eos_token_id", uint32(2)))
	rnd := func(n int, scale float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * scale
		}
		return v
	}
	norm := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1 + 0.1*float32(rng.NormFloat64())
		}
		return v
	}
	mat := func(name string, rows, cols int) {
		sc := float32(1 / math.Sqrt(float64(cols)))
		must(w.AddFloats(name, s.typ, []uint64{uint64(cols), uint64(rows)}, rnd(rows*cols, sc)))
	}
	vec := func(name string, v []float32) {
		must(w.AddFloats(name, gguf.F32, []uint64{uint64(len(v))}, v))
	}
	qd, kvd := s.heads*s.headDim, s.kvHeads*s.headDim
	must(w.AddFloats("token_embd.weight", s.typ, []uint64{uint64(s.dim), uint64(s.vocab)}, rnd(s.vocab*s.dim, 1)))
	vec("output_norm.weight", norm(s.dim))
	if !s.tied {
		mat("output.weight", s.vocab, s.dim)
	}
	for l := range s.layers {
		p := fmt.Sprintf("blk.%d.", l)
		vec(p+"attn_norm.weight", norm(s.dim))
		vec(p+"ffn_norm.weight", norm(s.dim))
		mat(p+"attn_q.weight", qd, s.dim)
		mat(p+"attn_k.weight", kvd, s.dim)
		mat(p+"attn_v.weight", kvd, s.dim)
		mat(p+"attn_output.weight", s.dim, qd)
		mat(p+"ffn_gate.weight", s.hidden, s.dim)
		mat(p+"ffn_up.weight", s.hidden, s.dim)
		mat(p+"ffn_down.weight", s.dim, s.hidden)
		if a == "qwen2" {
			vec(p+"attn_q.bias", rnd(qd, 0.5))
			vec(p+"attn_k.bias", rnd(kvd, 0.5))
			vec(p+"attn_v.bias", rnd(kvd, 0.5))
		}
		if a == "qwen3" {
			vec(p+"attn_q_norm.weight", norm(s.headDim))
			vec(p+"attn_k_norm.weight", norm(s.headDim))
		}
	}
	b, err := w.Bytes()
	must(err)
	return b
}

// refModel is a plain reference forward pass over a GGUF file, written
// independently of the engine: float64 arithmetic, weights dequantised with
// gguf.Dequantize, no batching, no KV paging.
type refModel struct {
	f                      *gguf.File
	arch                   string
	dim, heads, kv, hd, rd int
	base, eps              float64
	neox                   bool
}

func (m *refModel) tensor(t testing.TB, name string) ([]float64, int) {
	ti, ok := m.f.Tensor(name)
	if !ok {
		return nil, 0
	}
	data, err := m.f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, ti.Elems())
	if err := gguf.Dequantize(ti.Type, v, data); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out, int(ti.Dims[0])
}

// mv computes W·x for W stored as rows of len(x).
func mv(w []float64, x []float64) []float64 {
	out := make([]float64, len(w)/len(x))
	for r := range out {
		s := 0.0
		for c, xv := range x {
			s += w[r*len(x)+c] * xv
		}
		out[r] = s
	}
	return out
}

// mv multiplies weight matrix name by x. For weight types whose kernels
// take activations quantised to 8 bits per block, x is first quantised the
// way the engine does it (scale = largest magnitude / 127 in float32, values
// rounded to the nearest integer): that rounding is part of the computation
// the engine defines, not an error of it.
func (m *refModel) mv(t testing.TB, name string, x []float64) []float64 {
	w, _ := m.tensor(t, name)
	ti, _ := m.f.Tensor(name)
	k, ok := kernels.NewSet(kernels.Generic).For(ti.Type)
	if !ok {
		t.Fatalf("no kernel for %s", ti.Type)
	}
	if bs := k.Act.Block(); k.Act != kernels.ActF32 {
		xq := make([]float64, len(x))
		for b := 0; b < len(x); b += bs {
			var amax float32
			for _, v := range x[b : b+bs] {
				amax = max(amax, float32(math.Abs(float64(float32(v)))))
			}
			if amax == 0 {
				continue
			}
			d := amax / 127
			id := 1 / d
			for i, v := range x[b : b+bs] {
				q := max(-127, min(127, math.Round(float64(float32(v)*id))))
				xq[b+i] = float64(d) * q
			}
		}
		x = xq
	}
	return mv(w, x)
}

func refNorm(x, w []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	sc := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = x[i] * sc * w[i]
	}
	return out
}

func (m *refModel) rope(x []float64, pos int) {
	for h := 0; h < len(x)/m.hd; h++ {
		v := x[h*m.hd : (h+1)*m.hd]
		for j := 0; j < m.rd/2; j++ {
			theta := float64(pos) / math.Pow(m.base, float64(2*j)/float64(m.rd))
			i0, i1 := 2*j, 2*j+1
			if m.neox {
				i0, i1 = j, j+m.rd/2
			}
			a, b := v[i0], v[i1]
			v[i0] = a*math.Cos(theta) - b*math.Sin(theta)
			v[i1] = a*math.Sin(theta) + b*math.Cos(theta)
		}
	}
}

// logits returns the logits after every position of tokens.
func (m *refModel) logits(t testing.TB, tokens []int32) [][]float64 {
	get := func(name string) []float64 { v, _ := m.tensor(t, name); return v }
	emb := get("token_embd.weight")
	outName := "output.weight"
	if _, ok := m.f.Tensor(outName); !ok {
		outName = "token_embd.weight"
	}
	nl := 0
	for ; ; nl++ {
		if _, ok := m.f.Tensor(fmt.Sprintf("blk.%d.attn_q.weight", nl)); !ok {
			break
		}
	}
	keys := make([][][]float64, nl)
	vals := make([][][]float64, nl)
	var res [][]float64
	for pos, tok := range tokens {
		x := append([]float64(nil), emb[int(tok)*m.dim:(int(tok)+1)*m.dim]...)
		for l := range nl {
			p := fmt.Sprintf("blk.%d.", l)
			xn := refNorm(x, get(p+"attn_norm.weight"), m.eps)
			q, k, v := m.mv(t, p+"attn_q.weight", xn), m.mv(t, p+"attn_k.weight", xn), m.mv(t, p+"attn_v.weight", xn)
			for _, bv := range []struct {
				dst  []float64
				name string
			}{{q, "attn_q.bias"}, {k, "attn_k.bias"}, {v, "attn_v.bias"}} {
				if b := get(p + bv.name); b != nil {
					for i := range bv.dst {
						bv.dst[i] += b[i]
					}
				}
			}
			if qn := get(p + "attn_q_norm.weight"); qn != nil {
				for h := 0; h < m.heads; h++ {
					copy(q[h*m.hd:], refNorm(q[h*m.hd:(h+1)*m.hd], qn, m.eps))
				}
				kn := get(p + "attn_k_norm.weight")
				for h := 0; h < m.kv; h++ {
					copy(k[h*m.hd:], refNorm(k[h*m.hd:(h+1)*m.hd], kn, m.eps))
				}
			}
			m.rope(q, pos)
			m.rope(k, pos)
			keys[l] = append(keys[l], k)
			vals[l] = append(vals[l], v)
			att := make([]float64, len(q))
			for h := 0; h < m.heads; h++ {
				kh := h / (m.heads / m.kv)
				sc := make([]float64, pos+1)
				mx := math.Inf(-1)
				for tp := 0; tp <= pos; tp++ {
					s := 0.0
					for i := 0; i < m.hd; i++ {
						s += q[h*m.hd+i] * keys[l][tp][kh*m.hd+i]
					}
					sc[tp] = s / math.Sqrt(float64(m.hd))
					mx = math.Max(mx, sc[tp])
				}
				sum := 0.0
				for tp := range sc {
					sc[tp] = math.Exp(sc[tp] - mx)
					sum += sc[tp]
				}
				for tp := range sc {
					for i := 0; i < m.hd; i++ {
						att[h*m.hd+i] += sc[tp] / sum * vals[l][tp][kh*m.hd+i]
					}
				}
			}
			o := m.mv(t, p+"attn_output.weight", att)
			for i := range x {
				x[i] += o[i]
			}
			xn = refNorm(x, get(p+"ffn_norm.weight"), m.eps)
			g, u := m.mv(t, p+"ffn_gate.weight", xn), m.mv(t, p+"ffn_up.weight", xn)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			d := m.mv(t, p+"ffn_down.weight", g)
			for i := range x {
				x[i] += d[i]
			}
		}
		res = append(res, m.mv(t, outName, refNorm(x, get("output_norm.weight"), m.eps)))
	}
	return res
}

// weightTypes are the weight types the engine runs with its own kernels.
var weightTypes = []gguf.TensorType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1}

// TestSyntheticArchitecturesMatchReference runs generated models of every
// architecture and weight type at every kernel level this CPU has against
// the float64 reference forward pass, and checks that one extend gives the
// same logits, bit for bit, as decoding and extending in pieces.
func TestSyntheticArchitecturesMatchReference(t *testing.T) {
	base := tinyShape{dim: 64, hidden: 96, layers: 2, vocab: 80, heads: 4, kvHeads: 2, headDim: 16, ropeDim: 16, ropeBase: 10000}
	var cases []tinyShape
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, typ := range weightTypes {
			s := base
			s.arch, s.typ = arch, typ
			switch arch {
			case "llama":
				s.ropeDim = 8 // partial rotary dimensions
				s.ropeBase = 500000
			case "qwen2":
				s.tied = true
				s.ropeBase = 1000000
			case "qwen3":
				s.headDim = 32 // key_length differs from dim/heads
			}
			cases = append(cases, s)
		}
	}
	tokens := []int32{1, 17, 33, 5, 60, 79, 2, 40, 41, 12}
	for i, s := range cases {
		for l := kernels.Generic; l <= kernels.Detect(); l++ {
			t.Run(fmt.Sprintf("%s/%s/%s", s.arch, s.typ, l), func(t *testing.T) {
				if _, err := gguf.Quantize(s.typ, make([]float32, 32)); err != nil {
					t.Skipf("package gguf cannot write %s yet: %v", s.typ, err)
				}
				checkSynthetic(t, s, uint64(i+1), l, tokens)
			})
		}
	}
}

// checkSynthetic runs one generated model at kernel level l against the
// reference.
func checkSynthetic(t *testing.T, s tinyShape, seed uint64, l kernels.Level, tokens []int32) {
	{
		{
			b := buildTiny(t, s, seed)
			f, err := gguf.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewFromGGUF(f, Options{Threads: 2, Kernels: l.String()})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if info := e.Info(); info.Arch != s.arch || info.VocabSize != s.vocab || info.HiddenSize != s.dim {
				t.Fatalf("info %+v", info)
			}
			ref := &refModel{f: f, arch: s.arch, dim: s.dim, heads: s.heads, kv: s.kvHeads, hd: s.headDim, rd: s.ropeDim,
				base: float64(s.ropeBase), eps: 1e-6, neox: s.arch != "llama"}
			want := ref.logits(t, tokens)
			// The reference quantises activations as the engine does, from its
			// float64 values; the engine's float32 values can land on the other
			// side of a rounding boundary now and then, and one such flip moves
			// the logits by up to about 1% (the kernels' own exactness is
			// tested bit for bit in package kernels).
			tol := 1e-4
			if k, _ := kernels.NewSet(kernels.Generic).For(s.typ); k.Act != kernels.ActF32 {
				tol = 2e-2
			}
			// Decode one token at a time, and extend the rest in one step.
			out := make([]engine.Output, 1)
			ctx := context.Background()
			check := func(pos int, got []float32) {
				mx, diff := 0.0, 0.0
				for j, v := range want[pos] {
					mx = math.Max(mx, math.Abs(v))
					diff = math.Max(diff, math.Abs(v-float64(got[j])))
				}
				if diff > tol*(1+mx) {
					t.Fatalf("position %d: max logit difference %g (max |logit| %g)", pos, diff, mx)
				}
			}
			for pos := range 4 {
				if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: tokens[pos : pos+1], Want: engine.WantLogits}}, out); err != nil {
					t.Fatal(err)
				}
				check(pos, out[0].Logits)
			}
			if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: tokens[4:], Want: engine.WantLogits}}, out); err != nil {
				t.Fatal(err)
			}
			check(len(tokens)-1, out[0].Logits)
			pieces := slices.Clone(out[0].Logits)
			if err := e.Step(ctx, []engine.Input{{Seq: 2, Tokens: tokens, Want: engine.WantLogits}}, out); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out[0].Logits, pieces) {
				t.Fatalf("one extend and decode-then-extend give different logits")
			}
		}
	}
}

// FuzzLoadGGUF feeds mutated model files to the loader: it must return an
// error or an engine that can run a step, never panic.
func FuzzLoadGGUF(f *testing.F) {
	s := tinyShape{arch: "llama", dim: 32, hidden: 32, layers: 1, vocab: 8, heads: 2, kvHeads: 1, headDim: 16, ropeDim: 16, ropeBase: 10000, typ: gguf.Q8_0}
	f.Add(buildTiny(f, s, 1))
	s.arch, s.typ = "qwen3", gguf.F16
	f.Add(buildTiny(f, s, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := gguf.Parse(b)
		if err != nil {
			return
		}
		e, err := NewFromGGUF(file, Options{Threads: 1, KVBudgetBytes: 1 << 20, ContextLength: 64})
		if err != nil {
			return
		}
		defer e.Close()
		out := make([]engine.Output, 1)
		_ = e.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{0, 1}}}, out)
	})
}
