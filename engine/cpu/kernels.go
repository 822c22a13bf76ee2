package cpu

import "math"

// The fast kernels below unroll and keep several independent accumulators,
// so the CPU overlaps the floating-point additions; kernels_ref.go has the
// plain versions they are tested against.

// dot returns the inner product of a and b[:len(a)].
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s0 += aa[0]*bb[0] + aa[4]*bb[4]
		s1 += aa[1]*bb[1] + aa[5]*bb[5]
		s2 += aa[2]*bb[2] + aa[6]*bb[6]
		s3 += aa[3]*bb[3] + aa[7]*bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4 returns the inner products of w with x0..x3 (each at least len(w)),
// reading w once.
func dot4(w, x0, x1, x2, x3 []float32) (float32, float32, float32, float32) {
	n := len(w)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	var a0, a1, a2, a3, b0, b1, b2, b3 float32
	i := 0
	for ; i+2 <= n; i += 2 {
		w0, w1 := w[i], w[i+1]
		a0 += w0 * x0[i]
		a1 += w0 * x1[i]
		a2 += w0 * x2[i]
		a3 += w0 * x3[i]
		b0 += w1 * x0[i+1]
		b1 += w1 * x1[i+1]
		b2 += w1 * x2[i+1]
		b3 += w1 * x3[i+1]
	}
	for ; i < n; i++ {
		w0 := w[i]
		a0 += w0 * x0[i]
		a1 += w0 * x1[i]
		a2 += w0 * x2[i]
		a3 += w0 * x3[i]
	}
	return a0 + b0, a1 + b1, a2 + b2, a3 + b3
}

// dot2 returns the inner product of w and x summed in exactly the order
// dot4 uses, so a matmul output does not depend on which kernel computed it
// (results are identical whatever the batch composition or thread count).
func dot2(w, x []float32) float32 {
	n := len(w)
	x = x[:n]
	var a, b float32
	i := 0
	for ; i+2 <= n; i += 2 {
		a += w[i] * x[i]
		b += w[i+1] * x[i+1]
	}
	for ; i < n; i++ {
		a += w[i] * x[i]
	}
	return a + b
}

// dotRows4 returns the inner products of x with w0..w3, reading x once.
func dotRows4(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
	return dot4(x, w0, w1, w2, w3)
}

// matmulRows computes out[t*outStride+r] = dot(W[r], in[t*cols:]) for rows
// r in [lo, hi) and all T input rows. buf (len ≥ 4*cols) receives
// dequantised weight rows.
func matmulRows(m *matrix, in []float32, T int, out []float32, outStride, lo, hi int, buf []float32) {
	cols := m.cols
	if T == 1 && m.typ.BlockSize() == 1 && m.f32 != nil {
		x := in[:cols]
		r := lo
		for ; r+4 <= hi; r += 4 {
			w := m.f32[r*cols : (r+4)*cols]
			o0, o1, o2, o3 := dotRows4(x, w[:cols], w[cols:2*cols], w[2*cols:3*cols], w[3*cols:])
			out[r], out[r+1], out[r+2], out[r+3] = o0, o1, o2, o3
		}
		for ; r < hi; r++ {
			out[r] = dot2(m.f32[r*cols:(r+1)*cols], x)
		}
		return
	}
	for r := lo; r < hi; r++ {
		w := m.row(r, buf)
		t := 0
		for ; t+4 <= T; t += 4 {
			o0, o1, o2, o3 := dot4(w, in[t*cols:], in[(t+1)*cols:], in[(t+2)*cols:], in[(t+3)*cols:])
			out[t*outStride+r] = o0
			out[(t+1)*outStride+r] = o1
			out[(t+2)*outStride+r] = o2
			out[(t+3)*outStride+r] = o3
		}
		for ; t < T; t++ {
			out[t*outStride+r] = dot2(w, in[t*cols:(t+1)*cols])
		}
	}
}

// rmsnorm writes x normalised by its root mean square and scaled by w.
func rmsnorm(out, x, w []float32, eps float32) {
	x = x[:len(w)]
	out = out[:len(w)]
	ss := dot(x, x)
	scale := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// softmax normalises x in place.
func softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}

// axpy adds a*x to y.
func axpy(a float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xx := x[i : i+4 : i+4]
		yy := y[i : i+4 : i+4]
		yy[0] += a * xx[0]
		yy[1] += a * xx[1]
		yy[2] += a * xx[2]
		yy[3] += a * xx[3]
	}
	for ; i < len(x); i++ {
		y[i] += a * x[i]
	}
}

// swiglu writes silu(g)*u into g.
func swiglu(g, u []float32) {
	u = u[:len(g)]
	for i, v := range g {
		g[i] = v / (1 + float32(math.Exp(float64(-v)))) * u[i]
	}
}
