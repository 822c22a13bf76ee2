package kernels

//go:noescape
func scoresAVX512(q *float32, hd, heads int, kt *float32, s *float32, sStride int)

//go:noescape
func scoresAVX2(q *float32, hd, heads int, kt *float32, s *float32, sStride int)

//go:noescape
func valuesAVX512(e *float32, m int, v *float32, stride int, out *float32, chunks int)

//go:noescape
func valuesAVX2(e *float32, m int, v *float32, stride int, out *float32, chunks int)

// attnFast returns the attention kernels of level l.
func attnFast(l Level) (ScoresFunc, ValuesFunc) {
	switch l {
	case AVX512:
		return scoresAsm(scoresAVX512), valuesAsm(valuesAVX512, 16)
	case AVX2:
		return scoresAsm(scoresAVX2), valuesAsm(valuesAVX2, 8)
	}
	return scoresRef, valuesRef
}

// scoresAsm wraps an assembly ScoresFunc with the bounds checks its raw
// pointers need.
func scoresAsm(f func(q *float32, hd, heads int, kt *float32, s *float32, sStride int)) ScoresFunc {
	return func(q []float32, hd int, kt []float32, s []float32, sStride int) {
		heads := len(q) / max(hd, 1)
		if heads == 0 || hd <= 0 {
			return
		}
		if len(kt) < hd*KeyBlock || sStride < KeyBlock || len(s) < (heads-1)*sStride+KeyBlock {
			panic("kernels: attention scores: operands shorter than the shape")
		}
		f(&q[0], hd, heads, &kt[0], &s[0], sStride)
	}
}

// valuesAsm wraps an assembly ValuesFunc of lanes lanes; outputs whose
// length is not a multiple of lanes take the reference.
func valuesAsm(f func(e *float32, m int, v *float32, stride int, out *float32, chunks int), lanes int) ValuesFunc {
	return func(e, v []float32, stride int, out []float32) {
		if len(e) == 0 || len(out) == 0 {
			return
		}
		if len(out)%lanes != 0 {
			valuesRef(e, v, stride, out)
			return
		}
		if stride < len(out) || len(v) < (len(e)-1)*stride+len(out) {
			panic("kernels: attention values: operands shorter than the shape")
		}
		f(&e[0], len(e), &v[0], stride, &out[0], len(out)/lanes)
	}
}
