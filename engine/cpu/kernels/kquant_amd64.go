package kernels

import (
	"fmt"

	"golang.org/x/sys/cpu"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// kqAsm is the signature of the K-quant assembly kernels: rows weight rows
// against cols activation rows (cols ≤ kqMaxCols), with kqScratch bytes of
// scratch. The AVX-512 kernels come in two forms that compute the same bits:
// one keeps the columns' accumulators in scratch (any number of columns),
// the other (suffix R) in registers (1 to kqRegCols columns), which is
// faster for few columns.
type kqAsm func(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)

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

const (
	// kqMaxCols is the most columns one assembly call takes.
	kqMaxCols = 64
	// kqColBytes caps the activation bytes one call works on, so that they
	// stay in the core's L2 cache while every row streams past them.
	kqColBytes = 256 << 10
	// kqRegCols is the most columns the register form takes, kqMemCols the
	// fewest the scratch form is given when there is a register form.
	kqRegCols, kqMemCols = 4, 8
	// kqScratch is the scratch size: 1024 bytes for a decoded super-block
	// and d, dm, then one accumulator of up to 64 bytes per column.
	kqScratch = 1024 + 64*kqMaxCols
)

// kquantFast returns the assembly kernel of type t written for level l, or
// nil if there is none. The AVX-512 kernels also need VBMI and GFNI.
func kquantFast(t gguf.TensorType, l Level) MulFunc {
	var f, r kqAsm
	switch l {
	case AVX2:
		f = map[gguf.TensorType]kqAsm{
			gguf.Q2_K: kqQ2KAVX2, gguf.Q3_K: kqQ3KAVX2, gguf.Q4_K: kqQ4KAVX2,
			gguf.Q5_K: kqQ5KAVX2, gguf.Q6_K: kqQ6KAVX2,
		}[t]
	case AVX512:
		if !cpu.X86.HasAVX512VBMI || !cpu.X86.HasAVX512GFNI {
			return nil
		}
		f = map[gguf.TensorType]kqAsm{
			gguf.Q2_K: kqQ2KAVX512, gguf.Q3_K: kqQ3KAVX512, gguf.Q4_K: kqQ4KAVX512,
			gguf.Q5_K: kqQ5KAVX512, gguf.Q6_K: kqQ6KAVX512,
		}[t]
		r = map[gguf.TensorType]kqAsm{
			gguf.Q2_K: kqQ2KAVX512R, gguf.Q3_K: kqQ3KAVX512R, gguf.Q4_K: kqQ4KAVX512R,
			gguf.Q5_K: kqQ5KAVX512R, gguf.Q6_K: kqQ6KAVX512R,
		}[t]
	}
	if f == nil {
		return nil
	}
	return kqDriver(t, f, r)
}

// kqDriver wraps an assembly kernel as a MulFunc: it checks the slices'
// lengths (the assembly reads and writes through raw pointers) and splits
// the columns into groups whose activations fit the cache, giving groups of
// fewer than kqMemCols columns to the register form reg if there is one.
func kqDriver(t gguf.TensorType, mem, reg kqAsm) MulFunc {
	bb := kTypeOf(t).bytes
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
		ab := ActQ8K.RowBytes(n)
		if n%256 != 0 || len(w) < (rows-1)*wStride+n/256*bb || len(a) < (cols-1)*aStride+ab || len(out) < (cols-1)*outStride+rows {
			panic(fmt.Sprintf("kernels: %v kernel: n=%d needs %d+ weight, %d+ activation and %d+ output values, have %d, %d, %d",
				t, n, (rows-1)*wStride+n/256*bb, (cols-1)*aStride+ab, (cols-1)*outStride+rows, len(w), len(a), len(out)))
		}
		group := max(kqMemCols, min(kqMaxCols, kqColBytes/ab))
		var scratch [kqScratch]byte
		for c0 := 0; c0 < cols; {
			f, nc := mem, min(group, cols-c0)
			if reg != nil && cols-c0 < kqMemCols {
				f, nc = reg, min(kqRegCols, cols-c0)
			}
			f(&w[0], wStride, rows, n, &a[c0*aStride], aStride, nc, &out[c0*outStride], outStride, &scratch[0])
			c0 += nc
		}
	}
}

// kqStreamRead reads n bytes at p (n a multiple of 256) with plain vector
// loads and returns their xor. Benchmarks measure the machine's streaming
// read bandwidth with it, beside the kernels.
//
//go:noescape
func kqStreamRead(p *byte, n int) uint64
