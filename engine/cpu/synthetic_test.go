package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
	// window is the sliding window (0: none); pattern the period of
	// sliding layers (attention.sliding_window_pattern, 0: not written).
	window, pattern int
	// attnCap and finalCap soft-cap attention scores and logits.
	attnCap, finalCap float32
	// scaling is rope.scaling.type with factor scaleFactor: "llama3" with
	// low/high frequency factors 1 and 4 and an original context of 16,
	// "linear", or "longrope" with rope_factors_long/short tensors, an
	// original context of 32 and an attention factor.
	scaling     string
	scaleFactor float32
	// pooling, when set, is written as <arch>.pooling_type.
	pooling *uint32
}

// tinyCtx is the context length of the generated models.
const tinyCtx = 64

// Conventions of the generated models' scaling metadata.
const (
	tinyOrigCtx  = 16   // llama3 original context length
	tinyLongOrig = 32   // longrope original context length (below tinyCtx: long factors apply)
	tinyAttnFac  = 1.15 // longrope attention factor
	tinyLocal    = 10000
)

// tinyWriter adds a generated model's tensors.
type tinyWriter struct {
	t   testing.TB
	w   *gguf.Writer
	rng *rand.Rand
	s   tinyShape
}

func (g *tinyWriter) must(err error) {
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *tinyWriter) rnd(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(g.rng.NormFloat64()) * scale
	}
	return v
}

// norm is a norm's weights as the file stores them (about 1).
func (g *tinyWriter) norm(name string, n int) {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1 + 0.1*float32(g.rng.NormFloat64())
	}
	g.vec(name, v)
}

func (g *tinyWriter) mat(name string, rows, cols int) {
	sc := float32(1 / math.Sqrt(float64(cols)))
	g.must(g.w.AddFloats(name, g.s.typ, []uint64{uint64(cols), uint64(rows)}, g.rnd(rows*cols, sc)))
}

func (g *tinyWriter) vec(name string, v []float32) {
	g.must(g.w.AddFloats(name, gguf.F32, []uint64{uint64(len(v))}, v))
}

// meta writes the hyperparameters.
func (g *tinyWriter) meta() {
	s, a := g.s, g.s.arch
	kv := func(k string, v any) { g.must(g.w.AddKV(k, v)) }
	kv("general.architecture", a)
	kv("general.name", "tiny-"+a)
	kv("tokenizer.ggml.bos_token_id", uint32(1))
	kv("tokenizer.ggml.eos_token_id", uint32(2))
	kv(a+".rope.freq_base", s.ropeBase)
	kv(a+".attention.layer_norm_rms_epsilon", float32(1e-6))
	for _, e := range []struct {
		key string
		v   int
	}{
		{"context_length", tinyCtx}, {"embedding_length", s.dim}, {"feed_forward_length", s.hidden},
		{"block_count", s.layers}, {"attention.head_count", s.heads}, {"attention.head_count_kv", s.kvHeads},
		{"attention.key_length", s.headDim}, {"attention.value_length", s.headDim}, {"rope.dimension_count", s.ropeDim},
	} {
		kv(a+"."+e.key, uint32(e.v))
	}
	if s.window > 0 {
		kv(a+".attention.sliding_window", uint32(s.window))
	}
	if s.pooling != nil {
		kv(a+".pooling_type", *s.pooling)
	}
	if s.pattern > 0 {
		kv(a+".attention.sliding_window_pattern", uint32(s.pattern))
	}
	if s.attnCap > 0 {
		kv(a+".attn_logit_softcapping", s.attnCap)
	}
	if s.finalCap > 0 {
		kv(a+".final_logit_softcapping", s.finalCap)
	}
	switch s.scaling {
	case "llama3":
		kv(a+".rope.scaling.type", "llama3")
		kv(a+".rope.scaling.factor", s.scaleFactor)
		kv(a+".rope.scaling.low_freq_factor", float32(1))
		kv(a+".rope.scaling.high_freq_factor", float32(4))
		kv(a+".rope.scaling.original_context_length", uint32(tinyOrigCtx))
	case "linear":
		kv(a+".rope.scaling.type", "linear")
		kv(a+".rope.scaling.factor", s.scaleFactor)
	case "longrope":
		kv(a+".rope.scaling.attn_factor", float32(tinyAttnFac))
		kv(a+".rope.scaling.original_context_length", uint32(tinyLongOrig))
	}
}

