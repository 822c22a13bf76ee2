package kernels

//go:noescape
func swigluAVX512(x, u *float32, n int)

//go:noescape
func swigluAVX2(x, u *float32, n int)

//go:noescape
func expShiftAVX512(x *float32, n int, mx, scale float32)

// expShiftFast returns the ExpShiftFunc of level l: the body in AVX-512
// assembly (whole vectors), the rest in Go.
func expShiftFast(l Level) ExpShiftFunc {
	if l != AVX512 {
		return expShiftRef
	}
	return func(x []float32, mx, scale float32) {
		body := len(x) &^ 15
		if body > 0 {
			expShiftAVX512(&x[0], body, mx, scale)
		}
		expShiftRef(x[body:], mx, scale)
	}
}

// swigluFast returns the SwiGLU kernel of level l: the body in assembly
// (whole vectors), the tail in Go.
func swigluFast(l Level) SwiGLUFunc {
	var f func(g, u *float32, n int)
	lanes := 16
	switch l {
	case AVX512:
		f = swigluAVX512
	case AVX2:
		f, lanes = swigluAVX2, 8
	default:
		return swigluRef
	}
	return func(g, u []float32) {
		u = u[:len(g)]
		body := len(g) - len(g)%lanes
		if body > 0 {
			f(&g[0], &u[0], body)
		}
		swigluRef(g[body:], u[body:])
	}
}
