package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// f16Extremes are half-precision scales the generators mix in: the largest
// finite value, the smallest subnormal, zero, and negatives.
var f16Extremes = []uint16{0x7bff, 0xfbff, 0x0001, 0x8001, 0x0000, 0x3c00, 0x0400}

// randF16 returns a finite half-precision value: mostly moderate, sometimes
// an extreme one.
func randF16(rng *rand.Rand) uint16 {
	if rng.IntN(8) == 0 {
		return f16Extremes[rng.IntN(len(f16Extremes))]
	}
	return uint16(rng.IntN(0x7c00)) | uint16(rng.IntN(2))<<15 // any finite
}

// kScaleOffsets are the byte offsets of the half-precision fields of each
// K-quant super-block.
func kScaleOffsets(t gguf.TensorType) []int {
	switch t {
	case gguf.Q2_K:
		return []int{80, 82}
	case gguf.Q3_K:
		return []int{108}
	case gguf.Q4_K, gguf.Q5_K:
		return []int{0, 2}
	case gguf.Q6_K:
		return []int{208}
	}
	panic(t)
}

// fixKScales overwrites the half-precision fields of every super-block in w
// (rows of rowBytes at stride wStride) with finite values.
func fixKScales(rng *rand.Rand, t gguf.TensorType, w []byte, rows, rowBytes, wStride int) {
	bb := kTypeOf(t).bytes
	for r := range rows {
		for b := 0; b < rowBytes; b += bb {
			for _, off := range kScaleOffsets(t) {
				binary.LittleEndian.PutUint16(w[r*wStride+b+off:], randF16(rng))
			}
		}
	}
}

// randKWeights returns rows random rows of n values of type t at stride
// wStride, with finite scales.
func randKWeights(rng *rand.Rand, t gguf.TensorType, n, rows, wStride int) []byte {
	w := make([]byte, (rows-1)*wStride+n/256*kTypeOf(t).bytes)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	fixKScales(rng, t, w, rows, n/256*kTypeOf(t).bytes, wStride)
	return w
}

// randActQ8K returns cols activation rows of n values in ActQ8K form at
// stride aStride: random quantised values over the whole int8 range with
// their true 16-value sums, and block scales over a wide range (both signs,
// zero included) that keeps every product finite in float32.
func randActQ8K(rng *rand.Rand, n, cols, aStride int) []byte {
	a := make([]byte, (cols-1)*aStride+ActQ8K.RowBytes(n))
	for i := range a {
		a[i] = byte(rng.Uint32()) // also fills the gaps between rows
	}
	nb := n / 256
	for c := range cols {
		row := a[c*aStride:]
		for b := range nb {
			d := float32(math.Ldexp(1+rng.Float64(), rng.IntN(80)-40))
			switch rng.IntN(10) {
			case 0:
				d = 0
			case 1:
				d = -d
			}
			binary.LittleEndian.PutUint32(row[n+4*b:], math.Float32bits(d))
		}
		for g := range n / 16 {
			var s int16
			for _, q := range row[16*g : 16*g+16] {
				s += int16(int8(q))
			}
			binary.LittleEndian.PutUint16(row[n+4*nb+2*g:], uint16(s))
		}
	}
	return a
}

