package kernels

import (
	"encoding/binary"
	"math"
	"sync"
)

// The lean paths of the Q8_0, Q5_0 and Q4_0 kernels: while track's bound
// holds (as it does along the rows of a model's weights), a row chunk's
// blocks go through a loop with nothing but the scale, the bound's sums,
// the integer sums and the float accumulation in it, the lanes held in
// float64 registers (float32 values: each sum is rounded to float32 and
// back), and no branch. The bound is track's with two changes that leave
// its argument as it is: the sum of the scales' magnitudes is kept in
// float64 (l.wide, closer to the exact sum than track's float32 sum), and
// it is checked once, after the chunk: the sum only grows and the smallest
// exponent only shrinks, so if the bound holds after the chunk it held
// after each of its blocks. If it does not hold, the chunk's lanes are
// dropped and the careful kernel (carefulQ8_0, ...) adds the chunk, and
// the rest of the row, checking ties. The block scales' halves are decoded
// by table (halfTable), and Q5_0's fifth bits spread by table
// (spreadTab): each a load or two where the arithmetic takes a dozen
// operations, in loops whose speed is their count of integer operations.

// runLean adds a row chunk of Q8_0, Q5_0 or Q4_0 blocks (bb, the block
// size, tells which) to l, with carefulQ8_0's results.
func runLean(w, p []byte, l *lanes, bb int) (int, int) {
	if !l.careful {
		var ok bool
		switch bb {
		case 34:
			ok = leanQ8_0(w, p, l)
		case 22:
			ok = leanQ5_0(w, p, l)
		default:
			ok = leanQ4_0(w, p, l)
		}
		if ok {
			return len(w) / bb, 0
		}
		l.careful = true
	}
	switch bb {
	case 34:
		return carefulQ8_0(w, p, l)
	case 22:
		return carefulQ5_0(w, p, l)
	}
	return carefulQ4_0(w, p, l)
}

func runQ8_0(w, p []byte, l *lanes) (int, int) { return runLean(w, p, l, 34) }
func runQ5_0(w, p []byte, l *lanes) (int, int) { return runLean(w, p, l, 22) }
func runQ4_0(w, p []byte, l *lanes) (int, int) { return runLean(w, p, l, 18) }

// q8dot returns the sum of the two products of the signed 16-bit lanes of
// e with the packed activations x (see the Q8_0 records).
func q8dot(e, x uint64) int64 { return int64(e*x+1<<47) >> 48 }

// spreadTab[h] is the fifth bits of two groups, those of qh byte h:
// spread4(h&15) and spread4(h>>4).
var spreadTab = func() (t [256][2]uint64) {
	for h := range t {
		t[h] = [2]uint64{spread4(uint64(h & 15)), spread4(uint64(h >> 4))}
	}
	return t
}()

// ndot returns the sum in the top lane of the weights g times the packed
// activations x (P_g) plus their offset and bias k (K_g).
func ndot(g, x, k uint64) int64 { return int64(g*x+k) >> 48 }

// halfTab[h] is halfBits(h), filled on first use by halfTable.
var (
	halfTab     *[1 << 16]float32
	halfTabOnce sync.Once
)

// halfTable returns the table of half-precision values: one load for the
// lean kernels' scales instead of halfBits' dozen operations.
func halfTable() *[1 << 16]float32 {
	halfTabOnce.Do(func() {
		t := new([1 << 16]float32)
		for h := range t {
			t[h] = halfBits(uint32(h))
		}
		halfTab = t
	})
	return halfTab
}

// boundLim returns the largest sum of scale magnitudes for which track's
// bound holds given the smallest exponent field emin (at least 1) and
// lane sums of magnitude at most 2^logS.
func boundLim(emin, logS uint32) float64 {
	return float64(math.Float32frombits(min(emin+28-logS, 254) << 23))
}

