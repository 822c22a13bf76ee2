package routertrain

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// network is a router being trained: a batch of feature rows in, one
// logit per row out (the logit of "the large model would write another
// token here").
type network interface {
	// width is the number of features a row holds.
	width() int
	// forward computes n logits; r draws the dropout masks while
	// training, nil evaluates. The result is owned by the network.
	forward(x []float64, n int, r *rand.Rand) []float64
	// backward takes the loss gradient of the last forward pass's logits
	// and accumulates the parameter gradients.
	backward(dz []float64, n int)
	// params lists the trainable tensors, in the file's names.
	params() []*param
}

// block is one R2R backbone block: dim_change(x) + mlp(layer_norm(x)),
// mlp = Linear, GELU, Dropout, Linear, Dropout; dim_change is the
// identity when the widths agree.
type block struct {
	din, dout    int
	ln           *layerNorm
	fc1, fc2     *linear // mlp.0 and mlp.3
	act          gelu
	drop1, drop2 dropout
	dim          *linear // nil: identity
	y, dx        []float64
}

func newBlock(name string, din, dout, expansion int, p float64) *block {
	b := &block{din: din, dout: dout, ln: newLayerNorm(name+".layer_norm", din),
		fc1: newLinear(name+".mlp.0", din, din*expansion), fc2: newLinear(name+".mlp.3", din*expansion, dout),
		drop1: dropout{p: p}, drop2: dropout{p: p}}
	if din != dout {
		b.dim = newLinear(name+".dim_change", din, dout)
	}
	return b
}

func (b *block) params() []*param {
	ps := append(b.ln.params(), b.fc1.params()...)
	ps = append(ps, b.fc2.params()...)
	if b.dim != nil {
		ps = append(ps, b.dim.params()...)
	}
	return ps
}

func (b *block) forward(x []float64, n int, r *rand.Rand) []float64 {
	u := b.fc1.forward(b.ln.forward(x, n), n)
	v := b.fc2.forward(b.drop1.forward(b.act.forward(u), r), n)
	v = b.drop2.forward(v, r)
	res := x
	if b.dim != nil {
		res = b.dim.forward(x, n)
	}
	b.y = grow(b.y, n*b.dout)
	for i := range b.y {
		b.y[i] = res[i] + v[i]
	}
	return b.y
}

func (b *block) backward(dy []float64, n int) []float64 {
	d := b.fc2.backward(b.drop2.backward(dy), n, true)
	d = b.fc1.backward(b.act.backward(b.drop1.backward(d)), n, true)
	d = b.ln.backward(d, n)
	res := dy
	if b.dim != nil {
		res = b.dim.backward(dy, n, true)
	}
	b.dx = grow(b.dx, n*b.din)
	for i := range b.dx {
		b.dx[i] = d[i] + res[i]
	}
	return b.dx
}

// r2rNet is R2R's HiddenStatesTokenLMHeadLogitsClassifier over feature
// rows [h ‖ e ‖ topk] of widths H, E and K: logits_projection (K → H) of
// the top logits, combined_projection of [h ‖ e ‖ projected], the
// backbone (input_projection, blocks, LayerNorm, one output). With norm
// (normalize_input), h and e pass a LayerNorm each and the top logits a
// softmax first. Top logits of −∞ are pads: 0, or outside the softmax.
type r2rNet struct {
	H, E, K   int
	dims      []int
	expansion int
	dropout   float64
	norm      bool

	lnH, lnT   *layerNorm
	sm         softmaxRows
	proj, comb *linear
	inp        *linear
	blocks     []*block
	outLN      *layerNorm
	out        *linear

	h, e, k, cat, dp, dh, de []float64
}

// newR2RNet builds the network with R2R's initialisation: PyTorch's
// default uniform for the two input projections, He-normal weights and
// zero biases in the backbone, unit LayerNorms.
func newR2RNet(H, E, K int, dims []int, expansion int, p float64, norm bool, r *rand.Rand) (*r2rNet, error) {
	if H <= 0 || E < 0 || K <= 0 || len(dims) == 0 || expansion <= 0 {
		return nil, fmt.Errorf("r2r network: hidden %d, embedding %d, top-k %d, dims %v, expansion %d", H, E, K, dims, expansion)
	}
	if norm && E != H {
		return nil, fmt.Errorf("r2r network: normalize_input needs the embedding width %d to equal the hidden width %d", E, H)
	}
	for _, d := range dims {
		if d <= 0 {
			return nil, fmt.Errorf("r2r network: hidden dims %v must be positive", dims)
		}
	}
	n := &r2rNet{H: H, E: E, K: K, dims: dims, expansion: expansion, dropout: p, norm: norm, sm: softmaxRows{d: K},
		proj: newLinear("logits_projection", K, H), comb: newLinear("combined_projection", 2*H+E, dims[0]),
		inp: newLinear("backbone.input_projection", dims[0], dims[0]), outLN: newLayerNorm("backbone.output_layer.0", dims[len(dims)-1]),
		out: newLinear("backbone.output_layer.1", dims[len(dims)-1], 1)}
	if norm {
		n.lnH, n.lnT = newLayerNorm("layer_norm_hidden_states", H), newLayerNorm("layer_norm_token", H)
	}
	n.proj.initUniform(r)
	n.comb.initUniform(r)
	n.inp.initKaiming(r)
	bd := append(append([]int(nil), dims...), dims[len(dims)-1])
	for i := range dims {
		b := newBlock(fmt.Sprintf("backbone.blocks.%d", i), bd[i], bd[i+1], expansion, p)
		b.fc1.initKaiming(r)
		b.fc2.initKaiming(r)
		if b.dim != nil {
			b.dim.initKaiming(r)
		}
		n.blocks = append(n.blocks, b)
	}
	n.out.initKaiming(r)
	return n, nil
}

