package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize converts n = len(dst) elements of type t from src into dst.
// len(dst) must be a multiple of the block size and src must hold at least
// RowBytes(len(dst)) bytes. Every supported type decodes exactly as its
// ggml block layout defines; a value is computed in float32 from the
// block's integers and scales, so it equals the exact value rounded once.
func Dequantize(t TensorType, dst []float32, src []byte) error {
	if !t.Supported() {
		return fmt.Errorf("%w: tensor type %s", ErrUnsupported, t)
	}
	bs, ts := t.blockInfo()
	need := t.RowBytes(len(dst))
	if len(dst)%bs != 0 || len(src) < need {
		return fmt.Errorf("%w: %d %s elements need %d bytes, have %d", ErrFormat, len(dst), t, need, len(src))
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return nil
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return nil
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return nil
	}
	dec := blockDecoder(t)
	for b := range len(dst) / bs {
		dec(dst[b*bs:(b+1)*bs], src[b*ts:(b+1)*ts])
	}
	return nil
}

// blockDecoder returns the decoder of one block of a quantised type.
func blockDecoder(t TensorType) func(y []float32, x []byte) {
	switch t {
	case Q4_0:
		return decodeQ4_0
	case Q4_1:
		return decodeQ4_1
	case Q5_0:
		return decodeQ5_0
	case Q5_1:
		return decodeQ5_1
	case Q8_0:
		return decodeQ8_0
	case Q8_1:
		return decodeQ8_1
	case Q2_K:
		return decodeQ2K
	case Q3_K:
		return decodeQ3K
	case Q4_K:
		return decodeQ4K
	case Q5_K:
		return decodeQ5K
	case Q6_K:
		return decodeQ6K
	case Q8_K:
		return decodeQ8K
	}
	return nil
}