// dequantK decodes one super-block of type t into its values, written from
// the format's description one section at a time (independently of the
// kernels' unpackers). Each value is returned as p − o, its scale part and
// its offset part, so callers can bound the rounding of kernels that sum the
// two apart.
func dequantK(t gguf.TensorType, b []byte) (p, o [256]float64) {
	f16 := func(off int) float64 { return float64(gguf.F16ToF32(binary.LittleEndian.Uint16(b[off:]))) }
	switch t {
	case gguf.Q2_K: // two halves of 128: four 2-bit planes of qs[32], scales[16]
		d, dmin := f16(80), f16(82)
		for h := range 2 {
			for j := range 4 {
				for l := range 32 {
					i := 128*h + 32*j + l
					sc := b[8*h+2*j+l/16]
					p[i] = d * float64(sc&15) * float64(b[16+32*h+l]>>(2*j)&3)
					o[i] = dmin * float64(sc>>4)
				}
			}
		}
	case gguf.Q3_K:
		d := f16(108)
		// The 6-bit scales as four little-endian words: low nibbles of
		// words 0-1 give groups 0-7, their high nibbles groups 8-15; word 2
		// holds the top two bits, two per group, word g%4 byte, bit pair g/4.
		var aux [4]uint32
		for k := range 3 {
			aux[k] = binary.LittleEndian.Uint32(b[96+4*k:])
		}
		var sc [16]int
		for g := range 16 {
			lo := aux[g/4%2] >> (8*(g%4) + 4*(g/8)) & 15
			hi := aux[2] >> (8*(g%4) + 2*(g/4)) & 3
			sc[g] = int(lo|hi<<4) - 32
		}
		for h := range 2 {
			for j := range 4 {
				for l := range 32 {
					i := 128*h + 32*j + l
					q := int(b[32+32*h+l] >> (2 * j) & 3)
					if b[l]&(1<<(4*h+j)) == 0 {
						q -= 4
					}
					s := d * float64(sc[i/16])
					p[i], o[i] = s*float64(q+4), s*4
				}
			}
		}
	case gguf.Q4_K, gguf.Q5_K:
		d, dmin := f16(0), f16(2)
		s := b[4:16]
		qs := 16
		if t == gguf.Q5_K {
			qs = 48
		}
		for j := range 8 { // 32-value sub-blocks: pairs share 32 bytes of qs
			var sc, m byte
			if j < 4 {
				sc, m = s[j]&0x3f, s[j+4]&0x3f
			} else {
				sc = s[j+4]&0x0f | (s[j-4]>>6)<<4
				m = s[j+4]>>4 | (s[j]>>6)<<4
			}
			for l := range 32 {
				q := b[qs+32*(j/2)+l]
				if j%2 == 0 {
					q &= 0x0f
				} else {
					q >>= 4
				}
				if t == gguf.Q5_K && b[16+l]&(1<<j) != 0 {
					q += 16
				}
				p[32*j+l] = d * float64(sc) * float64(q)
				o[32*j+l] = dmin * float64(m)
			}
		}
	case gguf.Q6_K: // two halves: ql[64], qh[32], scales[8] each
		d := f16(208)
		for h := range 2 {
			ql, qh, sc := b[64*h:], b[128+32*h:], b[192+8*h:]
			for l := range 32 {
				q := [4]int{
					int(ql[l]&15 | (qh[l]&3)<<4),
					int(ql[l+32]&15 | (qh[l]>>2&3)<<4),
					int(ql[l]>>4 | (qh[l]>>4&3)<<4),
					int(ql[l+32]>>4 | (qh[l]>>6&3)<<4),
				}
				for j := range 4 {
					s := d * float64(int8(sc[l/16+2*j]))
					i := 128*h + 32*j + l
					p[i], o[i] = s*float64(q[j]), s*32
				}
			}
		}
	}
	return p, o
}

// exactDot returns the float64 dot product of weight row w (type t) with
// activation row act (ActQ8K), and mag, the sum of the magnitudes of the
// scale and offset parts of every term: the scale of the rounding errors of
// any float32 evaluation.
func exactDot(t gguf.TensorType, n int, w, act []byte) (dot, mag float64) {
	x := dequantAct(ActQ8K, act, n)
	bb := kTypeOf(t).bytes
	for b := range n / 256 {
		p, o := dequantK(t, w[b*bb:])
		for i := range 256 {
			xi := x[256*b+i]
			dot += (p[i] - o[i]) * xi
			mag += (math.Abs(p[i]) + math.Abs(o[i])) * math.Abs(xi)
		}
	}
	return dot, mag
}

// refTol bounds the rounding error of the reference kernel on nb
// super-blocks. Per super-block it rounds five times (two integer sums to
// float32, two products, the difference) and once more scaling by the
// activation scale, then once per super-block summed: at most (nb+6) half
// ulps of the largest partial sum, which mag bounds. The float64 side adds
// less than a thousandth of that. tiny covers results in float32's
// subnormal range, where the error is absolute.
func refTol(nb int, mag float64) float64 {
	return float64(nb+6)*0x1p-24*mag*1.001 + float64(nb+6)*0x1p-149
}

