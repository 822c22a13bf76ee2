package kernels

import (
	"encoding/binary"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// The Generic K-quant kernels give mulKRef's bits: per super-block the
// exact integer sums dot and off of the common form (kquant.go), then the
// same float32 expression, super-blocks in order. The integer sums run
// four values per multiplication against the activations packed once per
// chunk of kChunk super-blocks, a record of kRec bytes each:
//
//	P [64]uint64 | bsums [16]int16 | da float32
//
// For the values v..v+7 (v a multiple of 8), P[v/4] holds the activations
// v+6, v+4, v+2, v in 16-bit lanes 0..3 and P[v/4+1] those of v+7, v+5,
// v+3, v+1: a word of weights e with values v, v+2, v+4, v+6 in lanes 0..3
// (eight weight bytes masked to every other byte) times P[v/4] has their
// four products' sum in its top lane, and likewise the odd values. The
// accumulators start at the bias 2^47 and take at most four such products
// of four products each below 2^11 (4-bit weights against int8) before
// their top lanes are read; their lower lanes stay below 2^47 in
// magnitude.

const (
	// kChunk is the number of super-blocks per packed chunk.
	kChunk = 16
	// kRec is the size of a super-block's packed activations.
	kRec = 548
	// kBias is the accumulators' starting value.
	kBias = 1 << 47
)

// kquantGo returns the Generic kernel of K-quant type t, or nil.
func kquantGo(t gguf.TensorType) MulFunc {
	switch t {
	case gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
	default:
		return nil
	}
	kt := kTypeOf(t)
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		mulKGo(kt, n, w, wStride, rows, a, aStride, cols, out, outStride)
	}
}

func mulKGo(kt kType, n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	kqCheck(kt.t, n, len(w), wStride, rows, len(a), aStride, cols, len(out), outStride)
	nb := n / 256
	var buf [kChunk * kRec]byte
	for c := range cols {
		act := a[c*aStride : c*aStride+ActQ8K.RowBytes(n)]
		o := out[c*outStride : c*outStride+rows]
		if nb == 0 {
			clear(o)
		}
		for b0 := 0; b0 < nb; b0 += kChunk {
			b1 := min(nb, b0+kChunk)
			for b := b0; b < b1; b++ {
				packK(buf[(b-b0)*kRec:(b-b0+1)*kRec], act, n, b)
			}
			p := buf[:(b1-b0)*kRec]
			for r := range o {
				var acc float32
				if b0 > 0 {
					acc = o[r]
				}
				wr := w[r*wStride+b0*kt.bytes : r*wStride+b1*kt.bytes]
				switch kt.t {
				case gguf.Q4_K:
					acc = runQ4K(wr, p, acc)
				case gguf.Q5_K:
					acc = runQ5K(wr, p, acc)
				case gguf.Q6_K:
					acc = runQ6K(wr, p, acc)
				}
				o[r] = acc
			}
		}
	}
}

// packK writes the record of super-block b of the ActQ8K row act (n
// values).
func packK(rec, act []byte, n, b int) {
	rec = rec[:kRec]
	q := act[256*b : 256*b+256]
	sq := func(i int) uint64 { return uint64(int64(int8(q[i]))) }
	for v := 0; v < 256; v += 8 {
		binary.LittleEndian.PutUint64(rec[2*v:], sq(v)<<48+sq(v+2)<<32+sq(v+4)<<16+sq(v+6))
		binary.LittleEndian.PutUint64(rec[2*v+8:], sq(v+1)<<48+sq(v+3)<<32+sq(v+5)<<16+sq(v+7))
	}
	nb := n / 256
	copy(rec[512:544], act[n+4*nb+32*b:n+4*nb+32*b+32])
	copy(rec[544:548], act[n+4*b:n+4*b+4])
}

// kTop returns the sum in the top lane of an accumulator started at kBias.
func kTop(acc uint64) int32 { return int32(int64(acc) >> 48) }

// bsum returns the activations' 16-value sum g from a packed record.
func bsum(x *[kRec]byte, g int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(x[512+2*g:])))
}

