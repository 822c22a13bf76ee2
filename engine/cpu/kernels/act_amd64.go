package kernels

//go:noescape
func swigluAVX512(x, u *float32, n int)

//go:noescape
func swigluAVX2(x, u *float32, n int)

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
