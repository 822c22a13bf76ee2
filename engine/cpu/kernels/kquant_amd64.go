package kernels

import (
	"golang.org/x/sys/cpu"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// The K-quant assembly kernels multiply rows weight rows
// against cols activation rows (cols ≤ kqMaxCols), with kqScratch bytes of
// scratch. The AVX-512 kernels come in three forms that compute the same
// bits: one keeps the columns' accumulators in scratch (any number of
// columns); suffix R keeps them in registers (1 to kqRegCols columns),
// which is faster for few columns; suffix P takes rows in pairs (an even
// number) and loads each column's values once for both rows.
// (kqForms.run calls them).

//go:noescape
func kqQ2KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ3KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ4KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ5KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ6KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ2KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ3KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ4KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ5KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ6KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ2KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ3KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ4KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ5KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ6KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ2KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ3KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ4KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ5KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

//go:noescape
func kqQ6KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

const (
	// kqMaxCols is the most columns one assembly call takes.
	kqMaxCols = 64
	// kqColBytes caps the activation bytes one call works on, so that they
	// stay in the core's L2 cache while every row streams past them.
	kqColBytes = 256 << 10
	// kqRowChunk is the most rows one assembly call takes (even, for the
	// pair form).
	kqRowChunk = 64
	// kqRegCols is the most columns the register form takes, kqMemCols the
	// fewest the scratch form is given when there is a register form.
	kqRegCols, kqMemCols = 4, 8
	// kqScratch is the scratch size: 1024 bytes for a decoded super-block
	// and d, dm, then up to 128 accumulator bytes per column.
	kqScratch = 1024 + 128*kqMaxCols
)

// kquantFast returns the assembly kernel of type t written for level l, or
// nil if there is none. The AVX-512 kernels also need VBMI and GFNI.
func kquantFast(t gguf.TensorType, l Level) MulFunc {
	switch t {
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
	default:
		return nil
	}
	switch l {
	case AVX2:
		return kqDriver(t, kqForms{t: t})
	case AVX512:
		if !cpu.X86.HasAVX512VBMI || !cpu.X86.HasAVX512GFNI {
			return nil
		}
		return kqDriver(t, kqForms{t: t, avx512: true})
	}
	return nil
}

// kqForms are the forms of one type's kernel at one level: the scratch
// form always, the register and pair forms at AVX-512. The assembly is
// called directly (not through function values), so that the scratch it
// is given stays on the caller's stack.
type kqForms struct {
	t      gguf.TensorType
	avx512 bool
}

// kqForm names a form of a K-quant kernel.
type kqForm int

const (
	kqMem kqForm = iota
	kqReg
	kqPair
)

// run calls form f of the kernel.
func (k kqForms) run(f kqForm, w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte) {
	if !k.avx512 {
		switch k.t {
		case gguf.Q2_K:
			kqQ2KAVX2(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q3_K:
			kqQ3KAVX2(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q4_K:
			kqQ4KAVX2(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q5_K:
			kqQ5KAVX2(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q6_K:
			kqQ6KAVX2(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		}
		return
	}
	switch f {
	case kqReg:
		switch k.t {
		case gguf.Q2_K:
			kqQ2KAVX512R(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q3_K:
			kqQ3KAVX512R(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q4_K:
			kqQ4KAVX512R(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q5_K:
			kqQ5KAVX512R(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q6_K:
			kqQ6KAVX512R(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		}
	case kqPair:
		switch k.t {
		case gguf.Q2_K:
			kqQ2KAVX512P(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q3_K:
			kqQ3KAVX512P(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q4_K:
			kqQ4KAVX512P(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q5_K:
			kqQ5KAVX512P(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q6_K:
			kqQ6KAVX512P(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		}
	default:
		switch k.t {
		case gguf.Q2_K:
			kqQ2KAVX512(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q3_K:
			kqQ3KAVX512(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q4_K:
			kqQ4KAVX512(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q5_K:
			kqQ5KAVX512(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		case gguf.Q6_K:
			kqQ6KAVX512(w, wStride, rows, n, a, aStride, cols, out, outStride, scratch)
		}
	}
}

// kqDriver wraps an assembly kernel as a MulFunc: it checks the arguments
// (the assembly reads and writes through raw pointers), then goes through
// the rows in chunks of kqRowChunk (so that one assembly call stays short:
// the runtime cannot preempt it) and, in each, through groups of columns
// whose activations fit the cache.
func kqDriver(t gguf.TensorType, k kqForms) MulFunc {
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
		ab := ActQ8K.RowBytes(n)
		group := max(kqMemCols, min(kqMaxCols, kqColBytes/ab))
		var scratch [kqScratch]byte
		for r0 := 0; r0 < rows; r0 += kqRowChunk {
			nr := min(kqRowChunk, rows-r0)
			for c0 := 0; c0 < cols; {
				nc := k.call(group, w[r0*wStride:], wStride, nr, n, a[c0*aStride:], aStride, cols-c0, out[c0*outStride+r0:], outStride, &scratch[0])
				c0 += nc
			}
		}
	}
}

// call multiplies rows weight rows against the first columns (of cols
// left, at most group) with the form that suits them, and returns how many
// columns it took. Groups of fewer than kqMemCols columns go to the
// register form, others to the pair form for an even number of rows, if
// there are such forms.
func (k kqForms) call(group int, w []byte, wStride, rows, n int, a []byte, aStride, cols int, out []float32, outStride int, scratch *byte) int {
	switch {
	case k.avx512 && cols < kqMemCols:
		nc := min(kqRegCols, cols)
		k.run(kqReg, &w[0], wStride, rows, n, &a[0], aStride, nc, &out[0], outStride, scratch)
		return nc
	case k.avx512 && rows >= 2:
		nc, even := min(group, cols), rows&^1
		k.run(kqPair, &w[0], wStride, even, n, &a[0], aStride, nc, &out[0], outStride, scratch)
		if even < rows {
			k.run(kqMem, &w[even*wStride], wStride, 1, n, &a[0], aStride, nc, &out[even], outStride, scratch)
		}
		return nc
	}
	nc := min(group, cols)
	k.run(kqMem, &w[0], wStride, rows, n, &a[0], aStride, nc, &out[0], outStride, scratch)
	return nc
}

//go:noescape
func q8kQuantize(x *float32, nb int, dst *byte, n int)

// quantizeQ8KFast writes x as an ActQ8K row into dst, in assembly where the
// CPU has AVX-512 (and in Go elsewhere).
func quantizeQ8KFast(dst []byte, x []float32) bool {
	n := len(x)
	if n%256 != 0 || n == 0 || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VL {
		return false
	}
	if len(dst) < ActQ8K.RowBytes(n) {
		panic("kernels: ActQ8K row shorter than its values")
	}
	q8kQuantize(&x[0], n/256, &dst[0], n)
	return true
}

// kqStreamRead reads n bytes at p (n a multiple of 256) with plain vector
// loads and returns their xor. Benchmarks measure the machine's streaming
// read bandwidth with it, beside the kernels.
//
//go:noescape
func kqStreamRead(p *byte, n int) uint64