// leanQ8_0 adds the Q8_0 blocks w times their packed activations p to l's
// lanes and reports whether the bound holds after them (see above); if it
// does not, it leaves l as it was.
func leanQ8_0(w, p []byte, l *lanes) bool {
	sum, emin := l.wide, l.emin
	ht := halfTable()
	a0, a1, a2, a3 := float64(l.acc[0]), float64(l.acc[1]), float64(l.acc[2]), float64(l.acc[3])
	a4, a5, a6, a7 := float64(l.acc[4]), float64(l.acc[5]), float64(l.acc[6]), float64(l.acc[7])
	for len(w) >= 34 && len(p) >= 132 {
		v := (*[34]byte)(w)
		x := (*[132]byte)(p)
		scf := ht[binary.LittleEndian.Uint16(v[0:])] * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		mag := math.Float32bits(scf) &^ (1 << 31)
		e := mag >> 23
		if mag == 0 {
			e = 255
		}
		emin = min(emin, max(e, 1))
		sum += float64(math.Float32frombits(mag))
		s := float64(scf)
		const m, bias, flip = 0x00ff00ff00ff00ff, 0x0080008000800080, 0x8080808080808080
		x0 := binary.LittleEndian.Uint64(v[2:]) ^ flip
		x1 := binary.LittleEndian.Uint64(v[10:]) ^ flip
		e0, o0 := x0&m-bias, x0>>8&m-bias
		e1, o1 := x1&m-bias, x1>>8&m-bias
		s0 := q8dot(e0, binary.LittleEndian.Uint64(x[0:])) + q8dot(o0, binary.LittleEndian.Uint64(x[8:]))
		s1 := q8dot(e0, binary.LittleEndian.Uint64(x[16:])) + q8dot(o0, binary.LittleEndian.Uint64(x[24:]))
		s2 := q8dot(e1, binary.LittleEndian.Uint64(x[32:])) + q8dot(o1, binary.LittleEndian.Uint64(x[40:]))
		s3 := q8dot(e1, binary.LittleEndian.Uint64(x[48:])) + q8dot(o1, binary.LittleEndian.Uint64(x[56:]))
		a0 = float64(float32(float64(s0)*s + a0))
		a1 = float64(float32(float64(s1)*s + a1))
		a2 = float64(float32(float64(s2)*s + a2))
		a3 = float64(float32(float64(s3)*s + a3))
		x2 := binary.LittleEndian.Uint64(v[18:]) ^ flip
		x3 := binary.LittleEndian.Uint64(v[26:]) ^ flip
		e2, o2 := x2&m-bias, x2>>8&m-bias
		e3, o3 := x3&m-bias, x3>>8&m-bias
		s4 := q8dot(e2, binary.LittleEndian.Uint64(x[64:])) + q8dot(o2, binary.LittleEndian.Uint64(x[72:]))
		s5 := q8dot(e2, binary.LittleEndian.Uint64(x[80:])) + q8dot(o2, binary.LittleEndian.Uint64(x[88:]))
		s6 := q8dot(e3, binary.LittleEndian.Uint64(x[96:])) + q8dot(o3, binary.LittleEndian.Uint64(x[104:]))
		s7 := q8dot(e3, binary.LittleEndian.Uint64(x[112:])) + q8dot(o3, binary.LittleEndian.Uint64(x[120:]))
		a4 = float64(float32(float64(s4)*s + a4))
		a5 = float64(float32(float64(s5)*s + a5))
		a6 = float64(float32(float64(s6)*s + a6))
		a7 = float64(float32(float64(s7)*s + a7))
		w, p = w[34:], p[132:]
	}
	if !(sum <= boundLim(emin, 16)) {
		return false
	}
	l.acc = [8]float32{float32(a0), float32(a1), float32(a2), float32(a3), float32(a4), float32(a5), float32(a6), float32(a7)}
	l.wide, l.emin, l.sum = sum, emin, float32(sum)
	return true
}

// leanQ5_0 is leanQ8_0 for Q5_0, its fifth bits spread by table.
func leanQ5_0(w, p []byte, l *lanes) bool {
	sum, emin := l.wide, l.emin
	ht := halfTable()
	a0, a1, a2, a3 := float64(l.acc[0]), float64(l.acc[1]), float64(l.acc[2]), float64(l.acc[3])
	a4, a5, a6, a7 := float64(l.acc[4]), float64(l.acc[5]), float64(l.acc[6]), float64(l.acc[7])
	tab := &spreadTab
	for len(w) >= 22 && len(p) >= 136 {
		v := (*[22]byte)(w)
		x := (*[136]byte)(p)
		scf := ht[binary.LittleEndian.Uint16(v[0:])] * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		mag := math.Float32bits(scf) &^ (1 << 31)
		e := mag >> 23
		if mag == 0 {
			e = 255
		}
		emin = min(emin, max(e, 1))
		sum += float64(math.Float32frombits(mag))
		s := float64(scf)
		const m8, m4 = 0x00ff00ff00ff00ff, 0x000f000f000f000f
		y0, y1 := binary.LittleEndian.Uint64(v[6:]), binary.LittleEndian.Uint64(v[14:])
		b0, c0 := y0&m8, y0>>8&m8
		b1, c1 := y1&m8, y1>>8&m8
		g0, g1 := uint64(uint32(b0))|c0<<32, b0>>32|c0&0xffffffff00000000
		g2, g3 := uint64(uint32(b1))|c1<<32, b1>>32|c1&0xffffffff00000000
		h0, h1 := &tab[v[2]], &tab[v[3]]
		s0 := ndot(g0&m4|h0[0], binary.LittleEndian.Uint64(x[0:]), binary.LittleEndian.Uint64(x[8:]))
		s1 := ndot(g1&m4|h0[1], binary.LittleEndian.Uint64(x[16:]), binary.LittleEndian.Uint64(x[24:]))
		s2 := ndot(g2&m4|h1[0], binary.LittleEndian.Uint64(x[32:]), binary.LittleEndian.Uint64(x[40:]))
		s3 := ndot(g3&m4|h1[1], binary.LittleEndian.Uint64(x[48:]), binary.LittleEndian.Uint64(x[56:]))
		a0 = float64(float32(float64(s0)*s + a0))
		a1 = float64(float32(float64(s1)*s + a1))
		a2 = float64(float32(float64(s2)*s + a2))
		a3 = float64(float32(float64(s3)*s + a3))
		h2, h3 := &tab[v[4]], &tab[v[5]]
		s4 := ndot(g0>>4&m4|h2[0], binary.LittleEndian.Uint64(x[64:]), binary.LittleEndian.Uint64(x[72:]))
		s5 := ndot(g1>>4&m4|h2[1], binary.LittleEndian.Uint64(x[80:]), binary.LittleEndian.Uint64(x[88:]))
		s6 := ndot(g2>>4&m4|h3[0], binary.LittleEndian.Uint64(x[96:]), binary.LittleEndian.Uint64(x[104:]))
		s7 := ndot(g3>>4&m4|h3[1], binary.LittleEndian.Uint64(x[112:]), binary.LittleEndian.Uint64(x[120:]))
		a4 = float64(float32(float64(s4)*s + a4))
		a5 = float64(float32(float64(s5)*s + a5))
		a6 = float64(float32(float64(s6)*s + a6))
		a7 = float64(float32(float64(s7)*s + a7))
		w, p = w[22:], p[136:]
	}
	if !(sum <= boundLim(emin, 13)) {
		return false
	}
	l.acc = [8]float32{float32(a0), float32(a1), float32(a2), float32(a3), float32(a4), float32(a5), float32(a6), float32(a7)}
	l.wide, l.emin, l.sum = sum, emin, float32(sum)
	return true
}

