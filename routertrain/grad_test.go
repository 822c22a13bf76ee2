package routertrain

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The gradient checks compare every backward pass with central
// differences of its forward pass, in float64: for a layer, of the loss
// L = Σ c·y with fixed random c (so dL/dy = c); for a whole network, of
// the weighted binary cross-entropy on random labels. Dropout masks are
// drawn from a generator reseeded before every forward pass, so that the
// differences see the same mask as the backward pass.

const fdStep = 1e-5

func randVec(r *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64() * scale
	}
	return v
}

// checkGrad compares g, the analytic gradient of f with respect to w,
// with central differences (every entry, or every stride-th of a long
// vector).
func checkGrad(t *testing.T, name string, f func() float64, w, g []float64) {
	t.Helper()
	stride := max(1, len(w)/60)
	bad := 0
	for i := 0; i < len(w); i += stride {
		orig := w[i]
		w[i] = orig + fdStep
		lp := f()
		w[i] = orig - fdStep
		lm := f()
		w[i] = orig
		num := (lp - lm) / (2 * fdStep)
		if d := math.Abs(num - g[i]); d > 1e-6+1e-5*math.Abs(num) {
			if bad++; bad <= 3 {
				t.Errorf("%s[%d]: backward %.9g, central difference %.9g", name, i, g[i], num)
			}
		}
	}
	f() // leave the layers' buffers as the unperturbed forward pass left them
}

// dot is Σ c·y.
func dot(c, y []float64) float64 {
	var s float64
	for i := range c {
		s += c[i] * y[i]
	}
	return s
}

// checkLayer checks the input gradient and every parameter gradient of a
// layer: fwd computes its output from x, bwd returns dx given dy (and
// accumulates the parameter gradients into params, zeroed first).
func checkLayer(t *testing.T, name string, x []float64, outLen int, fwd func() []float64, bwd func(dy []float64) []float64, params []*param) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	c := randVec(r, outLen, 1)
	loss := func() float64 { return dot(c, fwd()) }
	loss()
	for _, p := range params {
		clear(p.g)
	}
	dx := append([]float64(nil), bwd(c)...)
	checkGrad(t, name+" input", loss, x, dx)
	for _, p := range params {
		checkGrad(t, name+" "+p.name, loss, p.w, p.g)
	}
}

func TestGradLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	l := newLinear("l", 5, 4)
	l.initUniform(r)
	x := randVec(r, 3*5, 1)
	checkLayer(t, "linear", x, 3*4, func() []float64 { return l.forward(x, 3) },
		func(dy []float64) []float64 { return l.backward(dy, 3, true) }, l.params())
}

func TestGradLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	l := newLayerNorm("ln", 6)
	l.w.w, l.b.w = randVec(r, 6, 1), randVec(r, 6, 1)
	x := randVec(r, 3*6, 2)
	checkLayer(t, "layernorm", x, 3*6, func() []float64 { return l.forward(x, 3) },
		func(dy []float64) []float64 { return l.backward(dy, 3) }, l.params())
}

func TestGradActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 3))
	x := randVec(r, 20, 2)
	for i := range x { // keep ReLU's inputs away from its kink
		if math.Abs(x[i]) < 0.05 {
			x[i] += 0.1
		}
	}
	var g gelu
	checkLayer(t, "gelu", x, len(x), func() []float64 { return g.forward(x) }, g.backward, nil)
	var f relu
	checkLayer(t, "relu", x, len(x), func() []float64 { return f.forward(x) }, f.backward, nil)
	s := softmaxRows{d: 5}
	checkLayer(t, "softmax", x, len(x), func() []float64 { return s.forward(x, 4) },
		func(dy []float64) []float64 { return s.backward(dy, 4) }, nil)
	// Pads (−∞) stay 0 and out of the normalisation; a row of pads is 0.
	inf := math.Inf(-1)
	xp := []float64{1, -0.5, 0.3, inf, inf, inf, inf, inf}
	sp := softmaxRows{d: 4}
	y := sp.forward(xp, 2)
	if math.Abs(y[0]+y[1]+y[2]-1) > 1e-12 || y[3] != 0 || y[4] != 0 || y[7] != 0 {
		t.Fatalf("softmax with pads: %v", y)
	}
	checkLayer(t, "softmax with pads", xp, len(xp), func() []float64 { return sp.forward(xp, 2) },
		func(dy []float64) []float64 { return sp.backward(dy, 2) }, nil)
	d := dropout{p: 0.4}
	checkLayer(t, "dropout", x, len(x), func() []float64 { return d.forward(x, rand.New(rand.NewPCG(9, 9))) }, d.backward, nil)
	zeros := 0
	for _, m := range d.mask {
		if m == 0 {
			zeros++
		} else if math.Abs(m-1/0.6) > 1e-12 {
			t.Fatalf("dropout keeps with scale %v, want 1/(1-p)", m)
		}
	}
	if zeros == 0 || zeros == len(d.mask) {
		t.Fatalf("dropout p=0.4 zeroed %d of %d", zeros, len(d.mask))
	}
	if y := d.forward(x, nil); &y[0] != &x[0] {
		t.Fatal("dropout outside training must be the identity")
	}
}

