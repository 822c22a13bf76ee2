package gguf

import (
	"encoding/binary"
	"math"
)

// Search candidates per type: the levels at which the largest element of a
// group is tried (fitSym) and the extra levels the range is spread over
// (fitMin). More candidates lower the error a little and cost time in
// proportion; these were chosen by measuring both on Gaussian rows.
var (
	search4 = symSearch{neg: []float32{-0.6, -0.3, 0, 0.3, 0.6, 0.9}, pos: []float32{0}}
	search5 = symSearch{neg: []float32{-1, -0.5, 0, 0.5, 1}, pos: []float32{0}}
	search3 = symSearch{neg: []float32{-0.5, -0.25, 0, 0.25, 0.5, 0.75}, pos: []float32{-0.25, 0.25}}
	search6 = symSearch{neg: []float32{-1, 0, 1}}
	range2  = []float32{-0.5, 0, 0.5, 1}
	range4  = []float32{-1, -0.5, 0, 0.5, 1}
	range5  = []float32{-1, 0, 1}
)

// encodeQ4_0 writes d and q + 8 in nibbles (element j low, j+16 high).
func encodeQ4_0(dst []byte, x []float32) {
	id := inverse(putHalf(dst, fitSym(x, -8, 7, search4)))
	for j := range 16 {
		lo := level(x[j]*id, -8, 7) + 8
		hi := level(x[j+16]*id, -8, 7) + 8
		dst[2+j] = byte(lo) | byte(hi)<<4
	}
}

// encodeQ4_1 writes d, m and q in nibbles for x ≈ d·q + m.
func encodeQ4_1(dst []byte, x []float32) {
	a, o := fitMin(x, 15, false, range4)
	id := inverse(putHalf(dst, a))
	m := putHalf(dst[2:], o)
	for j := range 16 {
		lo := level((x[j]-m)*id, 0, 15)
		hi := level((x[j+16]-m)*id, 0, 15)
		dst[4+j] = byte(lo) | byte(hi)<<4
	}
}

// encodeQ5_0 writes d, the fifth bits and the nibbles of q + 16.
func encodeQ5_0(dst []byte, x []float32) {
	id := inverse(putHalf(dst, fitSym(x, -16, 15, search5)))
	var qh uint32
	for j := range 16 {
		lo := uint32(level(x[j]*id, -16, 15) + 16)
		hi := uint32(level(x[j+16]*id, -16, 15) + 16)
		dst[6+j] = byte(lo&15) | byte(hi&15)<<4
		qh |= lo>>4<<j | hi>>4<<(j+16)
	}
	binary.LittleEndian.PutUint32(dst[2:], qh)
}

// encodeQ5_1 writes d, m, the fifth bits and the nibbles of q.
func encodeQ5_1(dst []byte, x []float32) {
	a, o := fitMin(x, 31, false, range5)
	id := inverse(putHalf(dst, a))
	m := putHalf(dst[2:], o)
	var qh uint32
	for j := range 16 {
		lo := uint32(level((x[j]-m)*id, 0, 31))
		hi := uint32(level((x[j+16]-m)*id, 0, 31))
		dst[8+j] = byte(lo&15) | byte(hi&15)<<4
		qh |= lo>>4<<j | hi>>4<<(j+16)
	}
	binary.LittleEndian.PutUint32(dst[4:], qh)
}

// encodeQ8_0 writes d = max|x|/127 and q in [−127, 127]: with 255 levels
// the rounding error dominates and a scale search gains nothing.
func encodeQ8_0(dst []byte, x []float32) {
	amax, _ := absMax(x)
	id := inverse(putHalf(dst, amax/127))
	for j, v := range x[:32] {
		dst[2+j] = byte(int8(level(v*id, -127, 127)))
	}
}

// encodeQ8_1 is encodeQ8_0 plus s = d·Σq.
func encodeQ8_1(dst []byte, x []float32) {
	amax, _ := absMax(x)
	d := putHalf(dst, amax/127)
	id := inverse(d)
	var sum float32
	for j, v := range x[:32] {
		q := level(v*id, -127, 127)
		sum += q
		dst[4+j] = byte(int8(q))
	}
	putHalf(dst[2:], d*sum)
}

// encodeQ8K writes a float32 d = max|x|/127, q in [−127, 127] and the sums
// of q over each group of 16.
func encodeQ8K(dst []byte, x []float32) {
	amax, _ := absMax(x)
	d := amax / 127
	for math.IsInf(float64(d*127), 0) { // keep ±127·d finite
		d = math.Nextafter32(d, 0)
	}
	binary.LittleEndian.PutUint32(dst, math.Float32bits(d))
	id := inverse(d)
	for g := range 16 {
		var sum int
		for l := range 16 {
			q := int8(level(x[16*g+l]*id, -127, 127))
			dst[4+16*g+l] = byte(q)
			sum += int(q)
		}
		binary.LittleEndian.PutUint16(dst[260+2*g:], uint16(int16(sum)))
	}
}