// runQ4K adds the Q4_K super-blocks w times their packed activations p to
// acc in order. Each 32 bytes of nibbles hold sub-blocks 2h (low nibbles)
// and 2h+1 (high nibbles), each 8 bytes of them four words of weights.
func runQ4K(w, p []byte, acc float32) float32 {
	for len(w) >= q4KBytes && len(p) >= kRec {
		v := (*[q4KBytes]byte)(w)
		x := (*[kRec]byte)(p)
		var sc, mn [8]int32
		k4Unpack(v[4:16], &sc, &mn)
		var dot, off int32
		for h := range 4 {
			qs := v[16+32*h : 48+32*h]
			pw := x[128*h : 128*h+128]
			var lo, hi int32
			for half := range 2 { // 16 bytes: two words, 16 values of each sub-block
				l := 16 * half
				h2 := 64 + 2*l // offset of the high nibbles' words
				y0 := binary.LittleEndian.Uint64(qs[l:])
				y1 := binary.LittleEndian.Uint64(qs[l+8:])
				const m4 = 0x000f000f000f000f
				var tl, th uint64 = kBias, kBias
				tl += (y0&m4)*binary.LittleEndian.Uint64(pw[2*l:]) + (y0>>8&m4)*binary.LittleEndian.Uint64(pw[2*l+8:])
				tl += (y1&m4)*binary.LittleEndian.Uint64(pw[2*l+16:]) + (y1>>8&m4)*binary.LittleEndian.Uint64(pw[2*l+24:])
				th += (y0>>4&m4)*binary.LittleEndian.Uint64(pw[h2:]) + (y0>>12&m4)*binary.LittleEndian.Uint64(pw[h2+8:])
				th += (y1>>4&m4)*binary.LittleEndian.Uint64(pw[h2+16:]) + (y1>>12&m4)*binary.LittleEndian.Uint64(pw[h2+24:])
				lo += kTop(tl)
				hi += kTop(th)
			}
			dot += sc[2*h]*lo + sc[2*h+1]*hi
		}
		for j := range 8 {
			off += mn[j] * (bsum(x, 2*j) + bsum(x, 2*j+1))
		}
		d, dm := halfBits(uint32(v[0])|uint32(v[1])<<8), halfBits(uint32(v[2])|uint32(v[3])<<8)
		da := math.Float32frombits(binary.LittleEndian.Uint32(x[544:]))
		acc += da * (d*float32(dot) - dm*float32(off))
		w, p = w[q4KBytes:], p[kRec:]
	}
	return acc
}

// k4Unpack decodes the eight 6-bit scales and mins of a Q4_K or Q5_K
// super-block (q4KScale).
func k4Unpack(s []byte, sc, mn *[8]int32) {
	s = s[:12]
	for j := range 4 {
		sc[j], mn[j] = int32(s[j]&63), int32(s[j+4]&63)
		sc[j+4] = int32(s[j+8]&15 | s[j]>>6<<4)
		mn[j+4] = int32(s[j+8]>>4 | s[j+4]>>6<<4)
	}
}

// runQ5K is runQ4K for Q5_K: the fifth bits (bit j of qh[l] for value
// 32j+l) go in words of their own, against the same activations, into one
// accumulator per sub-block (at most 32 products of 0 or 1 with int8).
func runQ5K(w, p []byte, acc float32) float32 {
	for len(w) >= q5KBytes && len(p) >= kRec {
		v := (*[q5KBytes]byte)(w)
		x := (*[kRec]byte)(p)
		var sc, mn [8]int32
		k4Unpack(v[4:16], &sc, &mn)
		qh := v[16:48]
		var dot, off int32
		for h := range 4 {
			qs := v[48+32*h : 80+32*h]
			pw := x[128*h : 128*h+128]
			var lo, hi int32
			var bl, bh uint64 = kBias, kBias // fifth bits of sub-blocks 2h, 2h+1
			for half := range 2 {
				l := 16 * half
				h2 := 64 + 2*l
				y0 := binary.LittleEndian.Uint64(qs[l:])
				y1 := binary.LittleEndian.Uint64(qs[l+8:])
				z0 := binary.LittleEndian.Uint64(qh[l:]) >> (2 * h)
				z1 := binary.LittleEndian.Uint64(qh[l+8:]) >> (2 * h)
				const m4, m1 = 0x000f000f000f000f, 0x0001000100010001
				p0, p1 := binary.LittleEndian.Uint64(pw[2*l:]), binary.LittleEndian.Uint64(pw[2*l+8:])
				p2, p3 := binary.LittleEndian.Uint64(pw[2*l+16:]), binary.LittleEndian.Uint64(pw[2*l+24:])
				q0, q1 := binary.LittleEndian.Uint64(pw[h2:]), binary.LittleEndian.Uint64(pw[h2+8:])
				q2, q3 := binary.LittleEndian.Uint64(pw[h2+16:]), binary.LittleEndian.Uint64(pw[h2+24:])
				var tl, th uint64 = kBias, kBias
				tl += (y0&m4)*p0 + (y0>>8&m4)*p1 + (y1&m4)*p2 + (y1>>8&m4)*p3
				th += (y0>>4&m4)*q0 + (y0>>12&m4)*q1 + (y1>>4&m4)*q2 + (y1>>12&m4)*q3
				bl += (z0&m1)*p0 + (z0>>8&m1)*p1 + (z1&m1)*p2 + (z1>>8&m1)*p3
				bh += (z0>>1&m1)*q0 + (z0>>9&m1)*q1 + (z1>>1&m1)*q2 + (z1>>9&m1)*q3
				lo += kTop(tl)
				hi += kTop(th)
			}
			dot += sc[2*h]*(lo+16*kTop(bl)) + sc[2*h+1]*(hi+16*kTop(bh))
		}
		for j := range 8 {
			off += mn[j] * (bsum(x, 2*j) + bsum(x, 2*j+1))
		}
		d, dm := halfBits(uint32(v[0])|uint32(v[1])<<8), halfBits(uint32(v[2])|uint32(v[3])<<8)
		da := math.Float32frombits(binary.LittleEndian.Uint32(x[544:]))
		acc += da * (d*float32(dot) - dm*float32(off))
		w, p = w[q5KBytes:], p[kRec:]
	}
	return acc
}