// leanQ4_0 is leanQ5_0 for Q4_0, without fifth bits.
func leanQ4_0(w, p []byte, l *lanes) bool {
	sum, emin := l.wide, l.emin
	ht := halfTable()
	a0, a1, a2, a3 := float64(l.acc[0]), float64(l.acc[1]), float64(l.acc[2]), float64(l.acc[3])
	a4, a5, a6, a7 := float64(l.acc[4]), float64(l.acc[5]), float64(l.acc[6]), float64(l.acc[7])
	for len(w) >= 18 && len(p) >= 136 {
		v := (*[18]byte)(w)
		x := (*[136]byte)(p)
		scf := ht[binary.LittleEndian.Uint16(v[0:])] * math.Float32frombits(binary.LittleEndian.Uint32(x[128:]))
		mag := math.Float32bits(scf) &^ (1 << 31)
		e := mag >> 23
		if mag == 0 {
			e = 255
		}
		emin = min(emin, max(e, 1))
		sum += float64(math.Float32frombits(mag))
		s := float64(scf)
		const m8, m4 = 0x00ff00ff00ff00ff, 0x000f000f000f000f
		y0, y1 := binary.LittleEndian.Uint64(v[2:]), binary.LittleEndian.Uint64(v[10:])
		b0, c0 := y0&m8, y0>>8&m8
		b1, c1 := y1&m8, y1>>8&m8
		g0, g1 := uint64(uint32(b0))|c0<<32, b0>>32|c0&0xffffffff00000000
		g2, g3 := uint64(uint32(b1))|c1<<32, b1>>32|c1&0xffffffff00000000
		s0 := ndot(g0&m4, binary.LittleEndian.Uint64(x[0:]), binary.LittleEndian.Uint64(x[8:]))
		s1 := ndot(g1&m4, binary.LittleEndian.Uint64(x[16:]), binary.LittleEndian.Uint64(x[24:]))
		s2 := ndot(g2&m4, binary.LittleEndian.Uint64(x[32:]), binary.LittleEndian.Uint64(x[40:]))
		s3 := ndot(g3&m4, binary.LittleEndian.Uint64(x[48:]), binary.LittleEndian.Uint64(x[56:]))
		a0 = float64(float32(float64(s0)*s + a0))
		a1 = float64(float32(float64(s1)*s + a1))
		a2 = float64(float32(float64(s2)*s + a2))
		a3 = float64(float32(float64(s3)*s + a3))
		s4 := ndot(g0>>4&m4, binary.LittleEndian.Uint64(x[64:]), binary.LittleEndian.Uint64(x[72:]))
		s5 := ndot(g1>>4&m4, binary.LittleEndian.Uint64(x[80:]), binary.LittleEndian.Uint64(x[88:]))
		s6 := ndot(g2>>4&m4, binary.LittleEndian.Uint64(x[96:]), binary.LittleEndian.Uint64(x[104:]))
		s7 := ndot(g3>>4&m4, binary.LittleEndian.Uint64(x[112:]), binary.LittleEndian.Uint64(x[120:]))
		a4 = float64(float32(float64(s4)*s + a4))
		a5 = float64(float32(float64(s5)*s + a5))
		a6 = float64(float32(float64(s6)*s + a6))
		a7 = float64(float32(float64(s7)*s + a7))
		w, p = w[18:], p[136:]
	}
	if !(sum <= boundLim(emin, 12)) {
		return false
	}
	l.acc = [8]float32{float32(a0), float32(a1), float32(a2), float32(a3), float32(a4), float32(a5), float32(a6), float32(a7)}
	l.wide, l.emin, l.sum = sum, emin, float32(sum)
	return true
}
