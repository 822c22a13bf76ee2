package gguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// This file checks Dequantize against a reference decoder written from the
// ggml block layouts alone: it computes each element on its own, in float64,
// reading fields through a little-endian bit reader, and shares no code with
// the decoders under test (not even the float16 conversion).

// quantTypes are the block-quantised types Dequantize supports.
var quantTypes = []TensorType{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K}

// allTypes adds the float types.
var allTypes = append([]TensorType{F32, F16, BF16}, quantTypes...)

// field reads n bits of b starting at bit pos, least significant first.
func field(b []byte, pos, n int) int {
	v := 0
	for k := range n {
		p := pos + k
		v |= int(b[p/8]>>(p%8)&1) << k
	}
	return v
}

// refHalf decodes IEEE 754 binary16 in float64.
func refHalf(b []byte) float64 {
	h := int(b[0]) | int(b[1])<<8
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := h>>10&31, h&1023
	switch e {
	case 0:
		return sign * math.Ldexp(float64(m), -24)
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(float64(1024+m), e-25)
}

// refFloat32 decodes a little-endian IEEE 754 binary32 in float64.
func refFloat32(b []byte) float64 {
	u := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	return float64(math.Float32frombits(u))
}

// refElem is element i of one block of type t.
func refElem(t TensorType, x []byte, i int) float64 {
	switch t {
	case F32:
		return refFloat32(x[4*i:])
	case F16:
		return refHalf(x[2*i:])
	case BF16:
		return refFloat32([]byte{0, 0, x[2*i], x[2*i+1]})
	case Q4_0: // d, 16 bytes: element i is nibble i/16 of byte i%16
		return refHalf(x) * float64(field(x[2:], 8*(i%16)+4*(i/16), 4)-8)
	case Q4_1: // d, m, nibbles as Q4_0
		return refHalf(x)*float64(field(x[4:], 8*(i%16)+4*(i/16), 4)) + refHalf(x[2:])
	case Q5_0: // d, 32 high bits, nibbles
		q := field(x[6:], 8*(i%16)+4*(i/16), 4) + 16*field(x[2:], i, 1)
		return refHalf(x) * float64(q-16)
	case Q5_1: // d, m, 32 high bits, nibbles
		q := field(x[8:], 8*(i%16)+4*(i/16), 4) + 16*field(x[4:], i, 1)
		return refHalf(x)*float64(q) + refHalf(x[2:])
	case Q8_0:
		return refHalf(x) * float64(int8(x[2+i]))
	case Q8_1:
		return refHalf(x) * float64(int8(x[4+i]))
	case Q8_K:
		return refFloat32(x) * float64(int8(x[4+i]))
	}
	// K-quants: position within the super-block.
	n, r := i/128, i%128 // half, offset in half
	j, l := r/32, r%32   // quarter of the half, lane
	g := 8*n + 2*j + l/16
	switch t {
	case Q2_K: // scales[16], qs[64], d, dmin
		q := field(x[16:], 8*(32*n+l)+2*j, 2)
		s := x[g]
		return refHalf(x[80:])*float64(s&15)*float64(q) - refHalf(x[82:])*float64(s>>4)
	case Q3_K: // hmask[32], qs[64], scales[12], d
		q := field(x[32:], 8*(32*n+l)+2*j, 2) + 4*field(x, 8*l+4*n+j, 1) - 4
		sc := field(x[96:], 8*(g%8)+4*(g/8), 4) + 16*field(x[104:], 8*(g%4)+2*(g/4), 2) - 32
		return refHalf(x[108:]) * float64(sc) * float64(q)
	case Q4_K, Q5_K: // d, dmin, scales[12], (qh[32],) qs[128]
		g := i / 32 // groups of 32 here
		c, hi := i/64, (i/32)%2
		var sc, m int
		if g < 4 {
			sc, m = field(x[4:], 8*g, 6), field(x[4:], 8*(g+4), 6)
		} else {
			sc = field(x[4:], 8*(g+4), 4) + 16*field(x[4:], 8*(g-4)+6, 2)
			m = field(x[4:], 8*(g+4)+4, 4) + 16*field(x[4:], 8*g+6, 2)
		}
		qs := x[16:]
		extra := 0
		if t == Q5_K {
			qs = x[48:]
			extra = 16 * field(x[16:], 8*(i%32)+g, 1)
		}
		q := field(qs, 8*(32*c+i%32)+4*hi, 4) + extra
		return refHalf(x)*float64(sc)*float64(q) - refHalf(x[2:])*float64(m)
	case Q6_K: // ql[128], qh[64], scales[16] int8, d
		lo := field(x, 8*(64*n+32*(j%2)+l)+4*(j/2), 4)
		hi := field(x[128:], 8*(32*n+l)+2*j, 2)
		return refHalf(x[208:]) * float64(int8(x[192+g])) * float64(lo+16*hi-32)
	}
	panic("no reference for " + t.String())
}

// closeToRef reports whether got is the exact value want rounded once to
// float32: within half a float32 ulp of want (want itself is exact to well
// below that), with NaN and infinities matching.
func closeToRef(got float32, want float64) bool {
	g := float64(got)
	switch {
	case math.IsNaN(want):
		return math.IsNaN(g)
	case math.IsInf(want, 0) || math.Abs(want) > math.MaxFloat32*(1+0x1p-25):
		return math.IsInf(g, int(math.Copysign(1, want)))
	}
	_, e := math.Frexp(want)
	ulp := math.Ldexp(1, max(e-24, -149))
	return math.Abs(g-want) <= ulp/2*(1+0x1p-20)
}

// checkBlocks decodes blocks of type t and compares every element with the
// reference.
func checkBlocks(t testing.TB, typ TensorType, src []byte) {
	t.Helper()
	bs, ts := typ.blockInfo()
	nb := len(src) / ts
	got := make([]float32, nb*bs)
	if err := Dequantize(typ, got, src); err != nil {
		t.Fatal(err)
	}
	for b := range nb {
		blk := src[b*ts : (b+1)*ts]
		for i := range bs {
			if want := refElem(typ, blk, i); !closeToRef(got[b*bs+i], want) {
				t.Fatalf("%s block %x element %d: got %v, reference %v", typ, blk, i, got[b*bs+i], want)
			}
		}
	}
}

// scaleOffsets lists where a type keeps its float16 scales in a block.
func scaleOffsets(t TensorType) []int {
	switch t {
	case Q4_0, Q5_0, Q8_0:
		return []int{0}
	case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K:
		return []int{0, 2}
	case Q2_K:
		return []int{80, 82}
	case Q3_K:
		return []int{108}
	case Q6_K:
		return []int{208}
	}
	return nil
}

// extremeHalves are float16 scales at the edges of the format: largest and
// smallest finite, largest and smallest subnormal, smallest normal, zeros,
// one, each with both signs.
var extremeHalves = []uint16{0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x0000, 0x8000, 0x3C00, 0xBC00, 0x3555}

// TestDequantizeMatchesReferenceExtremeScales decodes random payloads under
// every combination of extreme scales.
func TestDequantizeMatchesReferenceExtremeScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range quantTypes {
		ts := typ.BlockBytes()
		offs := scaleOffsets(typ)
		var src []byte
		addBlock := func(scales ...uint16) {
			blk := make([]byte, ts)
			for i := range blk {
				blk[i] = byte(rng.Uint32())
			}
			for k, off := range offs {
				binary.LittleEndian.PutUint16(blk[off:], scales[k])
			}
			if typ == Q8_K { // float32 scale: extremes of binary32
				f := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0x1p-126, 0, -1, 1e-20}[rng.IntN(7)]
				binary.LittleEndian.PutUint32(blk, math.Float32bits(f))
			}
			src = append(src, blk...)
		}
		for _, a := range extremeHalves {
			if len(offs) == 2 {
				for _, b := range extremeHalves {
					addBlock(a, b)
				}
			} else {
				addBlock(a)
			}
		}
		checkBlocks(t, typ, src)
	}
}