func TestGradBlock(t *testing.T) {
	for _, dims := range [][2]int{{4, 6}, {5, 5}} {
		r := rand.New(rand.NewPCG(1, 4))
		b := newBlock("b", dims[0], dims[1], 2, 0.3)
		for _, l := range []*linear{b.fc1, b.fc2, b.dim} {
			if l != nil {
				l.initKaiming(r)
				l.b.w = randVec(r, len(l.b.w), 0.1)
			}
		}
		x := randVec(r, 3*dims[0], 1)
		checkLayer(t, "block", x, 3*dims[1], func() []float64 { return b.forward(x, 3, rand.New(rand.NewPCG(5, 5))) },
			func(dy []float64) []float64 { return b.backward(dy, 3) }, b.params())
	}
}

// checkNet checks every parameter gradient of a network under the
// weighted binary cross-entropy of n random rows.
func checkNet(t *testing.T, name string, net network, n int, dropoutSeed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 3))
	x := randVec(r, n*net.width(), 1)
	y := make([]uint8, n)
	wt := make([]float64, n) // per-row weights of the positives (--weight gap)
	for i := range y {
		y[i] = uint8(i % 2)
		wt[i] = 0.25 + r.Float64()*3
	}
	rng := func() *rand.Rand {
		if dropoutSeed == 0 {
			return nil
		}
		return rand.New(rand.NewPCG(dropoutSeed, 1))
	}
	dz := make([]float64, n)
	loss := func() float64 { return bce(net.forward(x, n, rng()), y, 2.5, wt, nil) }
	bce(net.forward(x, n, rng()), y, 2.5, wt, dz)
	ps := net.params()
	for _, p := range ps {
		clear(p.g)
	}
	net.backward(dz, n)
	for _, p := range ps {
		checkGrad(t, name+" "+p.name, loss, p.w, p.g)
	}
}

func TestGradR2RNet(t *testing.T) {
	for _, c := range []struct {
		name    string
		norm    bool
		dropout float64
	}{{"plain", false, 0}, {"dropout", false, 0.3}, {"normalize_input", true, 0.2}} {
		r := rand.New(rand.NewPCG(2, 2))
		net, err := newR2RNet(6, 6, 5, []int{8, 10, 8}, 2, c.dropout, c.norm, r)
		if err != nil {
			t.Fatal(err)
		}
		// Non-zero biases and LayerNorm shifts, so that their gradients are
		// checked away from the initial values.
		for _, p := range net.params() {
			if len(p.shape) == 1 {
				for i := range p.w {
					p.w[i] += 0.1 * r.NormFloat64()
				}
			}
		}
		seed := uint64(0)
		if c.dropout > 0 {
			seed = 11
		}
		checkNet(t, "r2r "+c.name, net, 7, seed)
	}
}

func TestGradMLPNets(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	citer, err := newMLPNet("mlp", 6, []int{7, 5}, r)
	if err != nil {
		t.Fatal(err)
	}
	checkNet(t, "citer", citer, 9, 0)
	colm, err := newMLPNet("defer", 6, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	if ps := colm.params(); len(ps) != 2 || ps[0].name != "defer.weight" || ps[1].name != "defer.bias" {
		t.Fatalf("co-llm parameters %v", ps)
	}
	checkNet(t, "co-llm", colm, 9, 0)
}

// TestBCE checks the loss against its definition at a few points.
func TestBCE(t *testing.T) {
	z, y := []float64{0, 2, -3}, []uint8{1, 0, 1}
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	want := (-2*math.Log(sig(0)) - math.Log(1-sig(2)) - 2*math.Log(sig(-3))) / 3
	if got := bce(z, y, 2, nil, nil); math.Abs(got-want) > 1e-12 {
		t.Fatalf("bce = %v, want %v", got, want)
	}
	// No overflow far from zero.
	if got := bce([]float64{800, -800}, []uint8{0, 1}, 1, nil, nil); math.Abs(got-800) > 1e-9 {
		t.Fatalf("bce at ±800 = %v, want 800", got)
	}
}