// runQ6K is runQ4K for Q6_K: value 128h+32j+l has its low four bits in
// ql[64h+32(j&1)+l] (the high nibble for j ≥ 2) and its top two bits in
// qh[32h+l] at bit 2j. The low and high parts of each 16 values go to
// accumulators of their own (the whole 6-bit values would allow only one
// product per accumulator), summed as lo + 16·hi.
func runQ6K(w, p []byte, acc float32) float32 {
	for len(w) >= q6KBytes && len(p) >= kRec {
		v := (*[q6KBytes]byte)(w)
		x := (*[kRec]byte)(p)
		var dot, off int32
		for h := range 2 {
			for half := range 2 { // l in [16·half, 16·half+16)
				l := 16 * half
				ya0 := binary.LittleEndian.Uint64(v[64*h+l:])
				ya1 := binary.LittleEndian.Uint64(v[64*h+l+8:])
				yb0 := binary.LittleEndian.Uint64(v[64*h+32+l:])
				yb1 := binary.LittleEndian.Uint64(v[64*h+32+l+8:])
				z0 := binary.LittleEndian.Uint64(v[128+32*h+l:])
				z1 := binary.LittleEndian.Uint64(v[128+32*h+l+8:])
				const m4, m2 = 0x000f000f000f000f, 0x0003000300030003
				for j := range 4 {
					// values 128h+32j+l..+15: group 8h+2j+half
					var y0, y1 uint64
					switch j {
					case 0:
						y0, y1 = ya0, ya1
					case 1:
						y0, y1 = yb0, yb1
					case 2:
						y0, y1 = ya0>>4, ya1>>4
					default:
						y0, y1 = yb0>>4, yb1>>4
					}
					pv := 2 * (128*h + 32*j + l)
					p0, p1 := binary.LittleEndian.Uint64(x[pv:]), binary.LittleEndian.Uint64(x[pv+8:])
					p2, p3 := binary.LittleEndian.Uint64(x[pv+16:]), binary.LittleEndian.Uint64(x[pv+24:])
					zs0, zs1 := z0>>(2*j), z1>>(2*j)
					var tl, th uint64 = kBias, kBias
					tl += (y0&m4)*p0 + (y0>>8&m4)*p1 + (y1&m4)*p2 + (y1>>8&m4)*p3
					th += (zs0&m2)*p0 + (zs0>>8&m2)*p1 + (zs1&m2)*p2 + (zs1>>8&m2)*p3
					g := 8*h + 2*j + half
					sc := int32(int8(v[192+g]))
					dot += sc * (kTop(tl) + 16*kTop(th))
					off += 32 * sc * bsum(x, g)
				}
			}
		}
		d := halfBits(uint32(v[208]) | uint32(v[209])<<8)
		da := math.Float32frombits(binary.LittleEndian.Uint32(x[544:]))
		acc += da * (d*float32(dot) - d*float32(off))
		w, p = w[q6KBytes:], p[kRec:]
	}
	return acc
}
