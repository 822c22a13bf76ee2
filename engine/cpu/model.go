package cpu

import (
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
)

// config holds the hyperparameters of a loaded model.
type config struct {
	name, arch     string
	dim            int // embedding width
	hidden         int // feed-forward width
	layers         int
	heads, kvHeads int
	headDim        int
	vocab          int
	ctx            int
	ropeDim        int
	ropeBase       float64
	ropeStyle      ropeStyle // how head dimensions pair for rotation
	eps            float32
	bos, eos       int32
	vocabHash      string // engine.VocabHash of the vocabulary, "" when unknown

	rope, ropeLocal   ropeSpec // ropeLocal: sliding layers with localRope
	localRope         bool     // see archSpec.localRope
	window            int      // sliding-window length (0: none)
	swaPattern        int      // see archSpec.swaPattern
	embedScale        float32  // factor of the token embeddings (0: none)
	attnCap, finalCap float32  // soft-capping of attention scores and logits (0: none)
	gelu              bool     // GELU-tanh gated FFN instead of SwiGLU (see ffnGate)

	pooling engine.Pooling // <arch>.pooling_type as the file says (0: none or absent; see Pooling)
}

func (c *config) qDim() int  { return c.heads * c.headDim }
func (c *config) kvDim() int { return c.kvHeads * c.headDim }

// matrix is a weight matrix of rows × cols (ggml ne1 × ne0) in one of the
// GGUF storage types, read in place: data is the tensor's bytes in the file
// (or a checkpoint's float32 values seen as bytes), never copied.
type matrix struct {
	typ        gguf.TensorType
	rows, cols int
	data       []byte // rows × rowBytes
	rowBytes   int
	k          [kernels.MulClasses]kernels.Kernel // by class of the call (kernels.ClassOf), set by the engine
}

// row dequantises row r into buf[:cols] and returns it.
func (m *matrix) row(r int, buf []float32) []float32 {
	buf = buf[:m.cols]
	_ = gguf.Dequantize(m.typ, buf, m.data[r*m.rowBytes:(r+1)*m.rowBytes]) // sizes checked at load
	return buf
}

type layer struct {
	attnNorm, ffnNorm []float32
	postAttn, postFFN []float32 // norms of the attention and FFN outputs (blockTensors.postNorms)
	qNorm, kNorm      []float32 // per-head query and key norms (blockTensors.qkNorm)
	bq, bk, bv        []float32 // projection biases (blockTensors.qkvBias)
	wq, wk, wv, wo    matrix
	gate, up, down    matrix
	window            int // sliding window (0: attend to every position)
	rope              int // index of the layer's rotary table
}

type weights struct {
	embd    matrix
	outNorm []float32
	output  matrix
	layers  []layer
	file    *gguf.File // the mapped file the weights are in, if the engine opened it
}

// matrices lists the matrices that multiply activations (all but the
// token embedding, whose rows are only looked up).
func (w *weights) matrices() []*matrix {
	ms := []*matrix{&w.output}
	for i := range w.layers {
		ly := &w.layers[i]
		ms = append(ms, &ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down)
	}
	return ms
}

// Limits on model hyperparameters accepted from files.
const (
	maxDim    = 1 << 16
	maxLayers = 1 << 10
	maxVocab  = 1 << 22
	maxCtx    = 1 << 21
)

func (c *config) validate() error {
	switch {
	case c.dim <= 0 || c.dim > maxDim, c.hidden <= 0 || c.hidden > 8*maxDim:
		return fmt.Errorf("cpu: bad dimensions dim=%d hidden=%d", c.dim, c.hidden)
	case c.layers <= 0 || c.layers > maxLayers:
		return fmt.Errorf("cpu: bad layer count %d", c.layers)
	case c.heads <= 0 || c.kvHeads <= 0 || c.heads%c.kvHeads != 0:
		return fmt.Errorf("cpu: bad head counts %d/%d", c.heads, c.kvHeads)
	case c.headDim <= 0 || c.headDim > 4096 || c.headDim%2 != 0:
		return fmt.Errorf("cpu: bad head dimension %d", c.headDim)
	case c.ropeDim <= 0 || c.ropeDim > c.headDim || c.ropeDim%2 != 0:
		return fmt.Errorf("cpu: bad rope dimension %d (head dimension %d)", c.ropeDim, c.headDim)
	case c.vocab <= 0 || c.vocab > maxVocab:
		return fmt.Errorf("cpu: bad vocabulary size %d", c.vocab)
	case c.ctx <= 0 || c.ctx > maxCtx:
		return fmt.Errorf("cpu: bad context length %d", c.ctx)
	case !(c.ropeBase > 0) || math.IsInf(c.ropeBase, 0):
		return fmt.Errorf("cpu: bad rope base %v", c.ropeBase)
	}
	return nil
}