var kQuantTypes = []gguf.TensorType{gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// TestKQuantDecoderMatchesGGUF checks the tests' float64 decoder, and the
// kernels' super-block sizes, against the gguf package's: two readings of
// the format that must agree. gguf rounds each value to float32 in three
// steps (scale times sub-scale, times the quant, minus the offset), so each
// value may differ by up to 3 half ulps of the magnitudes involved.
func TestKQuantDecoderMatchesGGUF(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, typ := range kQuantTypes {
		if got, want := kTypeOf(typ).bytes, typ.RowBytes(256); got != want {
			t.Fatalf("%v: %d bytes per super-block, gguf says %d", typ, got, want)
		}
		const n = 64 * 256
		w := randKWeights(rng, typ, n, 1, 0)
		got := make([]float32, n)
		if err := gguf.Dequantize(typ, got, w); err != nil {
			t.Fatal(err)
		}
		bb := kTypeOf(typ).bytes
		for b := range n / 256 {
			p, o := dequantK(typ, w[b*bb:])
			for i := range 256 {
				want := p[i] - o[i]
				if tol := 3 * 0x1p-24 * (math.Abs(p[i]) + math.Abs(o[i])); !(math.Abs(float64(got[256*b+i])-want) <= tol) {
					t.Fatalf("%v super-block %d value %d: gguf %v, here %v", typ, b, i, got[256*b+i], want)
				}
			}
		}
	}
}

func TestKQuantReferenceMatchesDequantised(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range kQuantTypes {
		for _, n := range []int{256, 1024} {
			const rows, cols = 5, 3
			rb := n / 256 * kTypeOf(typ).bytes
			w := randKWeights(rng, typ, n, rows, rb)
			ab := ActQ8K.RowBytes(n)
			a := randActQ8K(rng, n, cols, ab)
			out := make([]float32, rows*cols)
			k, ok := NewSet(Generic).For(typ)
			if !ok || k.Act != ActQ8K {
				t.Fatalf("%v: no ActQ8K reference kernel", typ)
			}
			k.Mul(n, w, rb, rows, a, ab, cols, out, rows)
			for c := range cols {
				for r := range rows {
					want, mag := exactDot(typ, n, w[r*rb:], a[c*ab:])
					got := float64(out[c*rows+r])
					if tol := refTol(n/256, mag); !(math.Abs(got-want) <= tol) {
						t.Errorf("%v n=%d out[%d][%d] = %v, want %v ± %v", typ, n, c, r, got, want, tol)
					}
				}
			}
		}
	}
}

// TestKQuantReferenceExtremeScales checks the reference on super-blocks
// whose every scale is the same extreme half-precision value.
func TestKQuantReferenceExtremeScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 512
	for _, typ := range kQuantTypes {
		for _, h := range f16Extremes {
			rb := n / 256 * kTypeOf(typ).bytes
			w := randKWeights(rng, typ, n, 1, rb)
			for b := 0; b < rb; b += kTypeOf(typ).bytes {
				for _, off := range kScaleOffsets(typ) {
					binary.LittleEndian.PutUint16(w[b+off:], h)
				}
			}
			a := randActQ8K(rng, n, 1, ActQ8K.RowBytes(n))
			out := make([]float32, 1)
			mulKRef(kTypeOf(typ))(n, w, rb, 1, a, 0, 1, out, 0)
			want, mag := exactDot(typ, n, w, a)
			if tol := refTol(n/256, mag); !(math.Abs(float64(out[0])-want) <= tol) {
				t.Errorf("%v scale %#04x: %v, want %v ± %v", typ, h, out[0], want, tol)
			}
		}
	}
}

// TestKQuantBatchIndependence checks the package contract for every K type
// and level: each output's bits are the same whether computed alone or
// within any call, with any strides and at any place in it.
func TestKQuantBatchIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, l := range availableLevels() {
		set := NewSet(l)
		for _, typ := range kQuantTypes {
			k, _ := set.For(typ)
			t.Run(fmt.Sprintf("%v/%v", l, typ), func(t *testing.T) {
				checkIndependence(t, rng, typ, k.Mul, 768, 13, 21)
				// Long rows: the columns go to the assembly in several groups.
				checkIndependence(t, rng, typ, k.Mul, 40*256, 3, 30)
				// Many rows: the rows go to the assembly in several chunks.
				checkIndependence(t, rng, typ, k.Mul, 256, 71, 9)
			})
		}
	}
}

