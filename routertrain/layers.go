package routertrain

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// The layers below train in float64 on row-major batches: a batch of n
// rows of width d is one []float64 of n·d values. Each layer owns the
// buffers of its output and of its input's gradient, grown to the largest
// batch seen, and keeps what its backward pass needs from the last
// forward pass; backward accumulates the parameter gradients (zeroed by
// the optimiser's step) and returns the input's gradient.

// param is one trainable tensor with its gradient and Adam moments.
type param struct {
	name  string
	shape []int
	w, g  []float64
	m, v  []float64
}

func newParam(name string, shape ...int) *param {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return &param{name: name, shape: shape, w: make([]float64, n), g: make([]float64, n)}
}

// grow returns b with length n, reallocating when its capacity is short.
func grow(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}

// linear is y = x·Wᵀ + b with W of shape [out, in] (PyTorch nn.Linear).
type linear struct {
	in, out int
	w, b    *param
	x       []float64 // the last forward input (not owned)
	y, dx   []float64
	dyT, xT []float64
}

func newLinear(name string, in, out int) *linear {
	return &linear{in: in, out: out, w: newParam(name+".weight", out, in), b: newParam(name+".bias", out)}
}

// initUniform draws weights and biases from U(−1/√in, 1/√in), PyTorch's
// default for nn.Linear.
func (l *linear) initUniform(r *rand.Rand) {
	bound := 1 / math.Sqrt(float64(l.in))
	for i := range l.w.w {
		l.w.w[i] = (2*r.Float64() - 1) * bound
	}
	for i := range l.b.w {
		l.b.w[i] = (2*r.Float64() - 1) * bound
	}
}

// initKaiming draws weights from N(0, 2/in) (He initialisation for fan-in)
// and zeroes the biases.
func (l *linear) initKaiming(r *rand.Rand) {
	std := math.Sqrt(2 / float64(l.in))
	for i := range l.w.w {
		l.w.w[i] = r.NormFloat64() * std
	}
	clear(l.b.w)
}

func (l *linear) params() []*param { return []*param{l.w, l.b} }

func (l *linear) forward(x []float64, n int) []float64 {
	l.x = x
	l.y = grow(l.y, n*l.out)
	for r := range n {
		copy(l.y[r*l.out:(r+1)*l.out], l.b.w)
	}
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, n, l.out, l.in, 1, x, l.in, l.w.w, l.in, 1, l.y, l.out)
	return l.y
}

// backward accumulates dW += dyᵀ·x and db += Σ dy, and returns dx = dy·W
// (nil when wantDX is false: the first layer needs no input gradient).
func (l *linear) backward(dy []float64, n int, wantDX bool) []float64 {
	// dW += dyᵀ·x as (dyᵀ)·(xᵀ)ᵀ: gonum's kernel for that layout (dot
	// products over the batch) is about twice as fast as the transposed-A
	// one, and the transposes cost little next to the product.
	l.dyT, l.xT = transpose(l.dyT, dy, n, l.out), transpose(l.xT, l.x, n, l.in)
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, l.out, l.in, n, 1, l.dyT, n, l.xT, n, 1, l.w.g, l.in)
	for r := range n {
		for o, v := range dy[r*l.out : (r+1)*l.out] {
			l.b.g[o] += v
		}
	}
	if !wantDX {
		return nil
	}
	l.dx = grow(l.dx, n*l.in)
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, n, l.in, l.out, 1, dy, l.out, l.w.w, l.in, 0, l.dx, l.in)
	return l.dx
}

// transpose writes the rows×cols matrix a transposed (cols×rows) into dst.
func transpose(dst, a []float64, rows, cols int) []float64 {
	dst = grow(dst, rows*cols)
	for r := range rows {
		for c, v := range a[r*cols : (r+1)*cols] {
			dst[c*rows+r] = v
		}
	}
	return dst
}

// layerNorm normalises each row to zero mean and unit variance (biased,
// eps 1e-5 as PyTorch), then scales and shifts per feature.
type layerNorm struct {
	d       int
	w, b    *param
	xhat, y []float64
	inv, dx []float64
	eps     float64
}

func newLayerNorm(name string, d int) *layerNorm {
	l := &layerNorm{d: d, w: newParam(name+".weight", d), b: newParam(name+".bias", d), eps: 1e-5}
	for i := range l.w.w {
		l.w.w[i] = 1
	}
	return l
}

func (l *layerNorm) params() []*param { return []*param{l.w, l.b} }

func (l *layerNorm) forward(x []float64, n int) []float64 {
	d := l.d
	l.xhat, l.y, l.inv = grow(l.xhat, n*d), grow(l.y, n*d), grow(l.inv, n)
	for r := range n {
		xr := x[r*d : (r+1)*d]
		var mean, vr float64
		for _, v := range xr {
			mean += v
		}
		mean /= float64(d)
		for _, v := range xr {
			vr += (v - mean) * (v - mean)
		}
		inv := 1 / math.Sqrt(vr/float64(d)+l.eps)
		l.inv[r] = inv
		xh, yr := l.xhat[r*d:(r+1)*d], l.y[r*d:(r+1)*d]
		for k, v := range xr {
			xh[k] = (v - mean) * inv
			yr[k] = xh[k]*l.w.w[k] + l.b.w[k]
		}
	}
	return l.y
}