// TestDequantizeMatchesReferenceEveryBit decodes, for each type, blocks
// with a single bit set at every position under fixed scales, blocks of
// every constant byte value, and the all-ones block, so each field and every
// nibble, crumb and high-bit position is read at least once on its own.
func TestDequantizeMatchesReferenceEveryBit(t *testing.T) {
	for _, typ := range allTypes {
		ts := typ.BlockBytes()
		base := make([]byte, ts)
		for k, off := range scaleOffsets(typ) {
			binary.LittleEndian.PutUint16(base[off:], []uint16{0x3C00, 0x3800}[k]) // d = 1, second = 0.5
		}
		if typ == Q8_K {
			binary.LittleEndian.PutUint32(base, math.Float32bits(0.25))
		}
		var src []byte
		for bit := range 8 * ts {
			blk := append([]byte(nil), base...)
			blk[bit/8] ^= 1 << (bit % 8)
			src = append(src, blk...)
		}
		for v := range 256 {
			blk := append([]byte(nil), base...)
			for i := range blk {
				if !isScaleByte(typ, i) {
					blk[i] = byte(v)
				}
			}
			src = append(src, blk...)
		}
		checkBlocks(t, typ, src)
	}
}

func isScaleByte(t TensorType, i int) bool {
	if t == Q8_K {
		return i < 4
	}
	for _, off := range scaleOffsets(t) {
		if i == off || i == off+1 {
			return true
		}
	}
	return false
}

