package kernels

import (
	"encoding/binary"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// levelKernels returns the kernels written for level l exactly (NewSet
// layers the levels). Each family of weight types adds its own.
func levelKernels(l Level) map[gguf.TensorType]Kernel {
	m := make(map[gguf.TensorType]Kernel)
	addLegacy(m, l)
	addKQuant(m, l)
	return m
}

// QuantizeRows writes rows [r0, r1) of x (rows of n values, n a multiple
// of a.Block()) in form a into dst, which holds the rows (or for grouped
// forms the groups of a.Group() rows) stride bytes apart.
func QuantizeRows(a Act, dst []byte, stride int, x []float32, n, r0, r1 int) {
	for r := r0; r < r1; r++ {
		xr := x[r*n : (r+1)*n]
		if g := a.Group(); g > 1 {
			quantizeLaneFast(dst[r/g*stride:], r%g, xr)
			continue
		}
		if a == ActQ8K && quantizeQ8KFast(dst[r*stride:], xr) {
			continue
		}
		QuantizeRow(a, dst[r*stride:], xr)
	}
}

// QuantizeBlocks is QuantizeRows for a grouped form (Group() > 1) limited
// to blocks [b0, b1) of each row. The rows of a group share every record
// of it (scales and sums of all 16 rows in one cache line, the values four
// bytes a row in each line), so quantisations of different rows at once
// write the same lines from different cores; of disjoint block ranges,
// disjoint records.
func QuantizeBlocks(a Act, dst []byte, stride int, x []float32, n, r0, r1, b0, b1 int) {
	g, bs := a.Group(), a.Block()
	if g <= 1 {
		panic("kernels: QuantizeBlocks: the form is not grouped")
	}
	if b0 >= b1 {
		return
	}
	for r := r0; r < r1; r++ {
		quantizeLaneFast(dst[r/g*stride+b0*gRecBytes:], r%g, x[r*n+b0*bs:r*n+b1*bs])
	}
}

// QuantizeRow writes x in form a to dst (a.RowBytes(len(x)) bytes);
// len(x) must be a multiple of a.Block() and a must not be grouped. Each
// block's scale is its largest magnitude over 127 and values round to the
// nearest integer, so the quantised values lie in [-127, 127].
func QuantizeRow(a Act, dst []byte, x []float32) {
	n := len(x)
	switch a {
	case ActF32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case ActQ8:
		nb := n / 32
		d, s := dst[n:n+4*nb], dst[n+4*nb:n+8*nb]
		for b := range nb {
			sc, sum := quantizeBlock(dst[b*32:(b+1)*32], x[b*32:(b+1)*32])
			binary.LittleEndian.PutUint32(d[4*b:], math.Float32bits(sc))
			binary.LittleEndian.PutUint32(s[4*b:], math.Float32bits(sc*float32(sum)))
		}
	case ActQ8K:
		nb := n / 256
		d, bs := dst[n:n+4*nb], dst[n+4*nb:n+4*nb+2*(n/16)]
		for b := range nb {
			q := dst[b*256 : (b+1)*256]
			sc, _ := quantizeBlock(q, x[b*256:(b+1)*256])
			binary.LittleEndian.PutUint32(d[4*b:], math.Float32bits(sc))
			for g := range 16 {
				var sum int16
				for _, v := range q[16*g : 16*g+16] {
					sum += int16(int8(v))
				}
				binary.LittleEndian.PutUint16(bs[2*(16*b+g):], uint16(sum))
			}
		}
	}
}

// quantizeBlock quantises x into q with one scale and returns the scale and
// the sum of the quantised values. Values round half away from zero (as
// math.Round does): for |v| ≤ 127.5, float64 |v|+0.5 is exact, so its
// truncation is the rounded magnitude.
func quantizeBlock(q []byte, x []float32) (float32, int32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	if amax == 0 {
		clear(q)
		return 0, 0
	}
	d := amax / 127
	id := 1 / d
	q = q[:len(x)]
	var sum int32
	for i, v := range x {
		t := v * id
		iv := min(127, int32(float64(abs32(t))+0.5))
		if t < 0 {
			iv = -iv
		}
		q[i] = byte(int8(iv))
		sum += iv
	}
	return d, sum
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// f32At reads the little-endian float32 at b[4*i:].
func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// f16At reads the little-endian half-precision value at b[off:].
func f16At(b []byte, off int) float32 {
	return gguf.F16ToF32(binary.LittleEndian.Uint16(b[off:]))
}

// fma32 returns x·y+z rounded once to float32, as a fused multiply-add
// instruction computes it. The product is exact in float64; the sum is
// rounded to float64 and then to float32, which only goes wrong when the
// float64 sum lands exactly halfway between two float32 values while the
// exact sum does not: then the exact sum's side decides.
func fma32(x, y, z float32) float32 {
	p := float64(x) * float64(y)
	s := p + float64(z)
	r := float32(s)
	if math.IsInf(s, 0) || math.IsNaN(s) || float64(r) == s {
		return r
	}
	bp := s - float64(z)
	e := (p - bp) + (float64(z) - (s - bp)) // exact sum = s + e
	if e == 0 {
		return r
	}
	// the other float32 neighbour of s
	o := math.Nextafter32(r, float32(math.Inf(1)))
	if float64(r) > s {
		o = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (float64(r)+float64(o))/2 != s {
		return r // not a tie: rounding twice gave the right value
	}
	lo, hi := min(r, o), max(r, o)
	if e > 0 {
		return hi
	}
	return lo
}

// reduce sums L = len(acc) lanes (8 or 16) in the order the assembly does:
// halves first (lane i with i+L/2), down to one.
func reduce(acc []float32) float32 {
	var s8 [8]float32
	if len(acc) == 16 {
		for i := range 8 {
			s8[i] = acc[i] + acc[i+8]
		}
	} else {
		copy(s8[:], acc)
	}
	var s4 [4]float32
	for i := range 4 {
		s4[i] = s8[i] + s8[i+4]
	}
	return (s4[0] + s4[2]) + (s4[1] + s4[3])
}

// legacyBlock decodes one block of a 32-value type: the integer weights
// (offset removed for types without a min, raw for types with one), the
// scale d and the min m (0 for types without one).
func legacyBlock(t gguf.TensorType, blk []byte, q *[32]int32) (d, m float32) {
	d = f16At(blk, 0)
	switch t {
	case gguf.Q8_0:
		for j := range 32 {
			q[j] = int32(int8(blk[2+j]))
		}
	case gguf.Q4_0, gguf.Q4_1:
		off, bias := 2, int32(8)
		if t == gguf.Q4_1 {
			off, bias, m = 4, 0, f16At(blk, 2)
		}
		for j := range 16 {
			q[j] = int32(blk[off+j]&0x0f) - bias
			q[j+16] = int32(blk[off+j]>>4) - bias
		}
	case gguf.Q5_0, gguf.Q5_1:
		hOff, off, bias := 2, 6, int32(16)
		if t == gguf.Q5_1 {
			hOff, off, bias, m = 4, 8, 0, f16At(blk, 2)
		}
		qh := binary.LittleEndian.Uint32(blk[hOff:])
		for j := range 16 {
			q[j] = int32(blk[off+j]&0x0f|byte(qh>>j&1)<<4) - bias
			q[j+16] = int32(blk[off+j]>>4|byte(qh>>(j+16)&1)<<4) - bias
		}
	}
	return d, m
}

// legacyBlockBytes is the size of one 32-value block of type t (0 if t is
// not one of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
func legacyBlockBytes(t gguf.TensorType) int {
	switch t {
	case gguf.Q4_0:
		return 18
	case gguf.Q4_1:
		return 20
	case gguf.Q5_0:
		return 22
	case gguf.Q5_1:
		return 24
	case gguf.Q8_0:
		return 34
	}
	return 0
}

// refLegacy returns the reference kernel for a 32-value block type with
// accumulators of L lanes (8 or 16). Per (row, column) pair it computes, for
// each block b, the integer sums of the eight groups of four products,
// scales them by d_b·da_b with one fused multiply-add per lane into lane
// group b mod L/8, adds m_b·s_b into the group's first lane for types with
// a min, and sums the lanes with reduce. The assembly kernels compute the
// same operations, so their results are equal bit for bit.
func refLegacy(t gguf.TensorType, L int) MulFunc {
	bb := legacyBlockBytes(t)
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		nb := n / 32
		var q [32]int32
		acc := make([]float32, L)
		eachPair(w, wStride, rows, a, aStride, cols, out, outStride, func(wr, act []byte) float32 {
			clear(acc)
			for b := range nb {
				d, m := legacyBlock(t, wr[b*bb:(b+1)*bb], &q)
				sc := d * f32At(act[n:], b)
				g := (b % (L / 8)) * 8
				for i := range 8 {
					var s int32
					for j := 4 * i; j < 4*i+4; j++ {
						s += q[j] * int32(int8(act[b*32+j]))
					}
					acc[g+i] = fma32(float32(s), sc, acc[g+i])
				}
				if t == gguf.Q4_1 || t == gguf.Q5_1 {
					acc[g] = fma32(m, f32At(act[n+4*nb:], b), acc[g])
				}
			}
			return reduce(acc)
		})
	}
}

// eachPair sets out[c*outStride+r] = f(weight row r, activation row c).
func eachPair(w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int, f func(wr, act []byte) float32) {
	for c := range cols {
		for r := range rows {
			out[c*outStride+r] = f(w[r*wStride:], a[c*aStride:])
		}
	}
}

// floatAt reads value i of a row of float type t.
func floatAt(t gguf.TensorType, row []byte, i int) float32 {
	switch t {
	case gguf.F16:
		return f16At(row, 2*i)
	case gguf.BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*i:])) << 16)
	}
	return f32At(row, i)
}

// refFloat returns the reference kernel for F32, F16 or BF16 weights with L
// lanes: value i of the first n - n%L goes to lane i mod L by a fused
// multiply-add, the lanes are summed with reduce, and the last n%L values
// are added one by one by fused multiply-adds.
func refFloat(t gguf.TensorType, L int) MulFunc {
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		body := n - n%L
		acc := make([]float32, L)
		eachPair(w, wStride, rows, a, aStride, cols, out, outStride, func(wr, act []byte) float32 {
			clear(acc)
			for i := range body {
				acc[i%L] = fma32(floatAt(t, wr, i), f32At(act, i), acc[i%L])
			}
			s := reduce(acc)
			for i := body; i < n; i++ {
				s = fma32(floatAt(t, wr, i), f32At(act, i), s)
			}
			return s
		})
	}
}
