package kernels

import (
	"encoding/binary"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// The Generic kernels of the 32-value block types (Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1) give refLegacy's bits with eight lanes: per block, the eight sums
// of four products, each added to its lane by fma32 (see the rounding note
// in gofast.go), the min term of Q4_1 and Q5_1 added to lane 0, the lanes
// summed with reduce. The activations of a call are packed per chunk of
// legacyChunk blocks into records that the integer sums multiply against:
//
//	Q8_0:   for each group g of four values, pe_g, po_g (16 bytes), then d
//	        (132 bytes). Word k of the block's weights (values 8k..8k+7)
//	        splits into e (values 8k, 8k+2, 8k+4, 8k+6 in 16-bit lanes) and
//	        o (8k+1, ...); group 2k takes e·pe + o·po with pe = q[8k]·2^48 +
//	        q[8k+2]·2^32 (the lanes of e that are not in the group meet
//	        zeros), group 2k+1 the other two lanes. Each product's top lane
//	        is a sum of two products of magnitude at most 128·127: within
//	        int16 for activations in [-127, 127], which the packer checks.
//	others: for each group g, P_g and K_g (16 bytes), then d and s (136
//	        bytes). The weights of a group sit in the lanes of one word in
//	        the order v, v+2, v+1, v+3 (v = 4g); P_g holds the activations
//	        reversed in that order and K_g = 2^47 - off·Σq·2^48 folds in
//	        the bias and the offset off of the type (8 for Q4_0, 16 for
//	        Q5_0). The top lane is then the group's sum, of magnitude at
//	        most 4·31·128 < 2^15, over lower lanes below 3·31·128·2^32.

const (
	// legacyChunk is the number of blocks per packed chunk of activations.
	legacyChunk = 64
	// legacyRecMax is the largest record of a block's packed activations.
	legacyRecMax = 136
	// legacyTile is the number of rows whose lanes wait between chunks
	// when a row spans several.
	legacyTile = 32
)

// legacyRec returns the record size of type t's packed activations.
func legacyRec(t gguf.TensorType) int {
	if t == gguf.Q8_0 {
		return 132
	}
	return 136
}

// legacyGo returns the Generic kernel of a 32-value block type.
func legacyGo(t gguf.TensorType) MulFunc {
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		mulLegacyGo(t, n, w, wStride, rows, a, aStride, cols, out, outStride)
	}
}

func mulLegacyGo(t gguf.TensorType, n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	bb, nb, rec := legacyBlockBytes(t), n/32, legacyRec(t)
	ab := ActQ8.RowBytes(n)
	checkShape(t.String(), nb*bb, ab, w, wStride, rows, a, aStride, cols, out, outStride)
	var buf [legacyChunk * legacyRecMax]byte
	var st [legacyTile]lanes
	for c := range cols {
		act := a[c*aStride : c*aStride+ab]
		q, ad, s := act[:n], act[n:n+4*nb], act[n+4*nb:]
		if !packable(t, q) {
			refLegacy(t, 8)(n, w, wStride, rows, act, 0, 1, out[c*outStride:], 0)
			continue
		}
		for r0 := 0; r0 < rows; r0 += legacyTile {
			r1 := min(rows, r0+legacyTile)
			for r := r0; r < r1; r++ {
				st[r-r0] = newLanes()
			}
			for b0 := 0; b0 < nb; b0 += legacyChunk {
				b1 := min(nb, b0+legacyChunk)
				if r0 == 0 || nb > legacyChunk {
					for b := b0; b < b1; b++ {
						packLegacy(t, buf[(b-b0)*rec:(b-b0+1)*rec], q[32*b:32*b+32], ad[4*b:], s[4*b:])
					}
				}
				for r := r0; r < r1; r++ {
					wr := w[r*wStride+b0*bb : r*wStride+b1*bb]
					runLegacyRow(t, wr, buf[:(b1-b0)*rec], q[32*b0:], ad[4*b0:], s[4*b0:], &st[r-r0])
				}
			}
			for r := r0; r < r1; r++ {
				out[c*outStride+r] = reduce8(&st[r-r0].acc)
			}
		}
	}
}

