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

//go:noescape
func gDotQ8_0n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_0n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_0n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_0n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_1n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_1n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ4_1n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_0n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_0n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_0n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_1n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_1n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ5_1n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0x1ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0x2ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0x4ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0n1ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0n2ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

//go:noescape
func gDotQ8_0n4ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)

// dotCall runs the fused kernel of the type for cols (1 to 4) columns on
// tiles tiles of 16 rows, over ActQ8G records or, with narrow, over
// NarrowQ8G's.
func (k gKernel) dotCall(w *byte, wStride, tiles, nb int, act *byte, out *float32, outStride, cols int, narrow bool) {
	c := 4
	if cols <= 2 {
		c = cols
	}
	if k.noGather && k.t == gguf.Q8_0 {
		k.dotCallNoGather(w, wStride, tiles, nb, act, out, outStride, cols, c, narrow)
		return
	}
	if narrow {
		k.dotCallNarrow(w, wStride, tiles, nb, act, out, outStride, cols, c)
		return
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

// dotCallNarrow is dotCall over NarrowQ8G's records, c the kernel's column
// count (1, 2 or 4).
func (k gKernel) dotCallNarrow(w *byte, wStride, tiles, nb int, act *byte, out *float32, outStride, cols, c int) {
	switch [2]int{int(k.t), c} {
	case [2]int{int(gguf.Q8_0), 1}:
		gDotQ8_0n1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q8_0), 2}:
		gDotQ8_0n2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q8_0), 4}:
		gDotQ8_0n4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_0), 1}:
		gDotQ4_0n1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_0), 2}:
		gDotQ4_0n2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_0), 4}:
		gDotQ4_0n4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_1), 1}:
		gDotQ4_1n1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_1), 2}:
		gDotQ4_1n2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q4_1), 4}:
		gDotQ4_1n4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_0), 1}:
		gDotQ5_0n1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_0), 2}:
		gDotQ5_0n2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_0), 4}:
		gDotQ5_0n4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_1), 1}:
		gDotQ5_1n1(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_1), 2}:
		gDotQ5_1n2(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case [2]int{int(gguf.Q5_1), 4}:
		gDotQ5_1n4(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	}
}

// dotCallNoGather is dotCall for Q8_0 with the kernels that load the block
// scales without a gather, c the kernel's column count (1, 2 or 4).
func (k gKernel) dotCallNoGather(w *byte, wStride, tiles, nb int, act *byte, out *float32, outStride, cols, c int, narrow bool) {
	switch {
	case narrow && c == 1:
		gDotQ8_0n1ng(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case narrow && c == 2:
		gDotQ8_0n2ng(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case narrow:
		gDotQ8_0n4ng(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case c == 1:
		gDotQ8_0x1ng(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	case c == 2:
		gDotQ8_0x2ng(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	default:
		gDotQ8_0x4ng(w, wStride, tiles, nb, act, k.shift, out, outStride, cols)
	}
}