// buildTiny writes a small random model of the given shape as GGUF, in
// the tensor layout of its architecture.
func buildTiny(t testing.TB, s tinyShape, seed uint64) []byte {
	t.Helper()
	g := &tinyWriter{t: t, w: gguf.NewWriter(), rng: rand.New(rand.NewPCG(seed, 99)), s: s}
	g.meta()
	qd, kvd := s.heads*s.headDim, s.kvHeads*s.headDim
	embScale := float32(1)
	if strings.HasPrefix(s.arch, "gemma") { // the engine scales them by sqrt(dim)
		embScale = float32(1 / math.Sqrt(float64(s.dim)))
	}
	g.must(g.w.AddFloats("token_embd.weight", s.typ, []uint64{uint64(s.dim), uint64(s.vocab)}, g.rnd(s.vocab*s.dim, embScale)))
	g.norm("output_norm.weight", s.dim)
	if !s.tied {
		g.mat("output.weight", s.vocab, s.dim)
	}
	if s.scaling == "longrope" {
		for _, n := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
			f := make([]float32, s.ropeDim/2)
			for i := range f {
				f[i] = 1 + 4*g.rng.Float32()
			}
			g.vec(n, f)
		}
	}
	for l := range s.layers {
		p := fmt.Sprintf("blk.%d.", l)
		g.norm(p+"attn_norm.weight", s.dim)
		g.norm(p+"ffn_norm.weight", s.dim)
		if s.arch == "phi3" {
			g.mat(p+"attn_qkv.weight", qd+2*kvd, s.dim)
			g.mat(p+"ffn_up.weight", 2*s.hidden, s.dim)
		} else {
			g.mat(p+"attn_q.weight", qd, s.dim)
			g.mat(p+"attn_k.weight", kvd, s.dim)
			g.mat(p+"attn_v.weight", kvd, s.dim)
			g.mat(p+"ffn_gate.weight", s.hidden, s.dim)
			g.mat(p+"ffn_up.weight", s.hidden, s.dim)
		}
		g.mat(p+"attn_output.weight", s.dim, qd)
		g.mat(p+"ffn_down.weight", s.dim, s.hidden)
		if s.arch == "qwen2" {
			g.vec(p+"attn_q.bias", g.rnd(qd, 0.5))
			g.vec(p+"attn_k.bias", g.rnd(kvd, 0.5))
			g.vec(p+"attn_v.bias", g.rnd(kvd, 0.5))
		}
		if s.arch == "qwen3" || s.arch == "gemma3" {
			g.norm(p+"attn_q_norm.weight", s.headDim)
			g.norm(p+"attn_k_norm.weight", s.headDim)
		}
		if strings.HasPrefix(s.arch, "gemma") {
			g.norm(p+"post_attention_norm.weight", s.dim)
			g.norm(p+"post_ffw_norm.weight", s.dim)
		}
	}
	b, err := g.w.Bytes()
	g.must(err)
	return b
}

// refModel is a plain reference forward pass over a generated GGUF file,
// written independently of the engine from the architectures' published
// definitions: float64 arithmetic, weights dequantised with
// gguf.Dequantize, no batching, no KV paging.
type refModel struct {
	f     *gguf.File
	s     tinyShape
	cache map[string][]float64
}