// half reads the little-endian float16 at b[0:2].
func half(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// Q4_0: y = d·(q − 8); byte j holds element j (low nibble) and j+16 (high).
func decodeQ4_0(y []float32, x []byte) {
	d := half(x)
	y = y[:32]
	for j, q := range x[2:18] {
		y[j] = float32(int(q&15)-8) * d
		y[j+16] = float32(int(q>>4)-8) * d
	}
}

// Q4_1: y = d·q + m, nibbles as in Q4_0.
func decodeQ4_1(y []float32, x []byte) {
	d, m := half(x), half(x[2:])
	y = y[:32]
	for j, q := range x[4:20] {
		y[j] = float32(q&15)*d + m
		y[j+16] = float32(q>>4)*d + m
	}
}

// Q5_0: y = d·(q − 16); the fifth bit of element i is bit i of the
// little-endian uint32 qh.
func decodeQ5_0(y []float32, x []byte) {
	d := half(x)
	qh := binary.LittleEndian.Uint32(x[2:])
	y = y[:32]
	for j, q := range x[6:22] {
		lo := int(q&15) | int(qh>>j&1)<<4
		hi := int(q>>4) | int(qh>>(j+16)&1)<<4
		y[j] = float32(lo-16) * d
		y[j+16] = float32(hi-16) * d
	}
}

// Q5_1: y = d·q + m, bits as in Q5_0.
func decodeQ5_1(y []float32, x []byte) {
	d, m := half(x), half(x[2:])
	qh := binary.LittleEndian.Uint32(x[4:])
	y = y[:32]
	for j, q := range x[8:24] {
		lo := q&15 | byte(qh>>j&1)<<4
		hi := q>>4 | byte(qh>>(j+16)&1)<<4
		y[j] = float32(lo)*d + m
		y[j+16] = float32(hi)*d + m
	}
}

// Q8_0: y = d·q.
func decodeQ8_0(y []float32, x []byte) {
	d := half(x)
	y = y[:32]
	for j, q := range x[2:34] {
		y[j] = float32(int8(q)) * d
	}
}

// Q8_1: y = d·q; the second half is d·Σq, for dot products only.
func decodeQ8_1(y []float32, x []byte) {
	d := half(x)
	y = y[:32]
	for j, q := range x[4:36] {
		y[j] = float32(int8(q)) * d
	}
}

// Q2_K: 16 groups of 16; group g has scale d·(s[g]&15) and min
// dmin·(s[g]>>4), y = scale·q − min. Element 128n + 32j + l takes bits 2j,
// 2j+1 of qs[32n + l] and belongs to group 8n + 2j + l/16.
func decodeQ2K(y []float32, x []byte) {
	sc, qs := x[:16], x[16:80]
	d, dmin := half(x[80:]), half(x[82:])
	y = y[:QK]
	for n := range 2 {
		q := qs[32*n : 32*n+32]
		for j := range 4 {
			for h := range 2 {
				s := sc[8*n+2*j+h]
				dl, ml := d*float32(s&15), dmin*float32(s>>4)
				out := y[128*n+32*j+16*h : 128*n+32*j+16*h+16]
				for l, b := range q[16*h : 16*h+16] {
					out[l] = dl*float32(b>>(2*j)&3) - ml
				}
			}
		}
	}
}

// q3Scale decodes the 6-bit scale of group g of a Q3_K block from its 12
// packed bytes: the low four bits are nibble g%8 (low nibbles of bytes 0–7
// for g < 8, high nibbles for g ≥ 8), the high two bits are bits
// 2·(g/4), 2·(g/4)+1 of byte 8 + g%4. The stored value is offset by 32.
func q3Scale(s []byte, g int) int {
	lo := s[g%8] >> (4 * (g / 8)) & 15
	hi := s[8+g%4] >> (2 * (g / 4)) & 3
	return int(lo|hi<<4) - 32
}

// Q3_K: 16 groups of 16 with signed 6-bit scales, y = d·scale·(q − 4) where
// q's low two bits come as in Q2_K and its third bit, for element
// 128n + 32j + l, is bit 4n + j of hmask[l], with the 4 subtracted when that
// bit is clear.
func decodeQ3K(y []float32, x []byte) {
	hm, qs, sc := x[:32], x[32:96], x[96:108]
	d := half(x[108:])
	y = y[:QK]
	for n := range 2 {
		q := qs[32*n : 32*n+32]
		for j := range 4 {
			shift, hbit := 2*j, 4*n+j
			for h := range 2 {
				dl := d * float32(q3Scale(sc, 8*n+2*j+h))
				out := y[128*n+32*j+16*h : 128*n+32*j+16*h+16]
				for l := range 16 {
					v := int(q[16*h+l]>>shift&3) - 4 + 4*int(hm[16*h+l]>>hbit&1)
					out[l] = dl * float32(v)
				}
			}
		}
	}
}

// kScaleMin decodes the 6-bit scale and min of group g (0–7) of a Q4_K or
// Q5_K block from its 12 packed bytes. Groups 0–3 keep theirs in the low six
// bits of bytes g and g+4; groups 4–7 take their low four bits from the
// nibbles of byte g+4 and their high two bits from the top of bytes g−4
// (scale) and g (min).
func kScaleMin(s []byte, g int) (sc, m byte) {
	if g < 4 {
		return s[g] & 63, s[g+4] & 63
	}
	return s[g+4]&15 | s[g-4]>>6<<4, s[g+4]>>4 | s[g]>>6<<4
}

// Q4_K: 8 groups of 32, y = d·sc·q − dmin·m. Element 64c + l takes the low
// nibble of qs[32c + l] (group 2c), element 64c + 32 + l the high nibble
// (group 2c + 1).
func decodeQ4K(y []float32, x []byte) {
	d, dmin := half(x), half(x[2:])
	sc, qs := x[4:16], x[16:144]
	y = y[:QK]
	for c := range 4 {
		s0, m0 := kScaleMin(sc, 2*c)
		s1, m1 := kScaleMin(sc, 2*c+1)
		d0, n0 := d*float32(s0), dmin*float32(m0)
		d1, n1 := d*float32(s1), dmin*float32(m1)
		lo, hi := y[64*c:64*c+32], y[64*c+32:64*c+64]
		for l, q := range qs[32*c : 32*c+32] {
			lo[l] = d0*float32(q&15) - n0
			hi[l] = d1*float32(q>>4) - n1
		}
	}
}

// Q5_K: Q4_K with a fifth bit: element 64c + l adds 16 when bit 2c of qh[l]
// is set, element 64c + 32 + l when bit 2c + 1 is.
func decodeQ5K(y []float32, x []byte) {
	d, dmin := half(x), half(x[2:])
	sc, qh, qs := x[4:16], x[16:48], x[48:176]
	y = y[:QK]
	for c := range 4 {
		s0, m0 := kScaleMin(sc, 2*c)
		s1, m1 := kScaleMin(sc, 2*c+1)
		d0, n0 := d*float32(s0), dmin*float32(m0)
		d1, n1 := d*float32(s1), dmin*float32(m1)
		lo, hi := y[64*c:64*c+32], y[64*c+32:64*c+64]
		for l, q := range qs[32*c : 32*c+32] {
			h := qh[l] >> (2 * c)
			lo[l] = d0*float32(q&15|h&1<<4) - n0
			hi[l] = d1*float32(q>>4|h>>1&1<<4) - n1
		}
	}
}

// Q6_K: 16 groups of 16 with int8 scales, y = d·scale·(q − 32). In each half
// n of the block, element 128n + 32k + l (k = 0–3, l < 32) takes its low
// nibble from ql[64n + l + 32·(k&1)] (high nibble when k ≥ 2) and its top two
// bits from bits 2k, 2k+1 of qh[32n + l]; its group is 8n + 2k + l/16.
func decodeQ6K(y []float32, x []byte) {
	ql, qh, sc := x[:128], x[128:192], x[192:208]
	d := half(x[208:])
	y = y[:QK]
	for n := range 2 {
		for k := range 4 {
			for h := range 2 {
				dl := d * float32(int8(sc[8*n+2*k+h]))
				out := y[128*n+32*k+16*h : 128*n+32*k+16*h+16]
				lbase := 64*n + 32*(k&1) + 16*h
				for l := range 16 {
					lowq := ql[lbase+l] >> (4 * (k >> 1)) & 15
					highq := qh[32*n+16*h+l] >> (2 * k) & 3
					out[l] = dl * float32(int(lowq|highq<<4)-32)
				}
			}
		}
	}
}

// Q8_K: y = d·q with a float32 d; the group sums are for dot products.
func decodeQ8K(y []float32, x []byte) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(x))
	y = y[:QK]
	for j, q := range x[4:260] {
		y[j] = float32(int8(q)) * d
	}
}
