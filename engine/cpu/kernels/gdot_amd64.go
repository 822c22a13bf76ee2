package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

//go:noescape
func gDotQ8_0x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_0x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_0x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_0x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_1x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_1x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_1x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_0x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_0x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_0x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_1x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_1x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_1x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

// dotCall runs the fused kernel of the type for cols (1 to 4) columns on
// tiles tiles of 16 rows.
func (k gKernel) dotCall(w *byte, wStride, tiles, nb int, act *byte, out *float32, outStride, cols int) {
	c := 4
	if cols <= 2 {
		c = cols
	}
	switch [2]int{int(k.t), c} {
	case [2]int{int(gguf.Q8_0), 1}:
		gDotQ8_0x1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q8_0), 2}:
		gDotQ8_0x2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q8_0), 4}:
		gDotQ8_0x4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_0), 1}:
		gDotQ4_0x1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_0), 2}:
		gDotQ4_0x2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_0), 4}:
		gDotQ4_0x4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_1), 1}:
		gDotQ4_1x1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_1), 2}:
		gDotQ4_1x2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_1), 4}:
		gDotQ4_1x4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_0), 1}:
		gDotQ5_0x1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_0), 2}:
		gDotQ5_0x2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_0), 4}:
		gDotQ5_0x4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_1), 1}:
		gDotQ5_1x1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_1), 2}:
		gDotQ5_1x2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_1), 4}:
		gDotQ5_1x4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	}
}
