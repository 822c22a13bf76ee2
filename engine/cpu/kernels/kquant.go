package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// The K-quant types store 256 values per super-block. Each kernel reduces a
// super-block to one common form, kBlock, whose value i is
//
//	d·sc[i/16]·u[i] − dm·mn[i/16]
//
// with u unsigned and sc, mn small integers per 16 values. Against
// activations in ActQ8K form (x = da·q), one super-block then contributes
//
//	da·(d·Σ_g sc[g]·Σ_{i∈g} u[i]·q[i] − dm·Σ_g mn[g]·bsum[g])
//
// where both sums are exact integers: the 16-value sums of q (bsums) carry
// the minimums (Q2_K, Q4_K, Q5_K) and the constant offsets of the signed
// types (Q3_K: u−4, Q6_K: u−32, with dm = d).
//
// The reference kernel rounds that per super-block and sums the super-blocks
// in order. The assembly kernels split the integer sums over 16 (AVX-512) or
// 8 (AVX2) lanes, accumulate each lane in float32 across super-blocks and
// add the lanes at the end, so they differ from the reference by rounding
// only; each follows one fixed sequence per output, whatever the call.

// Sizes in bytes of one super-block of 256 values.
const (
	q2KBytes = 84  // scales[16] (low nibble scale, high nibble min) | qs[64] | d f16 | dmin f16
	q3KBytes = 110 // hmask[32] | qs[64] | scales[12] (16 × 6 bits) | d f16
	q4KBytes = 144 // d f16 | dmin f16 | scales[12] (8 scales, 8 mins, 6 bits) | qs[128]
	q5KBytes = 176 // d f16 | dmin f16 | scales[12] | qh[32] | qs[128]
	q6KBytes = 210 // ql[128] | qh[64] | scales[16] int8 | d f16
)

// kBlock is one super-block in the common form above.
type kBlock struct {
	u      [256]uint8
	sc, mn [16]int16
	d, dm  float32
}

// kType describes one K-quant weight type to the generic kernels.
type kType struct {
	t     gguf.TensorType
	bytes int // bytes per super-block
}

// kTypes lists the K-quant types.
func kTypes() [5]kType {
	return [...]kType{
		{gguf.Q2_K, q2KBytes},
		{gguf.Q3_K, q3KBytes},
		{gguf.Q4_K, q4KBytes},
		{gguf.Q5_K, q5KBytes},
		{gguf.Q6_K, q6KBytes},
	}
}

// unpack decodes one super-block's bytes into the common form. (A switch,
// not a function value, so that blk stays on the caller's stack.)
func (kt kType) unpack(blk *kBlock, b []byte) {
	switch kt.t {
	case gguf.Q2_K:
		unpackQ2K(blk, b)
	case gguf.Q3_K:
		unpackQ3K(blk, b)
	case gguf.Q4_K:
		unpackQ4K(blk, b)
	case gguf.Q5_K:
		unpackQ5K(blk, b)
	case gguf.Q6_K:
		unpackQ6K(blk, b)
	}
}

// kTypeOf returns the kType of K-quant type t.
func kTypeOf(t gguf.TensorType) kType {
	for _, kt := range kTypes() {
		if kt.t == t {
			return kt
		}
	}
	panic(fmt.Sprintf("kernels: %v is not a K-quant type", t))
}

// addKQuant adds the kernels of level l for the 256-value super-block types
// (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
func addKQuant(m map[gguf.TensorType]Kernel, l Level) {
	for _, kt := range kTypes() {
		if k, ok := goKernel(kt.t); l == Generic && ok {
			m[kt.t] = k
		} else if l == Generic {
			m[kt.t] = Kernel{Act: ActQ8K, Mul: mulKRef(kt)}
		} else if f := kquantFast(kt.t, l); f != nil {
			m[kt.t] = Kernel{Act: ActQ8K, Mul: f}
		}
	}
}

// mulKRef returns the reference kernel of type kt: per super-block, the
// integer dot products of the common form, scaled, summed over super-blocks
// in order.
func mulKRef(kt kType) MulFunc {
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		if rows <= 0 || cols <= 0 {
			return
		}
		kqCheck(kt.t, n, len(w), wStride, rows, len(a), aStride, cols, len(out), outStride)
		nb := n / 256
		var blk kBlock
		for c := range cols {
			act := a[c*aStride:]
			bsums := act[n+4*nb:]
			for r := range rows {
				wr := w[r*wStride:]
				var acc float32
				for b := range nb {
					kt.unpack(&blk, wr[b*kt.bytes:(b+1)*kt.bytes])
					q := act[b*256 : b*256+256]
					var dot, off int32
					for g := range 16 {
						var s int32
						for i := 16 * g; i < 16*g+16; i++ {
							s += int32(blk.u[i]) * int32(int8(q[i]))
						}
						dot += int32(blk.sc[g]) * s
						off += int32(blk.mn[g]) * int32(int16(binary.LittleEndian.Uint16(bsums[2*(16*b+g):])))
					}
					acc += f32At(act[n:], b) * (blk.d*float32(dot) - blk.dm*float32(off))
				}
				out[c*outStride+r] = acc
			}
		}
	}
}