// kMinBlock is a K-quant super-block with mins, before packing: the
// float16 scales and, per group, the scale and min integers and the levels.
type kMinBlock struct {
	d, dmin [2]byte
	sc, m   [16]uint8
	q       [QK]uint8
}

// fitKMin quantises a super-block as groups of size elements with levels
// 0–qmax, y = d·sc·q − dmin·m, sc and m in 0–smax. Each group's scale and
// min come from fitMin; d and dmin put the largest of each at smax. Every
// group then tries the scale integer nearest its own scale and the two
// beside it (a group much smaller than the largest has few bits of scale
// left, and rounding the scale moves its levels); each is paired with the
// min integer that best fits its levels, and the pair with the least
// squared error is kept.
func fitKMin(k *kMinBlock, x []float32, size int, qmax, smax float32, cands []float32) {
	var a, b [16]float32
	groups := QK / size
	var amax, bmax float32
	for g := range groups {
		ag, og := fitMin(x[g*size:(g+1)*size], qmax, true, cands)
		a[g], b[g] = ag, -og
		amax, bmax = max(amax, a[g]), max(bmax, b[g])
	}
	f := kFit{d: putHalf(k.d[:], amax/smax), dmin: putHalf(k.dmin[:], bmax/smax), qmax: qmax, smax: smax, n: float32(size)}
	for g := range groups {
		xg, qg := x[g*size:(g+1)*size], k.q[g*size:(g+1)*size]
		s0 := level(a[g]*inverse(f.d), 0, smax)
		m0 := level(b[g]*inverse(f.dmin), 0, smax)
		best, sc, m := f.try(qg, xg, s0, m0, float32(math.Inf(1)), s0, m0)
		for _, s1 := range [2]float32{s0 - 1, s0 + 1} {
			if s1 >= 0 && s1 <= smax {
				best, sc, m = f.try(qg, xg, s1, m0, best, sc, m)
			}
		}
		k.sc[g], k.m[g] = uint8(sc), uint8(m)
	}
}

// kFit holds a super-block's stored scales while fitKMin tries integers.
type kFit struct {
	d, dmin, qmax, smax, n float32
}

// try quantises group x with scale integer sc and min integer m, then with
// the min integer that best fits the levels, and writes the better levels
// into q when one beats best; it returns the best error and integers.
func (f *kFit) try(q []uint8, x []float32, sc, m, best, bsc, bm float32) (float32, float32, float32) {
	var buf [maxGroup]uint8
	l := buf[:len(x)]
	a := f.d * sc
	e, r := minLevels(l, x, a, f.dmin*m, f.qmax)
	if e <= best { // ≤: the first try wins even when its error overflows
		best, bsc, bm = e, sc, m
		copy(q, l)
	}
	// The best min for these levels is the mean of a·q − x.
	if m2 := level(r/f.n*inverse(f.dmin), 0, f.smax); m2 != m {
		if e2, _ := minLevels(l, x, a, f.dmin*m2, f.qmax); e2 < best {
			best, bsc, bm = e2, sc, m2
			copy(q, l)
		}
	}
	return best, bsc, bm
}

// minLevels sets q to the levels nearest x under y = a·q − b and returns
// the squared error and Σ(a·q − x).
func minLevels(q []uint8, x []float32, a, b, qmax float32) (e, sum float32) {
	ia := inverse(a)
	for i, v := range x {
		l := level((v+b)*ia, 0, qmax)
		q[i] = uint8(l)
		aq := a * l
		sum += aq - v
		r := v - (aq - b)
		e += r * r
	}
	return e, sum
}

// encodeQ2K packs groups of 16 with 2-bit levels and 4-bit scales and mins.
func encodeQ2K(dst []byte, x []float32) {
	var k kMinBlock
	fitKMin(&k, x, 16, 3, 15, range2)
	for g := range 16 {
		dst[g] = k.sc[g] | k.m[g]<<4
	}
	qs := dst[16:80]
	clear(qs)
	for i, q := range k.q {
		n, j, l := i/128, i%128/32, i%32
		qs[32*n+l] |= q << (2 * j)
	}
	copy(dst[80:], k.d[:])
	copy(dst[82:], k.dmin[:])
}

// packKScales stores eight 6-bit scales and mins in 12 bytes as Q4_K and
// Q5_K lay them out.
func packKScales(s []byte, sc, m *[16]uint8) {
	for g := range 4 {
		s[g] = sc[g] | sc[g+4]>>4<<6
		s[g+4] = m[g] | m[g+4]>>4<<6
		s[g+8] = sc[g+4]&15 | m[g+4]&15<<4
	}
}

// encodeQ4K packs eight groups of 32 with 4-bit levels and 6-bit scales
// and mins.
func encodeQ4K(dst []byte, x []float32) { encodeK45(dst, x, false) }