// packable reports whether the kernel of type t takes activation values q
// packed: Q8_0's needs them in [-127, 127] (as QuantizeRow makes them).
func packable(t gguf.TensorType, q []byte) bool {
	if t != gguf.Q8_0 {
		return true
	}
	for _, v := range q {
		if v == 0x80 {
			return false
		}
	}
	return true
}

// packLegacy writes the record of one block's activations (q its 32
// values, ad[0:4] its scale, s[0:4] its scaled sum) for type t.
func packLegacy(t gguf.TensorType, rec, q, ad, s []byte) {
	q = q[:32]
	sq := func(i int) uint64 { return uint64(int64(int8(q[i]))) }
	if t == gguf.Q8_0 {
		rec = rec[:132]
		for k := range 4 {
			j := 8 * k
			binary.LittleEndian.PutUint64(rec[32*k:], sq(j)<<48+sq(j+2)<<32)
			binary.LittleEndian.PutUint64(rec[32*k+8:], sq(j+1)<<48+sq(j+3)<<32)
			binary.LittleEndian.PutUint64(rec[32*k+16:], sq(j+4)<<16+sq(j+6))
			binary.LittleEndian.PutUint64(rec[32*k+24:], sq(j+5)<<16+sq(j+7))
		}
		copy(rec[128:132], ad[:4])
		return
	}
	rec = rec[:136]
	off := uint64(0)
	switch t {
	case gguf.Q4_0:
		off = 8
	case gguf.Q5_0:
		off = 16
	}
	for g := range 8 {
		v := 4 * g
		binary.LittleEndian.PutUint64(rec[16*g:], sq(v)<<48+sq(v+2)<<32+sq(v+1)<<16+sq(v+3))
		sum := sq(v) + sq(v+1) + sq(v+2) + sq(v+3)
		binary.LittleEndian.PutUint64(rec[16*g+8:], 1<<47-off*sum<<48)
	}
	copy(rec[128:132], ad[:4])
	copy(rec[132:136], s[:4])
}

// runLegacyRow adds the blocks of one row chunk (wr) to its lanes l: p
// holds the blocks' packed activations and q, ad, s the same activations
// unpacked, for the blocks the reference adds.
func runLegacyRow(t gguf.TensorType, wr, p, q, ad, s []byte, l *lanes) {
	bb, rec := legacyBlockBytes(t), legacyRec(t)
	for len(wr) > 0 {
		var k, lane int
		switch t {
		case gguf.Q8_0:
			k, lane = runQ8_0(wr, p, l)
		case gguf.Q5_0:
			k, lane = runQ5_0(wr, p, l)
		case gguf.Q4_0:
			k, lane = runQ4_0(wr, p, l)
		default:
			k, lane = runMin(t, wr, p, l)
		}
		if k*bb >= len(wr) {
			return
		}
		// block k has a tie: the reference adds it
		wr, p, q, ad, s = wr[k*bb:], p[k*rec:], q[32*k:], ad[4*k:], s[4*k:]
		refLegacyBlock(t, wr[:bb], q, ad, s, lane, &l.acc)
		l.careful = true
		wr, p, q, ad, s = wr[bb:], p[rec:], q[32:], ad[4:], s[4:]
	}
}