// kqCheck panics unless the slice lengths (and non-negative strides) hold
// a call's rows weight rows of n values of type t, cols activation rows and
// their outputs: the kernels then stay inside them.
func kqCheck(t gguf.TensorType, n, lw, wStride, rows, la, aStride, cols, lo, outStride int) {
	need := [3]int{(rows-1)*wStride + t.RowBytes(n), (cols-1)*aStride + ActQ8K.RowBytes(n), (cols-1)*outStride + rows}
	if n%256 != 0 || wStride < 0 || aStride < 0 || outStride < 0 || lw < need[0] || la < need[1] || lo < need[2] {
		panic(fmt.Sprintf("kernels: %v kernel: n=%d, strides %d, %d, %d: needs %d+ weight bytes, %d+ activation bytes and %d+ outputs, have %d, %d, %d",
			t, n, wStride, aStride, outStride, need[0], need[1], need[2], lw, la, lo))
	}
}

// unpackQ2K: value i is d·sc·((qs[32h+l] >> 2j) & 3) − dmin·m with
// h = i/128, j = i%128/32, l = i%32, and sc, m the low and high nibble of
// scales[i/16].
func unpackQ2K(k *kBlock, b []byte) {
	for i := range 256 {
		h, j, l := i/128, i%128/32, i%32
		k.u[i] = b[16+32*h+l] >> (2 * j) & 3
	}
	for g := range 16 {
		k.sc[g] = int16(b[g] & 15)
		k.mn[g] = int16(b[g] >> 4)
	}
	k.d, k.dm = f16At(b, 80), f16At(b, 82)
}

// unpackQ3K: value i is d·(s−32)·(lo + 4·hi − 4) with lo = (qs[32h+l] >> 2j) & 3
// and hi = (hmask[l] >> (4h+j)) & 1 (h, j, l as for Q2_K), and s the 6-bit
// scale of 16-value group g: low 4 bits from scales[g%8] (low nibble for
// g < 8, high nibble after), high 2 bits from scales[8+g%4] >> 2·(g/4).
func unpackQ3K(k *kBlock, b []byte) {
	for i := range 256 {
		h, j, l := i/128, i%128/32, i%32
		k.u[i] = b[32+32*h+l]>>(2*j)&3 | (b[l]>>(4*h+j)&1)<<2
	}
	s := b[96:108]
	for g := range 16 {
		sc := int16(s[g%8]>>(4*(g/8))&15 | (s[8+g%4]>>(2*(g/4))&3)<<4)
		k.sc[g] = sc - 32
		k.mn[g] = 4 * (sc - 32)
	}
	k.d = f16At(b, 108)
	k.dm = k.d
}

// q4KScale returns the 6-bit scale and min of 32-value sub-block j of a
// Q4_K or Q5_K super-block from its 12 packed bytes s: for j < 4 the low 6
// bits of s[j] and s[j+4]; after, a nibble of s[j+4] below the top 2 bits of
// s[j-4] and s[j].
func q4KScale(s []byte, j int) (sc, m int16) {
	if j < 4 {
		return int16(s[j] & 63), int16(s[j+4] & 63)
	}
	return int16(s[j+4]&15 | s[j-4]>>6<<4), int16(s[j+4]>>4 | s[j]>>6<<4)
}

// unpackQ4K: value i is d·sc·q − dmin·m for 32-value sub-block i/32, with q
// the low nibble of qs[32·(i/64) + i%32] in the first half of each 64 and
// the high nibble in the second.
func unpackQ4K(k *kBlock, b []byte) {
	for i := range 256 {
		k.u[i] = b[16+32*(i/64)+i%32] >> (4 * (i % 64 / 32)) & 15
	}
	k4Scales(k, b)
}

// unpackQ5K: as Q4_K with qs at 48, plus 16 if bit i/32 of qh[i%32] is set.
func unpackQ5K(k *kBlock, b []byte) {
	for i := range 256 {
		k.u[i] = b[48+32*(i/64)+i%32]>>(4*(i%64/32))&15 | (b[16+i%32]>>(i/32)&1)<<4
	}
	k4Scales(k, b)
}

// k4Scales fills the scales, mins and super-block scales of Q4_K and Q5_K.
func k4Scales(k *kBlock, b []byte) {
	for g := range 16 {
		k.sc[g], k.mn[g] = q4KScale(b[4:16], g/2)
	}
	k.d, k.dm = f16At(b, 0), f16At(b, 2)
}

// unpackQ6K: value i is d·scales[i/16]·(lo | hi<<4 − 32) with
// lo = (ql[64h + 32·(j&1) + l] >> 4·(j>>1)) & 15 and hi = (qh[32h+l] >> 2j) & 3
// (h, j, l as for Q2_K).
func unpackQ6K(k *kBlock, b []byte) {
	for i := range 256 {
		h, j, l := i/128, i%128/32, i%32
		lo := b[64*h+32*(j&1)+l] >> (4 * (j >> 1)) & 15
		hi := b[128+32*h+l] >> (2 * j) & 3
		k.u[i] = lo | hi<<4
	}
	for g := range 16 {
		k.sc[g] = int16(int8(b[192+g]))
		k.mn[g] = 32 * k.sc[g]
	}
	k.d = f16At(b, 208)
	k.dm = k.d
}