func checkIndependence(t *testing.T, rng *rand.Rand, typ gguf.TensorType, mul MulFunc, n, rows, cols int) {
	rb := n / 256 * kTypeOf(typ).bytes
	wStride, aStride, outStride := rb+3, ActQ8K.RowBytes(n)+5, rows+2
	w := randKWeights(rng, typ, n, rows, wStride)
	a := randActQ8K(rng, n, cols, aStride)
	full := make([]float32, (cols-1)*outStride+rows)
	mul(n, w, wStride, rows, a, aStride, cols, full, outStride)
	want := func(r, c int) uint32 { return math.Float32bits(full[c*outStride+r]) }

	// Each output alone, its rows copied to fresh, differently aligned slices.
	for r := range rows {
		wr := append(make([]byte, 1+r%7), w[r*wStride:r*wStride+rb]...)[1+r%7:]
		for c := range cols {
			ac := append(make([]byte, c%5), a[c*aStride:c*aStride+ActQ8K.RowBytes(n)]...)[c%5:]
			out := make([]float32, 1)
			mul(n, wr, 0, 1, ac, 0, 1, out, 0)
			if math.Float32bits(out[0]) != want(r, c) {
				t.Fatalf("out[%d][%d] alone = %v, in the full call %v", r, c, out[0], full[c*outStride+r])
			}
		}
	}
	// Random sub-rectangles, as thread splits and batches of other sizes
	// produce them, written with another output stride.
	for range 40 {
		r0, c0 := rng.IntN(rows), rng.IntN(cols)
		nr, nc := 1+rng.IntN(rows-r0), 1+rng.IntN(cols-c0)
		os := nr + rng.IntN(3)
		out := make([]float32, (nc-1)*os+nr)
		mul(n, w[r0*wStride:], wStride, nr, a[c0*aStride:], aStride, nc, out, os)
		for c := range nc {
			for r := range nr {
				if math.Float32bits(out[c*os+r]) != want(r0+r, c0+c) {
					t.Fatalf("rows %d+%d cols %d+%d: out[%d][%d] = %v, in the full call %v",
						r0, nr, c0, nc, c0+c, r0+r, out[c*os+r], full[(c0+c)*outStride+r0+r])
				}
			}
		}
	}
}

// fastTol bounds the difference between a fast kernel and the reference on
// nb super-blocks. The fast kernels keep 16 (AVX-512) or 8 (AVX2) partial
// sums per output: per super-block each lane rounds its integer sum to
// float32, its product with the weight scale, the fused subtraction of the
// offset term and the fused accumulation (4 roundings); across super-blocks
// the accumulation rounds nb times and the final sum of the lanes 4 more.
// Each lane's terms are bounded by the same magnitudes as the reference's,
// so the fast kernel is within (nb+8) half ulps of mag of the exact value
// and the reference within refTol.
func fastTol(nb int, mag float64) float64 {
	return refTol(nb, mag) + float64(nb+8)*0x1p-24*mag*1.001 + float64(nb+8)*0x1p-149
}

// checkFastMatchesRef compares every fast level this CPU runs against the
// reference kernel on one call of the given shape.
func checkFastMatchesRef(t *testing.T, rng *rand.Rand, typ gguf.TensorType, n, rows, cols, wPad, aPad, oPad int, raw []byte) {
	t.Helper()
	rb := n / 256 * kTypeOf(typ).bytes
	wStride, aStride, outStride := rb+wPad, ActQ8K.RowBytes(n)+aPad, rows+oPad
	w := randKWeights(rng, typ, n, rows, wStride)
	copy(w, raw)
	fixKScales(rng, typ, w, rows, rb, wStride)
	a := randActQ8K(rng, n, cols, aStride)
	size := (cols-1)*outStride + rows
	want := make([]float32, size)
	mulKRef(kTypeOf(typ))(n, w, wStride, rows, a, aStride, cols, want, outStride)
	for _, l := range availableLevels()[1:] {
		k, _ := NewSet(l).For(typ)
		got := make([]float32, size)
		k.Mul(n, w, wStride, rows, a, aStride, cols, got, outStride)
		for c := range cols {
			for r := range rows {
				_, mag := exactDot(typ, n, w[r*wStride:], a[c*aStride:])
				g, f := float64(got[c*outStride+r]), float64(want[c*outStride+r])
				if tol := fastTol(n/256, mag); !(math.Abs(g-f) <= tol) {
					t.Fatalf("%v %v n=%d rows=%d cols=%d: out[%d][%d] = %v, reference %v (tolerance %v)",
						l, typ, n, rows, cols, c, r, g, f, tol)
				}
			}
		}
	}
}

func TestKQuantFastMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range kQuantTypes {
		for _, s := range [][3]int{{256, 1, 1}, {512, 7, 3}, {19 * 256, 5, 9}, {1024, 2, 70}} {
			checkFastMatchesRef(t, rng, typ, s[0], s[1], s[2], rng.IntN(9), rng.IntN(9), rng.IntN(3), nil)
		}
	}
}

// fuzzKQuant compares the fast kernels with the reference on random
// super-blocks (the fuzzer's bytes first, every scale made finite) and
// random shapes and strides.
func fuzzKQuant(f *testing.F, typ gguf.TensorType) {
	f.Add(uint64(1), uint32(0), []byte{})
	f.Add(uint64(2), uint32(0xffffffff), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add(uint64(3), uint32(0x12345678), make([]byte, 300))
	f.Fuzz(func(t *testing.T, seed uint64, shape uint32, raw []byte) {
		rng := rand.New(rand.NewPCG(seed, uint64(shape)))
		n := 256 * (1 + int(shape%8))
		rows := 1 + int(shape>>3%9)
		cols := 1 + int(shape>>7%20)
		checkFastMatchesRef(t, rng, typ, n, rows, cols, int(shape>>12%8), int(shape>>15%8), int(shape>>18%3), raw)
	})
}

func FuzzKQuantQ2K(f *testing.F) { fuzzKQuant(f, gguf.Q2_K) }
func FuzzKQuantQ3K(f *testing.F) { fuzzKQuant(f, gguf.Q3_K) }
func FuzzKQuantQ4K(f *testing.F) { fuzzKQuant(f, gguf.Q4_K) }
func FuzzKQuantQ5K(f *testing.F) { fuzzKQuant(f, gguf.Q5_K) }
func FuzzKQuantQ6K(f *testing.F) { fuzzKQuant(f, gguf.Q6_K) }

// TestKQuantChecksArguments checks that every level refuses slices too
// short for the shape it is given (the assembly kernels read through raw
// pointers) and writes zeros for n = 0.
func TestKQuantChecksArguments(t *testing.T) {
	const n = 512
	rng := rand.New(rand.NewPCG(15, 16))
	for _, l := range availableLevels() {
		for _, typ := range kQuantTypes {
			k, _ := NewSet(l).For(typ)
			rb := n / 256 * kTypeOf(typ).bytes
			w := randKWeights(rng, typ, n, 2, rb)
			a := randActQ8K(rng, n, 2, ActQ8K.RowBytes(n))
			out := []float32{1, 2, 3, 4}
			for name, call := range map[string]func(){
				"short weights":     func() { k.Mul(n, w[:2*rb-1], rb, 2, a, ActQ8K.RowBytes(n), 2, out, 2) },
				"short activations": func() { k.Mul(n, w, rb, 2, a[:len(a)-1], ActQ8K.RowBytes(n), 2, out, 2) },
				"short output":      func() { k.Mul(n, w, rb, 2, a, ActQ8K.RowBytes(n), 2, out[:3], 2) },
			} {
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("%v %v: %s: no panic", l, typ, name)
						}
					}()
					call()
				}()
			}
			k.Mul(0, nil, 0, 2, nil, 0, 2, out, 2)
			if out[0] != 0 || out[1] != 0 || out[2] != 0 || out[3] != 0 {
				t.Errorf("%v %v: n=0 leaves %v", l, typ, out)
			}
		}
	}
}