// carefulQ8_0 adds Q8_0 blocks w times their packed activations p to l in
// order, stopping before the lanes lane.. of the first block whose sums
// need the reference; it returns that block's index (the number of blocks
// when all are added) and lane.
//
// The block's integer sums, the float accumulation and the tie checks
// share registers in one loop body: split into calls, the lanes would go
// through memory on every block.
func carefulQ8_0(w, p []byte, l *lanes) (int, int) {
	a0, a1, a2, a3, a4, a5, a6, a7 := l.acc[0], l.acc[1], l.acc[2], l.acc[3], l.acc[4], l.acc[5], l.acc[6], l.acc[7]
	sum, lim, emin, careful := l.sum, l.lim, l.emin, l.careful
	k := 0
	for len(w) >= 34 && len(p) >= 132 {
		v := (*[34]byte)(w)
		x := (*[132]byte)(p)
		scf := halfBits(uint32(v[0])|uint32(v[1])<<8) * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		sc := float64(scf)
		if !careful {
			var exact bool
			sum, lim, emin, exact = track(sum, lim, emin, scf, 16)
			careful = !exact
		}
		const m, bias = 0x00ff00ff00ff00ff, 0x0080008000800080
		x0 := binary.LittleEndian.Uint64(v[2:]) ^ 0x8080808080808080
		x1 := binary.LittleEndian.Uint64(v[10:]) ^ 0x8080808080808080
		e0, o0 := x0&m-bias, x0>>8&m-bias
		e1, o1 := x1&m-bias, x1>>8&m-bias
		s0 := int32(int64(e0*binary.LittleEndian.Uint64(x[0:])+1<<47)>>48) + int32(int64(o0*binary.LittleEndian.Uint64(x[8:])+1<<47)>>48)
		s1 := int32(int64(e0*binary.LittleEndian.Uint64(x[16:])+1<<47)>>48) + int32(int64(o0*binary.LittleEndian.Uint64(x[24:])+1<<47)>>48)
		s2 := int32(int64(e1*binary.LittleEndian.Uint64(x[32:])+1<<47)>>48) + int32(int64(o1*binary.LittleEndian.Uint64(x[40:])+1<<47)>>48)
		s3 := int32(int64(e1*binary.LittleEndian.Uint64(x[48:])+1<<47)>>48) + int32(int64(o1*binary.LittleEndian.Uint64(x[56:])+1<<47)>>48)
		t0, t1, t2, t3 := float64(s0)*sc+float64(a0), float64(s1)*sc+float64(a1), float64(s2)*sc+float64(a2), float64(s3)*sc+float64(a3)
		if careful {
			l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			if tie(t0) || tie(t1) || tie(t2) || tie(t3) {
				l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
				return k, 0
			}
		}
		a0, a1, a2, a3 = float32(t0), float32(t1), float32(t2), float32(t3)
		x2 := binary.LittleEndian.Uint64(v[18:]) ^ 0x8080808080808080
		x3 := binary.LittleEndian.Uint64(v[26:]) ^ 0x8080808080808080
		e2, o2 := x2&m-bias, x2>>8&m-bias
		e3, o3 := x3&m-bias, x3>>8&m-bias
		s4 := int32(int64(e2*binary.LittleEndian.Uint64(x[64:])+1<<47)>>48) + int32(int64(o2*binary.LittleEndian.Uint64(x[72:])+1<<47)>>48)
		s5 := int32(int64(e2*binary.LittleEndian.Uint64(x[80:])+1<<47)>>48) + int32(int64(o2*binary.LittleEndian.Uint64(x[88:])+1<<47)>>48)
		s6 := int32(int64(e3*binary.LittleEndian.Uint64(x[96:])+1<<47)>>48) + int32(int64(o3*binary.LittleEndian.Uint64(x[104:])+1<<47)>>48)
		s7 := int32(int64(e3*binary.LittleEndian.Uint64(x[112:])+1<<47)>>48) + int32(int64(o3*binary.LittleEndian.Uint64(x[120:])+1<<47)>>48)
		t4, t5, t6, t7 := float64(s4)*sc+float64(a4), float64(s5)*sc+float64(a5), float64(s6)*sc+float64(a6), float64(s7)*sc+float64(a7)
		if careful {
			l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			if tie(t4) || tie(t5) || tie(t6) || tie(t7) {
				l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
				return k, 4
			}
		}
		a4, a5, a6, a7 = float32(t4), float32(t5), float32(t6), float32(t7)
		w, p = w[34:], p[132:]
		k++
	}
	l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
	l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
	return k, 0
}