// encodeQ5K is encodeQ4K with 5-bit levels, the fifth bit of element
// 32g + l in bit g of qh[l].
func encodeQ5K(dst []byte, x []float32) { encodeK45(dst, x, true) }

// encodeK45 writes a Q4_K block, or with five a Q5_K block (whose fifth
// bits sit before the nibbles).
func encodeK45(dst []byte, x []float32, five bool) {
	var k kMinBlock
	qs := dst[16:144]
	if five {
		fitKMin(&k, x, 32, 31, 63, range5)
		qh := dst[16:48]
		clear(qh)
		for i, q := range k.q {
			qh[i%32] |= q >> 4 << (i / 32)
		}
		qs = dst[48:176]
	} else {
		fitKMin(&k, x, 32, 15, 63, range4)
	}
	copy(dst, k.d[:])
	copy(dst[2:], k.dmin[:])
	packKScales(dst[4:16], &k.sc, &k.m)
	for c := range 4 {
		for l := range 32 {
			qs[32*c+l] = k.q[64*c+l]&15 | k.q[64*c+32+l]&15<<4
		}
	}
}

// kSymBlock is a symmetric K-quant super-block before packing: the
// float16 d and, per group of 16, the signed scale and the signed levels.
type kSymBlock struct {
	d  [2]byte
	sc [16]int8
	q  [QK]int8
}

// fitKSym quantises a super-block as 16 groups of 16 with levels lo–hi,
// y = d·sc·q, sc in slo–shi. Each group's scale comes from fitSym; d puts
// the scale of largest magnitude at slo; every group then gets the levels
// nearest under its stored scale, and a least-squares pass proposes a new
// scale integer, kept if it lowers the group's error.
func fitKSym(k *kSymBlock, x []float32, lo, hi, slo, shi float32, s symSearch) {
	var sg [16]float32
	var ext, amax float32
	for g := range 16 {
		sg[g] = fitSym(x[16*g:16*g+16], lo, hi, s)
		if a := float32(math.Abs(float64(sg[g]))); a > amax {
			amax, ext = a, sg[g]
		}
	}
	d := putHalf(k.d[:], ext/slo)
	id := inverse(d)
	for g := range 16 {
		xg, qg := x[16*g:16*g+16], k.q[16*g:16*g+16]
		sc := level(sg[g]*id, slo, shi)
		e := symLevels(qg, xg, d*sc, lo, hi)
		var sxq, sqq float32
		for i, v := range xg {
			q := float32(qg[i])
			sxq, sqq = sxq+v*q, sqq+q*q
		}
		if sqq > 0 {
			if sc2 := level(sxq/sqq*id, slo, shi); sc2 != sc {
				var alt [16]int8
				if e2 := symLevels(alt[:], xg, d*sc2, lo, hi); e2 < e {
					copy(qg, alt[:])
					sc = sc2
				}
			}
		}
		k.sc[g] = int8(sc)
	}
}

// symLevels sets q to the levels nearest x under y = a·q and returns the
// squared error.
func symLevels(q []int8, x []float32, a, lo, hi float32) float32 {
	ia := inverse(a)
	var e float32
	for i, v := range x {
		l := level(v*ia, lo, hi)
		q[i] = int8(l)
		r := v - a*l
		e += r * r
	}
	return e
}

// encodeQ3K packs 16 groups of 16 with levels −4–3 (two low bits in qs,
// the third in hmask) and 6-bit scales offset by 32.
func encodeQ3K(dst []byte, x []float32) {
	var k kSymBlock
	fitKSym(&k, x, -4, 3, -32, 31, search3)
	hm, qs, sc := dst[:32], dst[32:96], dst[96:108]
	clear(dst[:108])
	for i, q := range k.q {
		n, j, l := i/128, i%128/32, i%32
		u := uint8(q + 4)
		qs[32*n+l] |= u & 3 << (2 * j)
		hm[l] |= u >> 2 << (4*n + j)
	}
	for g, s := range k.sc {
		u := uint8(s + 32)
		sc[g%8] |= u & 15 << (4 * (g / 8))
		sc[8+g%4] |= u >> 4 << (2 * (g / 4))
	}
	copy(dst[108:], k.d[:])
}

// encodeQ6K packs 16 groups of 16 with levels −32–31 (low nibbles in ql,
// top two bits in qh) and int8 scales.
func encodeQ6K(dst []byte, x []float32) {
	var k kSymBlock
	fitKSym(&k, x, -32, 31, -128, 127, search6)
	ql, qh := dst[:128], dst[128:192]
	clear(dst[:192])
	for i, q := range k.q {
		n, j, l := i/128, i%128/32, i%32
		u := uint8(q + 32)
		ql[64*n+32*(j&1)+l] |= u & 15 << (4 * (j >> 1))
		qh[32*n+l] |= u >> 4 << (2 * j)
	}
	for g, s := range k.sc {
		dst[192+g] = byte(s)
	}
	copy(dst[208:], k.d[:])
}