func (l *layerNorm) backward(dy []float64, n int) []float64 {
	d := l.d
	l.dx = grow(l.dx, n*d)
	for r := range n {
		dyr, xh, dxr := dy[r*d:(r+1)*d], l.xhat[r*d:(r+1)*d], l.dx[r*d:(r+1)*d]
		var s1, s2 float64 // mean of dx̂ and of dx̂·x̂
		for k, g := range dyr {
			l.w.g[k] += g * xh[k]
			l.b.g[k] += g
			dh := g * l.w.w[k]
			dxr[k] = dh
			s1 += dh
			s2 += dh * xh[k]
		}
		s1 /= float64(d)
		s2 /= float64(d)
		for k := range dxr {
			dxr[k] = l.inv[r] * (dxr[k] - s1 - xh[k]*s2)
		}
	}
	return l.dx
}

// gelu is the exact GELU, x·Φ(x).
type gelu struct{ x, y, dx []float64 }

func (g *gelu) forward(x []float64) []float64 {
	g.x, g.y = x, grow(g.y, len(x))
	for i, v := range x {
		g.y[i] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
	}
	return g.y
}

func (g *gelu) backward(dy []float64) []float64 {
	g.dx = grow(g.dx, len(dy))
	for i, v := range g.x {
		cdf := 0.5 * (1 + math.Erf(v/math.Sqrt2))
		pdf := math.Exp(-0.5*v*v) / math.Sqrt(2*math.Pi)
		g.dx[i] = dy[i] * (cdf + v*pdf)
	}
	return g.dx
}

// relu is max(0, x).
type relu struct{ x, y, dx []float64 }

func (f *relu) forward(x []float64) []float64 {
	f.x, f.y = x, grow(f.y, len(x))
	for i, v := range x {
		f.y[i] = max(v, 0)
	}
	return f.y
}

func (f *relu) backward(dy []float64) []float64 {
	f.dx = grow(f.dx, len(dy))
	for i, v := range f.x {
		if v > 0 {
			f.dx[i] = dy[i]
		} else {
			f.dx[i] = 0
		}
	}
	return f.dx
}

// dropout zeroes each value with probability p while training and scales
// the others by 1/(1−p) (inverted dropout); outside training it is the
// identity. The mask is drawn from the network's seeded generator.
type dropout struct {
	p        float64
	mask     []float64
	y, dx    []float64
	disabled bool // the last forward pass was the identity
}

func (f *dropout) forward(x []float64, r *rand.Rand) []float64 {
	if f.p == 0 || r == nil {
		f.disabled = true
		return x
	}
	f.disabled = false
	f.mask, f.y = grow(f.mask, len(x)), grow(f.y, len(x))
	keep := 1 / (1 - f.p)
	for i, v := range x {
		f.mask[i] = 0
		if r.Float64() >= f.p {
			f.mask[i] = keep
		}
		f.y[i] = v * f.mask[i]
	}
	return f.y
}

func (f *dropout) backward(dy []float64) []float64 {
	if f.disabled {
		return dy
	}
	f.dx = grow(f.dx, len(dy))
	for i, g := range dy {
		f.dx[i] = g * f.mask[i]
	}
	return f.dx
}

// softmaxRows replaces each row of width d by its softmax (the r2r
// network's normalize_input on the top logits); −∞ entries (pads) become
// 0, and a row of pads only stays 0.
type softmaxRows struct {
	d     int
	y, dx []float64
}

func (s *softmaxRows) forward(x []float64, n int) []float64 {
	d := s.d
	s.y = grow(s.y, n*d)
	for r := range n {
		xr, yr := x[r*d:(r+1)*d], s.y[r*d:(r+1)*d]
		m := math.Inf(-1)
		for _, v := range xr {
			m = max(m, v)
		}
		if math.IsInf(m, -1) { // only pads: nothing to normalise
			clear(yr)
			continue
		}
		var sum float64
		for k, v := range xr {
			yr[k] = math.Exp(v - m)
			sum += yr[k]
		}
		for k := range yr {
			yr[k] /= sum
		}
	}
	return s.y
}

func (s *softmaxRows) backward(dy []float64, n int) []float64 {
	d := s.d
	s.dx = grow(s.dx, n*d)
	for r := range n {
		yr, dyr, dxr := s.y[r*d:(r+1)*d], dy[r*d:(r+1)*d], s.dx[r*d:(r+1)*d]
		var dot float64
		for k := range yr {
			dot += yr[k] * dyr[k]
		}
		for k := range yr {
			dxr[k] = yr[k] * (dyr[k] - dot)
		}
	}
	return s.dx
}