// runMin is carefulQ8_0 for the types with a min, Q4_1 and Q5_1: the weights
// of the block's eight groups are spread into one word each (see the
// packed records above), with the fifth bit of Q5_1 moved in by a
// multiplication, and the min term goes to lane 0 after the eight sums.
// Its products m·s are not multiples of the scales' ulps, so the bound of
// track does not cover them: every sum is checked.
func runMin(t gguf.TensorType, w, p []byte, l *lanes) (int, int) {
	a0, a1, a2, a3, a4, a5, a6, a7 := l.acc[0], l.acc[1], l.acc[2], l.acc[3], l.acc[4], l.acc[5], l.acc[6], l.acc[7]
	bb, high := legacyBlockBytes(t), t == gguf.Q5_1
	qs := 4 // offset of the nibbles
	if high {
		qs += 4
	}
	k := 0
	for len(w) >= bb && len(p) >= 136 {
		v := w[:bb]
		x := (*[136]byte)(p)
		scf := halfBits(uint32(v[0])|uint32(v[1])<<8) * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		sc := float64(scf)
		const m8, m4 = 0x00ff00ff00ff00ff, 0x000f000f000f000f
		y0, y1 := binary.LittleEndian.Uint64(v[qs:]), binary.LittleEndian.Uint64(v[qs+8:])
		// bytes 0, 2, 1, 3 and 4, 6, 5, 7 of each word in 16-bit lanes
		b0, c0 := y0&m8, y0>>8&m8
		b1, c1 := y1&m8, y1>>8&m8
		g0, g1 := uint64(uint32(b0))|c0<<32, b0>>32|c0&0xffffffff00000000
		g2, g3 := uint64(uint32(b1))|c1<<32, b1>>32|c1&0xffffffff00000000
		var h, h0, h1, h2, h3 uint64
		if high {
			h = uint64(binary.LittleEndian.Uint32(v[qs-4:]))
			h0, h1, h2, h3 = spread4(h), spread4(h>>4), spread4(h>>8), spread4(h>>12)
		}
		s0 := int32(int64((g0&m4|h0)*binary.LittleEndian.Uint64(x[0:])+binary.LittleEndian.Uint64(x[8:])) >> 48)
		s1 := int32(int64((g1&m4|h1)*binary.LittleEndian.Uint64(x[16:])+binary.LittleEndian.Uint64(x[24:])) >> 48)
		s2 := int32(int64((g2&m4|h2)*binary.LittleEndian.Uint64(x[32:])+binary.LittleEndian.Uint64(x[40:])) >> 48)
		s3 := int32(int64((g3&m4|h3)*binary.LittleEndian.Uint64(x[48:])+binary.LittleEndian.Uint64(x[56:])) >> 48)
		t0, t1, t2, t3 := float64(s0)*sc+float64(a0), float64(s1)*sc+float64(a1), float64(s2)*sc+float64(a2), float64(s3)*sc+float64(a3)
		l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
		if tie(t0) || tie(t1) || tie(t2) || tie(t3) {
			return k, 0
		}
		a0, a1, a2, a3 = float32(t0), float32(t1), float32(t2), float32(t3)
		if high {
			h0, h1, h2, h3 = spread4(h>>16), spread4(h>>20), spread4(h>>24), spread4(h>>28)
		}
		s4 := int32(int64((g0>>4&m4|h0)*binary.LittleEndian.Uint64(x[64:])+binary.LittleEndian.Uint64(x[72:])) >> 48)
		s5 := int32(int64((g1>>4&m4|h1)*binary.LittleEndian.Uint64(x[80:])+binary.LittleEndian.Uint64(x[88:])) >> 48)
		s6 := int32(int64((g2>>4&m4|h2)*binary.LittleEndian.Uint64(x[96:])+binary.LittleEndian.Uint64(x[104:])) >> 48)
		s7 := int32(int64((g3>>4&m4|h3)*binary.LittleEndian.Uint64(x[112:])+binary.LittleEndian.Uint64(x[120:])) >> 48)
		t4, t5, t6, t7 := float64(s4)*sc+float64(a4), float64(s5)*sc+float64(a5), float64(s6)*sc+float64(a6), float64(s7)*sc+float64(a7)
		l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
		if tie(t4) || tie(t5) || tie(t6) || tie(t7) {
			return k, 4
		}
		// the min term goes to lane 0 after the eight sums
		tm := float64(halfBits(uint32(v[2])|uint32(v[3])<<8))*float64(math.Float32frombits(binary.LittleEndian.Uint32(x[132:]))) + float64(a0)
		if tieOrTiny(tm) { // m·s need not be a multiple of 2^-149
			return k, 4
		}
		a0 = float32(tm)
		a4, a5, a6, a7 = float32(t4), float32(t5), float32(t6), float32(t7)
		w, p = w[bb:], p[136:]
		k++
	}
	l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
	return k, 0
}

