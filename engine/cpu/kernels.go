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
	x = x[:len(w)]
	out = out[:len(w)]
	ss := dot(x, x)
	scale := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// expPoly is the degree-7 Taylor polynomial of e^r for |r| ≤ ln2/2,
// evaluated by Estrin's scheme (a short dependency chain, so the CPU
// overlaps consecutive elements).
func expPoly(r float32) float32 {
	r2 := r * r
	p01 := 1 + r
	p23 := float32(0.5) + float32(1.0/6)*r
	p45 := float32(1.0/24) + float32(1.0/120)*r
	p67 := float32(1.0/720) + float32(1.0/5040)*r
	return (p01 + r2*p23) + (r2*r2)*(p45+r2*p67)
}

// expf returns e^x in float32 with a relative error below 2e-7:
// n = round(x/ln2) by the 1.5·2^23 addition trick, r = x - n·ln2 in two
// parts, expPoly for e^r and the exponent bits for 2^n. Results below the smallest normal float32 flush to zero.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < -87.33:
		return 0
	case x > 88.72283:
		return float32(math.Inf(1))
	}
	t := x*1.442695 + 12582912.0
	ni := int32(math.Float32bits(t)) - 0x4B400000
	n := t - 12582912.0
	r := x - n*0.693145751953125
	r -= n * 1.428606765330187e-06
	q := expPoly(r)
	if ni > 127 {
		return q * 2 * math.Float32frombits(uint32(ni-1+127)<<23)
	}
	return q * math.Float32frombits(uint32(ni+127)<<23)
}

// expShiftSum replaces each x[i] by e^((x[i]-mx)·scale), for x[i] ≤ mx and
// scale > 0, and returns their sum. It is expf's computation inlined for
// arguments that are never positive (attention scores below their maximum).
func expShiftSum(x []float32, mx, scale float32) float32 {
	var sum float32
	for i, v := range x {
		a := (v - mx) * scale
		if !(a >= -87.33) { // also catches NaN
			if a != a {
				x[i] = a
				sum += a
				continue
			}
			x[i] = 0
			continue
		}
		t := a*1.442695 + 12582912.0
		ni := int32(math.Float32bits(t)) - 0x4B400000
		n := t - 12582912.0
		r := a - n*0.693145751953125
		r -= n * 1.428606765330187e-06
		q := expPoly(r)
		e := q * math.Float32frombits(uint32(ni+127)<<23)
		x[i] = e
		sum += e
	}
	return sum
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
		e := expf(v - mx)
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
		g[i] = v / (1 + expf(-v)) * u[i]
	}
}
