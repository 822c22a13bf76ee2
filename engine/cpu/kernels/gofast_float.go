package kernels

import (
	"encoding/binary"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// floatGo returns the Generic kernel of a float type (F32, F16, BF16): the
// bits of refFloat with eight lanes. Each product of two float32 values is
// exact in float64, so a lane adds it as the block kernels do (see the
// rounding note in gofast.go), checking every sum with tieOrTiny.
func floatGo(t gguf.TensorType) MulFunc {
	size := 4
	if t != gguf.F32 {
		size = 2
	}
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		if rows <= 0 || cols <= 0 {
			return
		}
		checkShape(t.String(), n*size, 4*n, w, wStride, rows, a, aStride, cols, out, outStride)
		body := n - n%8
		for c := range cols {
			x := a[c*aStride : c*aStride+4*n]
			for r := range rows {
				wr := w[r*wStride : r*wStride+n*size]
				var acc [8]float32
				for i := 0; i < body; {
					i += runFloat(t, wr[i*size:body*size], x[4*i:4*body], &acc)
					if i < body { // a tie: fma32 adds these eight
						for j := range 8 {
							acc[j] = fma32(floatAt(t, wr, i+j), f32At(x, i+j), acc[j])
						}
						i += 8
					}
				}
				s := reduce8(&acc)
				for i := body; i < n; i++ {
					s = fma32(floatAt(t, wr, i), f32At(x, i), s)
				}
				out[c*outStride+r] = s
			}
		}
	}
}

// runFloat adds the products of weights w (type t) and activations x,
// eight at a time to the lanes acc, stopping before the first eight whose
// sums include a tie; it returns the number of values added.
func runFloat(t gguf.TensorType, w, x []byte, acc *[8]float32) int {
	a0, a1, a2, a3, a4, a5, a6, a7 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]
	i := 0
	for len(x) >= 32 {
		xs := (*[32]byte)(x)
		var v [8]float32
		switch t {
		case gguf.F32:
			ws := (*[32]byte)(w)
			for j := range v {
				v[j] = math.Float32frombits(binary.LittleEndian.Uint32(ws[4*j:]))
			}
		case gguf.F16:
			ws := (*[16]byte)(w)
			for j := range v {
				v[j] = halfBits(uint32(binary.LittleEndian.Uint16(ws[2*j:])))
			}
		default:
			ws := (*[16]byte)(w)
			for j := range v {
				v[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(ws[2*j:])) << 16)
			}
		}
		f := func(j int) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(xs[4*j:]))) }
		t0, t1, t2, t3 := float64(v[0])*f(0)+float64(a0), float64(v[1])*f(1)+float64(a1), float64(v[2])*f(2)+float64(a2), float64(v[3])*f(3)+float64(a3)
		t4, t5, t6, t7 := float64(v[4])*f(4)+float64(a4), float64(v[5])*f(5)+float64(a5), float64(v[6])*f(6)+float64(a6), float64(v[7])*f(7)+float64(a7)
		if tieOrTiny(t0) || tieOrTiny(t1) || tieOrTiny(t2) || tieOrTiny(t3) || tieOrTiny(t4) || tieOrTiny(t5) || tieOrTiny(t6) || tieOrTiny(t7) {
			break
		}
		a0, a1, a2, a3 = float32(t0), float32(t1), float32(t2), float32(t3)
		a4, a5, a6, a7 = float32(t4), float32(t5), float32(t6), float32(t7)
		i += 8
		x = x[32:]
		if t == gguf.F32 {
			w = w[32:]
		} else {
			w = w[16:]
		}
	}
	*acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
	return i
}
