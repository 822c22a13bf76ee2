package kernels

import "math"

// SwiGLUFunc writes silu(g[i])·u[i] = g[i]/(1+e^−g[i])·u[i] into g[i] for
// i < len(g), with e^x computed as expf does and every operation rounded
// to float32 in the order written.
type SwiGLUFunc func(g, u []float32)

// SwiGLU returns the set's SwiGLU kernel.
func (s *Set) SwiGLU() SwiGLUFunc { return swigluFast(s.level.base()) }

// swigluRef is the reference SwiGLUFunc.
func swigluRef(g, u []float32) {
	u = u[:len(g)]
	for i, v := range g {
		g[i] = v / (1 + expf(-v)) * u[i]
	}
}

// GeGLU returns a SwiGLUFunc-shaped kernel that writes
// gelu(g[i])·u[i] into g[i] instead, with GELU's tanh form
// gelu(x) = x/2·(1+tanh(√(2/π)·(x+0.044715x³))) (Gemma's activation), tanh
// taken as 1−2/(e^2y+1) with expf, in float32.
func (s *Set) GeGLU() SwiGLUFunc { return gegluRef }

// gegluRef is the GeGLU kernel (plain Go at every level).
func gegluRef(g, u []float32) {
	const c = 0.7978845608028654 // √(2/π)
	u = u[:len(g)]
	for i, x := range g {
		y := c * (x + 0.044715*x*x*x)
		t := 1 - 2/(expf(2*y)+1)
		g[i] = 0.5 * x * (1 + t) * u[i]
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
// parts, expPoly for e^r and the exponent bits for 2^n. Results below the
// smallest normal float32 flush to zero.
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

// ExpShiftFunc replaces each x[i] by e^((x[i]-mx)·scale), for x[i] ≤ mx
// and scale > 0: expf's computation for arguments that are never positive
// (attention scores below their maximum), NaN kept, results below the
// smallest normal float32 flushed to zero.
type ExpShiftFunc func(x []float32, mx, scale float32)

// ExpShift returns the set's ExpShiftFunc.
func (s *Set) ExpShift() ExpShiftFunc { return expShiftFast(s.level.base()) }

// expShiftRef is the reference ExpShiftFunc (expf never takes its
// overflow branch here).
func expShiftRef(x []float32, mx, scale float32) {
	for i, v := range x {
		x[i] = expf((v - mx) * scale)
	}
}