func (n *r2rNet) width() int { return n.H + n.E + n.K }

func (n *r2rNet) params() []*param {
	var ps []*param
	if n.norm {
		ps = append(n.lnH.params(), n.lnT.params()...)
	}
	ps = append(ps, n.proj.params()...)
	ps = append(ps, n.comb.params()...)
	ps = append(ps, n.inp.params()...)
	for _, b := range n.blocks {
		ps = append(ps, b.params()...)
	}
	ps = append(ps, n.outLN.params()...)
	return append(ps, n.out.params()...)
}

// columns copies columns [from, from+w) of the rows of width W into dst.
func columns(dst, x []float64, rows, W, from, w int) []float64 {
	dst = grow(dst, rows*w)
	for r := range rows {
		copy(dst[r*w:(r+1)*w], x[r*W+from:r*W+from+w])
	}
	return dst
}

func (n *r2rNet) forward(x []float64, rows int, r *rand.Rand) []float64 {
	H, E, K, W := n.H, n.E, n.K, n.width()
	n.h, n.e, n.k = columns(n.h, x, rows, W, 0, H), columns(n.e, x, rows, W, H, E), columns(n.k, x, rows, W, H+E, K)
	h, e, k := n.h, n.e, n.k
	if n.norm {
		h, e, k = n.lnH.forward(h, rows), n.lnT.forward(e, rows), n.sm.forward(k, rows)
	} else {
		for i, v := range k {
			if math.IsInf(v, -1) { // a pad (see TopK)
				k[i] = 0
			}
		}
	}
	p := n.proj.forward(k, rows)
	C := 2*H + E
	n.cat = grow(n.cat, rows*C)
	for i := range rows {
		copy(n.cat[i*C:], h[i*H:(i+1)*H])
		copy(n.cat[i*C+H:], e[i*E:(i+1)*E])
		copy(n.cat[i*C+H+E:], p[i*H:(i+1)*H])
	}
	z := n.inp.forward(n.comb.forward(n.cat, rows), rows)
	for _, b := range n.blocks {
		z = b.forward(z, rows, r)
	}
	return n.out.forward(n.outLN.forward(z, rows), rows)
}

func (n *r2rNet) backward(dz []float64, rows int) {
	d := n.outLN.backward(n.out.backward(dz, rows, true), rows)
	for i := len(n.blocks) - 1; i >= 0; i-- {
		d = n.blocks[i].backward(d, rows)
	}
	dcat := n.comb.backward(n.inp.backward(d, rows, true), rows, true)
	H, E, C := n.H, n.E, 2*n.H+n.E
	n.dp = columns(n.dp, dcat, rows, C, H+E, H)
	n.proj.backward(n.dp, rows, false) // softmax and the raw logits have no parameters
	if n.norm {
		n.dh, n.de = columns(n.dh, dcat, rows, C, 0, H), columns(n.de, dcat, rows, C, H, E)
		n.lnH.backward(n.dh, rows)
		n.lnT.backward(n.de, rows)
	}
}

// mlpNet is a chain of linear layers with ReLU between them, on the
// hidden state alone: CITER's router (mlp.0 ... mlp.N) or, with one
// layer, Co-LLM's deferral head (defer).
type mlpNet struct {
	in     int
	layers []*linear
	acts   []relu
}

// newMLPNet builds layers in → dims... → 1 named prefix.0, prefix.1, ...,
// or prefix alone for a single layer, PyTorch's default initialisation.
func newMLPNet(prefix string, in int, dims []int, r *rand.Rand) (*mlpNet, error) {
	if in <= 0 {
		return nil, fmt.Errorf("%s network: hidden width %d", prefix, in)
	}
	n := &mlpNet{in: in}
	w := append(append([]int{in}, dims...), 1)
	for i := range len(w) - 1 {
		if w[i+1] <= 0 {
			return nil, fmt.Errorf("%s network: hidden dims %v must be positive", prefix, dims)
		}
		name := fmt.Sprintf("%s.%d", prefix, i)
		if len(w) == 2 {
			name = prefix
		}
		l := newLinear(name, w[i], w[i+1])
		l.initUniform(r)
		n.layers = append(n.layers, l)
	}
	n.acts = make([]relu, len(n.layers)-1)
	return n, nil
}

func (n *mlpNet) width() int { return n.in }

func (n *mlpNet) params() []*param {
	var ps []*param
	for _, l := range n.layers {
		ps = append(ps, l.params()...)
	}
	return ps
}

func (n *mlpNet) forward(x []float64, rows int, _ *rand.Rand) []float64 {
	for i, l := range n.layers {
		x = l.forward(x, rows)
		if i < len(n.acts) {
			x = n.acts[i].forward(x)
		}
	}
	return x
}

func (n *mlpNet) backward(dz []float64, rows int) {
	d := dz
	for i := len(n.layers) - 1; i >= 0; i-- {
		if i < len(n.acts) {
			d = n.acts[i].backward(d)
		}
		d = n.layers[i].backward(d, rows, i > 0)
	}
}
