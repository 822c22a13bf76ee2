package kernels

import (
	"golang.org/x/sys/cpu"

	"github.com/tokenrouter/tokenrouter/gguf"
)

//go:generate env GOOS= GOARCH= go run ./internal/arm64gen

// fastTiles returns the NEON tiles of level l (none for the x86 levels,
// nor for NEONDot on a CPU without the dot-product extension, where the
// set keeps NEON's).
func fastTiles(l Level) map[gguf.TensorType]*tiler {
	switch {
	case l == NEON:
		return tilesNEON()
	case l == NEONDot && cpu.ARM64.HasASIMDDP:
		return tilesNEONDot()
	}
	return nil
}

// kquantFast returns the NEON kernel of K-quant type t written for level
// l, or nil if there is none.
func kquantFast(t gguf.TensorType, l Level) MulFunc {
	switch t {
	case gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
	default:
		return nil
	}
	switch {
	case l == NEON:
		return kqNEONMul(t, false)
	case l == NEONDot && cpu.ARM64.HasASIMDDP:
		return kqNEONMul(t, true)
	}
	return nil
}

// kqNEONRowChunk is the most rows one assembly call takes, so that it
// stays short (the runtime cannot preempt it) and the chunk's weight rows
// stay in the cache while the column groups pass them.
const kqNEONRowChunk = 64

// kqNEONMul wraps the assembly of type t (the dot-product variant if dot)
// as a MulFunc: it checks the arguments (the assembly reads and writes
// through raw pointers), then goes through the rows in chunks and, in
// each, through groups of up to kqNEONCols columns. Each output is
// computed alone, in super-block order, whatever its chunk and group.
func kqNEONMul(t gguf.TensorType, dot bool) MulFunc {
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		if rows <= 0 || cols <= 0 {
			return
		}
		if n == 0 {
			for c := range cols {
				clear(out[c*outStride : c*outStride+rows])
			}
			return
		}
		kqCheck(t, n, len(w), wStride, rows, len(a), aStride, cols, len(out), outStride)
		for r0 := 0; r0 < rows; r0 += kqNEONRowChunk {
			nr := min(kqNEONRowChunk, rows-r0)
			for c0 := 0; c0 < cols; c0 += kqNEONCols {
				if !kqNEONRun(t, dot, min(kqNEONCols, cols-c0), &w[r0*wStride], wStride, nr, n/256,
					&a[c0*aStride], aStride, &out[c0*outStride+r0], outStride) {
					panic("kernels: no NEON kernel for " + t.String())
				}
			}
		}
	}
}

// quantizeQ8KFast reports that there is no assembly quantisation here.
func quantizeQ8KFast([]byte, []float32) bool { return false }