// carefulQ5_0 is carefulQ8_0 for Q5_0: the weights of the block's eight groups
// are spread into one word each (see the packed records above), with the
// fifth bits moved in by spread4.
func carefulQ5_0(w, p []byte, l *lanes) (int, int) {
	a0, a1, a2, a3, a4, a5, a6, a7 := l.acc[0], l.acc[1], l.acc[2], l.acc[3], l.acc[4], l.acc[5], l.acc[6], l.acc[7]
	sum, lim, emin, careful := l.sum, l.lim, l.emin, l.careful
	k := 0
	for len(w) >= 22 && len(p) >= 136 {
		v := (*[22]byte)(w)
		x := (*[136]byte)(p)
		scf := halfBits(uint32(v[0])|uint32(v[1])<<8) * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		sc := float64(scf)
		if !careful {
			var exact bool
			sum, lim, emin, exact = track(sum, lim, emin, scf, 13)
			careful = !exact
		}
		const m8, m4 = 0x00ff00ff00ff00ff, 0x000f000f000f000f
		y0, y1 := binary.LittleEndian.Uint64(v[6:]), binary.LittleEndian.Uint64(v[14:])
		b0, c0 := y0&m8, y0>>8&m8
		b1, c1 := y1&m8, y1>>8&m8
		g0, g1 := uint64(uint32(b0))|c0<<32, b0>>32|c0&0xffffffff00000000
		g2, g3 := uint64(uint32(b1))|c1<<32, b1>>32|c1&0xffffffff00000000
		h := uint64(binary.LittleEndian.Uint32(v[2:]))
		s0 := int32(int64((g0&m4|spread4(h))*binary.LittleEndian.Uint64(x[0:])+binary.LittleEndian.Uint64(x[8:])) >> 48)
		s1 := int32(int64((g1&m4|spread4(h>>4))*binary.LittleEndian.Uint64(x[16:])+binary.LittleEndian.Uint64(x[24:])) >> 48)
		s2 := int32(int64((g2&m4|spread4(h>>8))*binary.LittleEndian.Uint64(x[32:])+binary.LittleEndian.Uint64(x[40:])) >> 48)
		s3 := int32(int64((g3&m4|spread4(h>>12))*binary.LittleEndian.Uint64(x[48:])+binary.LittleEndian.Uint64(x[56:])) >> 48)
		t0, t1, t2, t3 := float64(s0)*sc+float64(a0), float64(s1)*sc+float64(a1), float64(s2)*sc+float64(a2), float64(s3)*sc+float64(a3)
		if careful {
			l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			if tie(t0) || tie(t1) || tie(t2) || tie(t3) {
				l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
				return k, 0
			}
		}
		a0, a1, a2, a3 = float32(t0), float32(t1), float32(t2), float32(t3)
		s4 := int32(int64((g0>>4&m4|spread4(h>>16))*binary.LittleEndian.Uint64(x[64:])+binary.LittleEndian.Uint64(x[72:])) >> 48)
		s5 := int32(int64((g1>>4&m4|spread4(h>>20))*binary.LittleEndian.Uint64(x[80:])+binary.LittleEndian.Uint64(x[88:])) >> 48)
		s6 := int32(int64((g2>>4&m4|spread4(h>>24))*binary.LittleEndian.Uint64(x[96:])+binary.LittleEndian.Uint64(x[104:])) >> 48)
		s7 := int32(int64((g3>>4&m4|spread4(h>>28))*binary.LittleEndian.Uint64(x[112:])+binary.LittleEndian.Uint64(x[120:])) >> 48)
		t4, t5, t6, t7 := float64(s4)*sc+float64(a4), float64(s5)*sc+float64(a5), float64(s6)*sc+float64(a6), float64(s7)*sc+float64(a7)
		if careful {
			l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			if tie(t4) || tie(t5) || tie(t6) || tie(t7) {
				l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
				return k, 4
			}
		}
		a4, a5, a6, a7 = float32(t4), float32(t5), float32(t6), float32(t7)
		w, p = w[22:], p[136:]
		k++
	}
	l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
	l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
	return k, 0
}