// loadFile reads a model file: GGUF when it starts with the GGUF magic
// (mapped and populated, in huge pages where the system has them; the
// weights stay in the mapping, which w.file releases), otherwise a
// llama2.c checkpoint. progress, if set, is told as a GGUF file is read
// in.
func loadFile(path string, progress func(done, total int64)) (*config, *weights, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cpu: %w", err)
	}
	var magic [4]byte
	_, err = fh.Read(magic[:])
	fh.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("cpu: %s: %w", path, err)
	}
	if string(magic[:]) == gguf.Magic {
		f, err := gguf.OpenWith(path, gguf.OpenOptions{Populate: true, Progress: progress})
		if err != nil {
			return nil, nil, fmt.Errorf("cpu: %w", err)
		}
		c, w, err := fromGGUF(f)
		if err != nil {
			_ = f.Close()
			return nil, nil, err
		}
		w.file = f
		return c, w, nil
	}
	ck, err := llama2c.OpenCheckpoint(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cpu: %w", err)
	}
	c, w := fromCheckpoint(ck)
	return c, w, nil
}

// loadBytes reads a model file held in memory: GGUF when it starts with the
// GGUF magic (the weights stay in data), otherwise a llama2.c checkpoint.
func loadBytes(name string, data []byte) (*config, *weights, error) {
	if len(data) >= len(gguf.Magic) && string(data[:len(gguf.Magic)]) == gguf.Magic {
		f, err := gguf.Parse(data)
		if err != nil {
			return nil, nil, fmt.Errorf("cpu: %s: %w", name, err)
		}
		return fromGGUF(f)
	}
	ck, err := llama2c.ParseCheckpoint(data)
	if err != nil {
		return nil, nil, fmt.Errorf("cpu: %s: %w", name, err)
	}
	c, w := fromCheckpoint(ck)
	return c, w, nil
}

// f32Matrix wraps float32 weights, seen as their little-endian bytes.
func f32Matrix(rows, cols int, v []float32) matrix {
	var b []byte
	if len(v) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	}
	return matrix{typ: gguf.F32, rows: rows, cols: cols, data: b, rowBytes: 4 * cols}
}

func fromCheckpoint(ck *llama2c.Checkpoint) (*config, *weights) {
	spec := llamaSpec()
	c := &config{
		name: "llama2.c", arch: spec.name,
		dim: ck.Dim, hidden: ck.HiddenDim, layers: ck.NLayers, heads: ck.NHeads, kvHeads: ck.NKVHeads,
		headDim: ck.HeadSize(), vocab: ck.VocabSize, ctx: ck.SeqLen, ropeBase: 10000, eps: spec.eps,
		ropeStyle: spec.rope, bos: 1, eos: 2,
	}
	c.ropeDim = c.headDim
	c.rope = ropeSpec{base: c.ropeBase, scale: 1, mscale: 1}
	d, h, kv := c.dim, c.hidden, c.kvDim()
	w := &weights{
		embd:    f32Matrix(c.vocab, d, ck.TokenEmbedding),
		outNorm: ck.RMSFinal,
		output:  f32Matrix(c.vocab, d, ck.WCls),
	}
	for l := range c.layers {
		w.layers = append(w.layers, layer{
			attnNorm: ck.RMSAtt[l*d : (l+1)*d],
			ffnNorm:  ck.RMSFFN[l*d : (l+1)*d],
			wq:       f32Matrix(d, d, ck.WQ[l*d*d:(l+1)*d*d]),
			wk:       f32Matrix(kv, d, ck.WK[l*kv*d:(l+1)*kv*d]),
			wv:       f32Matrix(kv, d, ck.WV[l*kv*d:(l+1)*kv*d]),
			wo:       f32Matrix(d, d, ck.WO[l*d*d:(l+1)*d*d]),
			gate:     f32Matrix(h, d, ck.W1[l*h*d:(l+1)*h*d]),
			down:     f32Matrix(d, h, ck.W2[l*d*h:(l+1)*d*h]),
			up:       f32Matrix(h, d, ck.W3[l*h*d:(l+1)*h*d]),
		})
	}
	return c, w
}