// TestDequantizeKnownKBlocks pins a few hand-computed K-quant values, so a
// mistake shared by the decoder and the reference would still show.
func TestDequantizeKnownKBlocks(t *testing.T) {
	out := make([]float32, QK)
	// Q4_K: d = 1, dmin = 0.5; group 5 has scale 0b10_0011 = 35 (low four
	// bits 3 from byte 9, top two 2 from byte 1) and min 0b01_0100 = 20 (low
	// four 4 from byte 9's high nibble, top two 1 from byte 5). Element
	// 5·32 + 7 = 167 is the high nibble (group 5 is odd) of qs[32·2 + 7].
	q4 := make([]byte, 144)
	binary.LittleEndian.PutUint16(q4, 0x3C00)
	binary.LittleEndian.PutUint16(q4[2:], 0x3800)
	q4[4+9] = 0x43
	q4[4+1] = 2 << 6
	q4[4+5] = 1 << 6
	q4[16+64+7] = 0x90 // high nibble 9
	if err := Dequantize(Q4_K, out, q4); err != nil {
		t.Fatal(err)
	}
	if out[167] != 35*9-0.5*20 || out[166] != -10 {
		t.Fatalf("Q4_K: element 167 = %v (want %v), 166 = %v (want -10)", out[167], 35*9-0.5*20, out[166])
	}
	// Q6_K: d = 2, group 13 (second half, quarter 2, lanes 16–31) scale -3.
	// Element 128 + 64 + 20 = 212: low nibble is the high nibble of
	// ql[64 + 20], top bits are bits 4–5 of qh[32 + 20].
	q6 := make([]byte, 210)
	binary.LittleEndian.PutUint16(q6[208:], 0x4000)
	q6[192+13] = byte(0xFD) // -3
	q6[64+20] = 0xA0        // high nibble 10
	q6[128+32+20] = 3 << 4  // top bits 3
	if err := Dequantize(Q6_K, out, q6); err != nil {
		t.Fatal(err)
	}
	if want := float32(2 * -3 * (10 + 48 - 32)); out[212] != want {
		t.Fatalf("Q6_K: element 212 = %v, want %v", out[212], want)
	}
	// Q3_K: d = 1, group 10 scale: low nibble is the high nibble of byte 2,
	// top bits are bits 4–5 of byte 10: 0b11_0001 = 49, minus 32 = 17.
	// Element 128 + 32·1 + 2 = 162 (half 1, quarter 1, group 10): low bits
	// 2–3 of qs[32 + 2], high bit 4·1 + 1 = 5 of hmask[2].
	q3 := make([]byte, 110)
	binary.LittleEndian.PutUint16(q3[108:], 0x3C00)
	q3[96+2] = 0x10
	q3[96+10] = 3 << 4
	q3[32+32+2] = 2 << 2
	q3[2] = 1 << 5
	if err := Dequantize(Q3_K, out, q3); err != nil {
		t.Fatal(err)
	}
	if out[162] != 17*2 {
		t.Fatalf("Q3_K: element 162 = %v, want %v", out[162], 17*2)
	}
}

// FuzzDequantizeBlocks decodes arbitrary bytes as every quantised type and
// compares with the reference decoder, NaN and infinities included.
func FuzzDequantizeBlocks(f *testing.F) {
	f.Add(byte(0), []byte{0x00, 0x3C, 1, 2, 3})
	f.Add(byte(6), []byte{0xFF, 0x7B, 0xFF, 0xFB})
	f.Add(byte(10), make([]byte, 210))
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		typ := allTypes[int(which)%len(allTypes)]
		ts := typ.BlockBytes()
		nb := max(1, min(len(data)/ts, 8))
		src := make([]byte, nb*ts)
		copy(src, data)
		checkBlocks(t, typ, src)
	})
}