// tensor returns a tensor's values (nil when the file lacks it).
func (m *refModel) tensor(t testing.TB, name string) []float64 {
	if v, ok := m.cache[name]; ok {
		return v
	}
	ti, ok := m.f.Tensor(name)
	if !ok {
		return nil
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
	if m.cache == nil {
		m.cache = make(map[string][]float64)
	}
	m.cache[name] = out
	return out
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
	w := m.tensor(t, name)
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

// sliding reports whether layer l attends within the window: every layer
// of llama and phi3 files that declare one, gemma2's even layers, and the
// first pattern−1 of every pattern layers of gemma3 (6 unless the file
// says otherwise).
func (m *refModel) sliding(l int) bool {
	p := m.s.pattern
	if p == 0 {
		p = map[string]int{"gemma2": 2, "gemma3": 6}[m.s.arch]
	}
	return m.s.window > 0 && (p == 0 || l%p < p-1)
}

// rope rotates the heads of x for layer l at position pos: pair j turns
// by pos/(base^(2j/rd)·f_j) scaled as the file's rope scaling says; gemma3's
// sliding layers use base 10000 unscaled.
func (m *refModel) rope(t testing.TB, x []float64, pos, l int) {
	s := m.s
	hd, rd := s.headDim, s.ropeDim
	base, scale, mscale := float64(s.ropeBase), 1.0, 1.0
	factor := func(int) float64 { return 1 }
	switch {
	case s.arch == "gemma3" && m.sliding(l):
		base = tinyLocal
	case s.scaling == "linear":
		scale = 1 / float64(s.scaleFactor)
	case s.scaling == "longrope":
		long := m.tensor(t, "rope_factors_long.weight")
		factor = func(j int) float64 { return long[j] }
		mscale = tinyAttnFac
	case s.scaling == "llama3":
		factor = func(j int) float64 {
			wavelen := 2 * math.Pi * math.Pow(base, float64(2*j)/float64(rd))
			f, lo, hi := float64(s.scaleFactor), tinyOrigCtx/1.0, tinyOrigCtx/4.0
			switch {
			case wavelen < hi:
				return 1
			case wavelen > lo:
				return f
			}
			smooth := (tinyOrigCtx/wavelen - 1) / (4 - 1)
			return 1 / ((1-smooth)/f + smooth)
		}
	}
	neox := s.arch != "llama"
	for h := 0; h < len(x)/hd; h++ {
		v := x[h*hd : (h+1)*hd]
		for j := 0; j < rd/2; j++ {
			theta := float64(pos) * scale / math.Pow(base, float64(2*j)/float64(rd)) / factor(j)
			i0, i1 := 2*j, 2*j+1
			if neox {
				i0, i1 = j, j+rd/2
			}
			c, sn := mscale*math.Cos(theta), mscale*math.Sin(theta)
			a, b := v[i0], v[i1]
			v[i0] = a*c - b*sn
			v[i1] = a*sn + b*c
		}
	}
}

// qkv returns layer l's queries, keys and values for normed input xn.
func (m *refModel) qkv(t testing.TB, p string, xn []float64) (q, k, v []float64) {
	s := m.s
	qd, kvd := s.heads*s.headDim, s.kvHeads*s.headDim
	if s.arch == "phi3" {
		all := m.mv(t, p+"attn_qkv.weight", xn)
		return all[:qd], all[qd : qd+kvd], all[qd+kvd:]
	}
	q, k, v = m.mv(t, p+"attn_q.weight", xn), m.mv(t, p+"attn_k.weight", xn), m.mv(t, p+"attn_v.weight", xn)
	for _, bv := range []struct {
		dst  []float64
		name string
	}{{q, "attn_q.bias"}, {k, "attn_k.bias"}, {v, "attn_v.bias"}} {
		if b := m.tensor(t, p+bv.name); b != nil {
			for i := range bv.dst {
				bv.dst[i] += b[i]
			}
		}
	}
	if qn := m.tensor(t, p+"attn_q_norm.weight"); qn != nil {
		hd := s.headDim
		for h := 0; h < s.heads; h++ {
			copy(q[h*hd:], refNorm(q[h*hd:(h+1)*hd], qn, 1e-6))
		}
		kn := m.tensor(t, p+"attn_k_norm.weight")
		for h := 0; h < s.kvHeads; h++ {
			copy(k[h*hd:], refNorm(k[h*hd:(h+1)*hd], kn, 1e-6))
		}
	}
	return q, k, v
}

// ffn returns the feed-forward output for normed input xn: silu or (gemma)
// tanh-approximated gelu of the gate, times up, through down.
func (m *refModel) ffn(t testing.TB, p string, xn []float64) []float64 {
	var g, u []float64
	if m.s.arch == "phi3" {
		gu := m.mv(t, p+"ffn_up.weight", xn)
		g, u = gu[:m.s.hidden], gu[m.s.hidden:]
	} else {
		g, u = m.mv(t, p+"ffn_gate.weight", xn), m.mv(t, p+"ffn_up.weight", xn)
	}
	for i, x := range g {
		if strings.HasPrefix(m.s.arch, "gemma") {
			g[i] = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * u[i]
		} else {
			g[i] = x / (1 + math.Exp(-x)) * u[i]
		}
	}
	return m.mv(t, p+"ffn_down.weight", g)
}

// attention returns the attention output of query q at position pos over
// the cached keys and values, from position first on.
func (m *refModel) attention(q []float64, keys, vals [][]float64, first, pos int) []float64 {
	s := m.s
	hd := s.headDim
	att := make([]float64, len(q))
	for h := 0; h < s.heads; h++ {
		kh := h / (s.heads / s.kvHeads)
		sc := make([]float64, pos+1)
		mx := math.Inf(-1)
		for tp := first; tp <= pos; tp++ {
			d := 0.0
			for i := 0; i < hd; i++ {
				d += q[h*hd+i] * keys[tp][kh*hd+i]
			}
			d /= math.Sqrt(float64(hd))
			if c := float64(s.attnCap); c > 0 {
				d = c * math.Tanh(d/c)
			}
			sc[tp] = d
			mx = math.Max(mx, d)
		}
		sum := 0.0
		for tp := first; tp <= pos; tp++ {
			sc[tp] = math.Exp(sc[tp] - mx)
			sum += sc[tp]
		}
		for tp := first; tp <= pos; tp++ {
			for i := 0; i < hd; i++ {
				att[h*hd+i] += sc[tp] / sum * vals[tp][kh*hd+i]
			}
		}
	}
	return att
}

// logits returns the logits after every position of tokens.
func (m *refModel) logits(t testing.TB, tokens []int32) [][]float64 {
	outName := "output.weight"
	if _, ok := m.f.Tensor(outName); !ok {
		outName = "token_embd.weight"
	}
	var res [][]float64
	for _, h := range m.hidden(t, tokens) {
		lg := m.mv(t, outName, h)
		if c := float64(m.s.finalCap); c > 0 {
			for i, v := range lg {
				lg[i] = c * math.Tanh(v/c)
			}
		}
		res = append(res, lg)
	}
	return res
}

// hidden returns the final hidden state (after the final norm) at every
// position of tokens.
func (m *refModel) hidden(t testing.TB, tokens []int32) [][]float64 {
	s := m.s
	const eps = 1e-6
	emb := m.tensor(t, "token_embd.weight")
	gemma := strings.HasPrefix(s.arch, "gemma")
	keys := make([][][]float64, s.layers)
	vals := make([][][]float64, s.layers)
	var res [][]float64
	for pos, tok := range tokens {
		x := append([]float64(nil), emb[int(tok)*s.dim:(int(tok)+1)*s.dim]...)
		if gemma {
			for i := range x {
				x[i] *= float64(float32(math.Sqrt(float64(s.dim))))
			}
		}
		for l := range s.layers {
			p := fmt.Sprintf("blk.%d.", l)
			q, k, v := m.qkv(t, p, refNorm(x, m.tensor(t, p+"attn_norm.weight"), eps))
			m.rope(t, q, pos, l)
			m.rope(t, k, pos, l)
			keys[l] = append(keys[l], k)
			vals[l] = append(vals[l], v)
			first := 0
			if m.sliding(l) {
				first = max(0, pos+1-s.window)
			}
			o := m.mv(t, p+"attn_output.weight", m.attention(q, keys[l], vals[l], first, pos))
			if gemma {
				o = refNorm(o, m.tensor(t, p+"post_attention_norm.weight"), eps)
			}
			for i := range x {
				x[i] += o[i]
			}
			d := m.ffn(t, p, refNorm(x, m.tensor(t, p+"ffn_norm.weight"), eps))
			if gemma {
				d = refNorm(d, m.tensor(t, p+"post_ffw_norm.weight"), eps)
			}
			for i := range x {
				x[i] += d[i]
			}
		}
		res = append(res, refNorm(x, m.tensor(t, "output_norm.weight"), eps))
	}
	return res
}

// weightTypes are the weight types the engine runs with its own kernels.
var weightTypes = []gguf.TensorType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1,
	gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// archShape returns the generated test shape of arch for weight type typ:
// 64 wide for the 32-value block types, 256 for K-quants.
func archShape(arch string, typ gguf.TensorType) tinyShape {
	s := tinyShape{arch: arch, typ: typ, dim: 64, hidden: 96, layers: 2, vocab: 80, heads: 4, kvHeads: 2, headDim: 16, ropeDim: 16, ropeBase: 10000}
	if typ.BlockSize() == gguf.QK {
		s.dim, s.hidden, s.headDim, s.ropeDim = 256, 256, 64, 64
		if !strings.HasPrefix(arch, "gemma") { // gemma needs a sliding and a global layer
			s.layers = 1
		}
	}
	switch arch {
	case "llama": // Llama 3.x rope scaling, partial rotary dimensions, a Mistral-style window
		s.ropeDim /= 2
		s.ropeBase = 500000
		s.scaling, s.scaleFactor = "llama3", 8
		s.window = 5
	case "qwen2":
		s.tied = true
		s.ropeBase = 1000000
	case "qwen3":
		s.headDim *= 2 // key_length differs from dim/heads
		s.ropeDim *= 2
	case "gemma2":
		s.tied = true
		s.window = 4
		s.attnCap, s.finalCap = 1.5, 4
	case "gemma3": // local layers at base 10000, global ones at 1e6 scaled linearly
		s.tied = true
		s.headDim *= 2
		s.ropeDim *= 2
		s.ropeBase = 1000000
		s.scaling, s.scaleFactor = "linear", 8
		s.window, s.pattern = 4, 2
	case "phi3":
		s.scaling = "longrope"
		s.window = 6
	}
	return s
}

// TestSyntheticArchitecturesMatchReference runs generated models of every
// architecture and weight type against the float64 reference forward pass,
// at the highest kernel level this CPU has and, for llama and one type of
// each family of kernels, at every lower level, and checks that one extend
// gives the same logits, bit for bit, as decoding and extending in pieces.
func TestSyntheticArchitecturesMatchReference(t *testing.T) {
	tokens := []int32{1, 17, 33, 5, 60, 79, 2, 40, 41, 12}
	for ai, arch := range Architectures() {
		for ti, typ := range weightTypes {
			s := archShape(arch, typ)
			t.Run(fmt.Sprintf("%s/%s", arch, typ), func(t *testing.T) {
				b := buildTiny(t, s, uint64(100*ai+ti+1))
				f, err := gguf.Parse(b)
				if err != nil {
					t.Fatal(err)
				}
				want := (&refModel{f: f, s: s}).logits(t, tokens)
				levels := []kernels.Level{kernels.Detect()}
				if arch == "llama" && (typ == gguf.F16 || typ == gguf.Q4_0 || typ == gguf.Q4_K) {
					for _, l := range kernels.Available() {
						if l != kernels.Detect() {
							levels = append(levels, l)
						}
					}
				}
				for _, l := range levels {
					checkSynthetic(t, f, s, l, tokens, want)
				}
			})
		}
	}
}

// checkSynthetic runs one generated model at kernel level l against the
// reference logits want.
func checkSynthetic(t *testing.T, f *gguf.File, s tinyShape, l kernels.Level, tokens []int32, want [][]float64) {
	e, err := NewFromGGUF(f, Options{Threads: 2, Kernels: l.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if info := e.Info(); info.Arch != s.arch || info.VocabSize != s.vocab || info.HiddenSize != s.dim {
		t.Fatalf("info %+v", info)
	}
	// The reference quantises activations as the engine does, from its
	// float64 values; the engine's float32 values can land on the other
	// side of a rounding boundary now and then, and one such flip moves
	// the logits by up to about 1% (the kernels' own exactness is tested
	// bit for bit in package kernels).
	tol := 1e-4
	if k, _ := kernels.NewSet(kernels.Generic).For(s.typ); k.Act != kernels.ActF32 {
		tol = 2e-2
	}
	// Decode one token at a time, and extend the rest in one step.
	out := make([]engine.Output, 1)
	ctx := context.Background()
	check := func(pos int, got []float32) {
		t.Helper()
		mx, diff := 0.0, 0.0
		for j, v := range want[pos] {
			mx = math.Max(mx, math.Abs(v))
			diff = math.Max(diff, math.Abs(v-float64(got[j])))
		}
		if diff > tol*(1+mx) {
			t.Fatalf("%s: position %d: max logit difference %g (max |logit| %g)", l, pos, diff, mx)
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
		t.Fatalf("%s: one extend and decode-then-extend give different logits", l)
	}
}

// FuzzLoadGGUF feeds mutated model files to the loader: it must return an
// error or an engine that can run a step, never panic.
func FuzzLoadGGUF(f *testing.F) {
	s := tinyShape{arch: "llama", dim: 32, hidden: 32, layers: 1, vocab: 8, heads: 2, kvHeads: 1, headDim: 16, ropeDim: 16, ropeBase: 10000, typ: gguf.Q8_0}
	f.Add(buildTiny(f, s, 1))
	s.arch, s.typ = "qwen3", gguf.F16
	f.Add(buildTiny(f, s, 2))
	for i, arch := range []string{"gemma3", "phi3"} {
		a := archShape(arch, gguf.Q8_0)
		a.dim, a.hidden, a.layers, a.vocab, a.heads, a.kvHeads, a.headDim, a.ropeDim = 32, 32, 2, 8, 2, 1, 16, 16
		f.Add(buildTiny(f, a, uint64(3+i)))
	}
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