func fromGGUF(f *gguf.File) (*config, *weights, error) {
	arch := f.Arch()
	spec, err := archConventions(arch)
	if err != nil {
		return nil, nil, err
	}
	c := &config{arch: arch, name: arch, ropeBase: 10000, eps: spec.eps, bos: -1, eos: -1, ropeStyle: spec.rope, localRope: spec.localRope}
	if s, ok := f.String("general.name"); ok && s != "" {
		c.name = s
	}
	m := meta{f: f, arch: arch}
	if err := c.readHyper(m); err != nil {
		return nil, nil, err
	}
	c.pooling = filePooling(f, arch)
	if tokens, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		c.vocabHash = engine.VocabHash(tokens)
	}
	if v, ok := f.Uint("tokenizer.ggml.bos_token_id"); ok && v < math.MaxInt32 {
		c.bos = int32(v)
	}
	if v, ok := f.Uint("tokenizer.ggml.eos_token_id"); ok && v < math.MaxInt32 {
		c.eos = int32(v)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, nil, fmt.Errorf("cpu: GGUF lacks a 2-D token_embd.weight")
	}
	c.vocab = int(min(emb.Dims[1], maxVocab+1))
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	if c.bos >= int32(c.vocab) {
		c.bos = -1
	}
	if c.eos >= int32(c.vocab) {
		c.eos = -1
	}
	l := &tensorLoader{f: f}
	if err := c.readRope(m, l.factors); err != nil {
		return nil, nil, err
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	if err := c.readLayout(m, spec); err != nil {
		return nil, nil, err
	}
	w := &weights{}
	w.embd = l.mat("token_embd.weight", c.vocab, c.dim)
	w.outNorm = l.vec("output_norm.weight", c.dim, false)
	if _, ok := f.Tensor("output.weight"); ok {
		w.output = l.mat("output.weight", c.vocab, c.dim)
	} else {
		w.output = w.embd
	}
	for i := range c.layers {
		w.layers = append(w.layers, c.loadLayer(l, spec.blocks, i))
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	return c, w, nil
}

// readHyper reads the sizes, the rotary base and the norm epsilon.
func (c *config) readHyper(m meta) error {
	for _, e := range []struct {
		key string
		dst *int
		req bool
	}{
		{"embedding_length", &c.dim, true}, {"feed_forward_length", &c.hidden, true},
		{"block_count", &c.layers, true}, {"attention.head_count", &c.heads, true},
		{"context_length", &c.ctx, true},
	} {
		if err := m.uint(e.key, e.dst, e.req); err != nil {
			return err
		}
	}
	c.kvHeads = c.heads
	if err := m.uint("attention.head_count_kv", &c.kvHeads, false); err != nil {
		return err
	}
	if c.heads > 0 {
		c.headDim = c.dim / c.heads
	}
	if err := m.uint("attention.key_length", &c.headDim, false); err != nil {
		return err
	}
	c.ropeDim = c.headDim
	if err := m.uint("rope.dimension_count", &c.ropeDim, false); err != nil {
		return err
	}
	c.ropeBase = m.float("rope.freq_base", c.ropeBase)
	c.eps = float32(m.float("attention.layer_norm_rms_epsilon", float64(c.eps)))
	if v, ok := m.f.Uint(m.arch + ".attention.value_length"); ok && int(v) != c.headDim {
		return fmt.Errorf("cpu: value_length %d differs from key_length %d", v, c.headDim)
	}
	return nil
}

// loadLayer wraps block i's tensors, those of bt among them.
func (c *config) loadLayer(l *tensorLoader, bt blockTensors, i int) layer {
	qd, kvd := c.qDim(), c.kvDim()
	p := fmt.Sprintf("blk.%d.", i)
	ly := layer{
		attnNorm: l.vec(p+"attn_norm.weight", c.dim, false),
		ffnNorm:  l.vec(p+"ffn_norm.weight", c.dim, false),
		wo:       l.mat(p+"attn_output.weight", c.dim, qd),
		down:     l.mat(p+"ffn_down.weight", c.dim, c.hidden),
	}
	if _, ok := l.f.Tensor(p + "attn_qkv.weight"); bt.fusedQKV && ok {
		qkv := l.mat(p+"attn_qkv.weight", qd+2*kvd, c.dim)
		ly.wq, ly.wk, ly.wv = qkv.rowRange(0, qd), qkv.rowRange(qd, qd+kvd), qkv.rowRange(qd+kvd, qd+2*kvd)
	} else {
		ly.wq = l.mat(p+"attn_q.weight", qd, c.dim)
		ly.wk = l.mat(p+"attn_k.weight", kvd, c.dim)
		ly.wv = l.mat(p+"attn_v.weight", kvd, c.dim)
	}
	if bt.fusedGateUp {
		gu := l.mat(p+"ffn_up.weight", 2*c.hidden, c.dim)
		ly.gate, ly.up = gu.rowRange(0, c.hidden), gu.rowRange(c.hidden, 2*c.hidden)
	} else {
		ly.gate = l.mat(p+"ffn_gate.weight", c.hidden, c.dim)
		ly.up = l.mat(p+"ffn_up.weight", c.hidden, c.dim)
	}
	if bt.qkvBias {
		ly.bq = l.vec(p+"attn_q.bias", qd, true)
		ly.bk = l.vec(p+"attn_k.bias", kvd, true)
		ly.bv = l.vec(p+"attn_v.bias", kvd, true)
	}
	if bt.qkNorm {
		ly.qNorm = l.vec(p+"attn_q_norm.weight", c.headDim, false)
		ly.kNorm = l.vec(p+"attn_k_norm.weight", c.headDim, false)
	}
	if bt.postNorms {
		ly.postAttn = l.vec(p+"post_attention_norm.weight", c.dim, false)
		ly.postFFN = l.vec(p+"post_ffw_norm.weight", c.dim, false)
	}
	if c.sliding(i) {
		ly.window = c.window
		if c.localRope {
			ly.rope = 1
		}
	}
	return ly
}

// tensorLoader wraps a file's tensors, keeping the first error.
type tensorLoader struct {
	f   *gguf.File
	err error
}

// mat wraps a rows × cols matrix.
func (l *tensorLoader) mat(name string, rows, cols int) matrix {
	if l.err != nil {
		return matrix{}
	}
	m, err := ggufMatrix(l.f, name, rows, cols)
	l.err = err
	return m
}

// vec decodes a vector of n values; an absent optional one is nil.
func (l *tensorLoader) vec(name string, n int, optional bool) []float32 {
	if l.err != nil {
		return nil
	}
	if _, ok := l.f.Tensor(name); !ok {
		if !optional {
			l.err = fmt.Errorf("cpu: GGUF lacks tensor %s", name)
		}
		return nil
	}
	m, err := ggufMatrix(l.f, name, 1, n)
	if err != nil {
		l.err = err
		return nil
	}
	return m.row(0, make([]float32, n))
}

// factors decodes an optional rotary factor tensor.
func (l *tensorLoader) factors(name string, n int) []float32 { return l.vec(name, n, true) }

// rowRange returns rows [r0, r1) of m.
func (m matrix) rowRange(r0, r1 int) matrix {
	m.data = m.data[r0*m.rowBytes : r1*m.rowBytes]
	m.rows = r1 - r0
	return m
}

// ggufMatrix checks a tensor's shape and type and wraps its data.
func ggufMatrix(f *gguf.File, name string, rows, cols int) (matrix, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return matrix{}, fmt.Errorf("cpu: GGUF lacks tensor %s", name)
	}
	n := uint64(1)
	for _, d := range t.Dims[1:] {
		n *= d
	}
	if t.Dims[0] != uint64(cols) || n != uint64(rows) {
		return matrix{}, fmt.Errorf("cpu: tensor %s has shape %v, want [%d %d]", name, t.Dims, cols, rows)
	}
	data, err := f.TensorData(t)
	if err != nil {
		return matrix{}, fmt.Errorf("cpu: %w", err)
	}
	rb := t.Type.RowBytes(cols)
	if rb == 0 || len(data) < rows*rb {
		return matrix{}, fmt.Errorf("cpu: tensor %s of type %s: %w", name, t.Type, gguf.ErrUnsupported)
	}
	return matrix{typ: t.Type, rows: rows, cols: cols, data: data[:rows*rb], rowBytes: rb}, nil
}
