package cpu

import "math"

// The fast kernels below unroll and keep several independent accumulators,
// so the CPU overlaps the floating-point additions; kernels_test.go has the
// plain versions they are tested against (TestKernelsAgainstReference and
// FuzzKernels). The attention kernels are in package kernels.

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

// rmsnorm writes x normalised by its root mean square and scaled by w.
func rmsnorm(out, x, w []float32, eps float32) {
	rmsnormCols(out, x, w, eps, 0, len(w))
}

// rmsnormCols is rmsnorm writing only out[c0:c1]: the scale still comes
// from the whole row, so parts of a row normalised apart equal the row
// normalised at once.
func rmsnormCols(out, x, w []float32, eps float32, c0, c1 int) {
	x = x[:len(w)]
	ss := dot(x, x)
	scale := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	out, x, w = out[c0:c1], x[c0:c1], w[c0:c1]
	for i, v := range x {
		out[i] = v * scale * w[i]
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