// carefulQ4_0 is carefulQ5_0 for Q4_0, without fifth bits.
func carefulQ4_0(w, p []byte, l *lanes) (int, int) {
	a0, a1, a2, a3, a4, a5, a6, a7 := l.acc[0], l.acc[1], l.acc[2], l.acc[3], l.acc[4], l.acc[5], l.acc[6], l.acc[7]
	sum, lim, emin, careful := l.sum, l.lim, l.emin, l.careful
	k := 0
	for len(w) >= 18 && len(p) >= 136 {
		v := (*[18]byte)(w)
		x := (*[136]byte)(p)
		scf := halfBits(uint32(v[0])|uint32(v[1])<<8) * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		sc := float64(scf)
		if !careful {
			var exact bool
			sum, lim, emin, exact = track(sum, lim, emin, scf, 12)
			careful = !exact
		}
		const m8, m4 = 0x00ff00ff00ff00ff, 0x000f000f000f000f
		y0, y1 := binary.LittleEndian.Uint64(v[2:]), binary.LittleEndian.Uint64(v[10:])
		b0, c0 := y0&m8, y0>>8&m8
		b1, c1 := y1&m8, y1>>8&m8
		g0, g1 := uint64(uint32(b0))|c0<<32, b0>>32|c0&0xffffffff00000000
		g2, g3 := uint64(uint32(b1))|c1<<32, b1>>32|c1&0xffffffff00000000
		s0 := int32(int64((g0&m4)*binary.LittleEndian.Uint64(x[0:])+binary.LittleEndian.Uint64(x[8:])) >> 48)
		s1 := int32(int64((g1&m4)*binary.LittleEndian.Uint64(x[16:])+binary.LittleEndian.Uint64(x[24:])) >> 48)
		s2 := int32(int64((g2&m4)*binary.LittleEndian.Uint64(x[32:])+binary.LittleEndian.Uint64(x[40:])) >> 48)
		s3 := int32(int64((g3&m4)*binary.LittleEndian.Uint64(x[48:])+binary.LittleEndian.Uint64(x[56:])) >> 48)
		t0, t1, t2, t3 := float64(s0)*sc+float64(a0), float64(s1)*sc+float64(a1), float64(s2)*sc+float64(a2), float64(s3)*sc+float64(a3)
		if careful {
			l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			if tie(t0) || tie(t1) || tie(t2) || tie(t3) {
				l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
				return k, 0
			}
		}
		a0, a1, a2, a3 = float32(t0), float32(t1), float32(t2), float32(t3)
		s4 := int32(int64((g0>>4&m4)*binary.LittleEndian.Uint64(x[64:])+binary.LittleEndian.Uint64(x[72:])) >> 48)
		s5 := int32(int64((g1>>4&m4)*binary.LittleEndian.Uint64(x[80:])+binary.LittleEndian.Uint64(x[88:])) >> 48)
		s6 := int32(int64((g2>>4&m4)*binary.LittleEndian.Uint64(x[96:])+binary.LittleEndian.Uint64(x[104:])) >> 48)
		s7 := int32(int64((g3>>4&m4)*binary.LittleEndian.Uint64(x[112:])+binary.LittleEndian.Uint64(x[120:])) >> 48)
		t4, t5, t6, t7 := float64(s4)*sc+float64(a4), float64(s5)*sc+float64(a5), float64(s6)*sc+float64(a6), float64(s7)*sc+float64(a7)
		if careful {
			l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			if tie(t4) || tie(t5) || tie(t6) || tie(t7) {
				l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
				return k, 4
			}
		}
		a4, a5, a6, a7 = float32(t4), float32(t5), float32(t6), float32(t7)
		w, p = w[18:], p[136:]
		k++
	}
	l.acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
	l.sum, l.lim, l.emin, l.careful = sum, lim, emin, careful
	return k, 0
}

// spread4 moves bits 0, 2, 1, 3 of h to bit 4 of the 16-bit lanes 0, 1,
// 2, 3: the fifth bits of a group's values in the lane order of runNibble.
// The multiplier's four shifts (4, 18, 35, 49) send the four bits to
// distinct positions, so no carries arise.
func spread4(h uint64) uint64 {
	return uint64(h&15) * 0x0002000800040010 & 0x0010001000100010
}
