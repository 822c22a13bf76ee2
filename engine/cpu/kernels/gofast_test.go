package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// goTypes are the weight types with a pure-Go kernel of their own.
func goTypes() []gguf.TensorType {
	var ts []gguf.TensorType
	for _, t := range append(legacyTypes[:], kQuantTypes...) {
		if _, ok := goKernel(t); ok {
			ts = append(ts, t)
		}
	}
	return ts
}

// goRef returns the reference kernel the Go kernel of t must match.
func goRef(t gguf.TensorType) MulFunc {
	if k, ok := RefKernel(t, 8); ok {
		return k.Mul
	}
	return mulKRef(kTypeOf(t))
}

// goData returns rows weight rows of type t (n values, stride ws) and cols
// activation rows (stride as) for one of three modes: 0, random bytes with
// scales over a wide range; 1, the same with extreme scales; 2, weights
// and activations quantised from normal values as a model has them (the
// block kernels then stay on their path without tie checks).
func goData(rng *rand.Rand, t gguf.TensorType, mode, n, rows, cols, wPad, aPad int) (w []byte, ws int, a []byte, as int) {
	act, _ := goKernel(t)
	ws = t.RowBytes(n) + wPad
	as = act.Act.RowBytes(n) + aPad
	w = make([]byte, (rows-1)*ws+t.RowBytes(n))
	switch {
	case mode == 2:
		x := make([]float32, n)
		for r := range rows {
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 0.02)
			}
			if err := gguf.QuantizeInto(t, w[r*ws:r*ws+t.RowBytes(n)], x); err != nil {
				panic(err)
			}
		}
	case legacyBlockBytes(t) != 0 || act.Act == ActF32:
		one, _ := randomWeights(rng, t, rows, n, mode == 1)
		for r := range rows {
			copy(w[r*ws:], one[r*t.RowBytes(n):(r+1)*t.RowBytes(n)])
		}
	default:
		w = randKWeights(rng, t, n, rows, ws)
	}
	a = make([]byte, (cols-1)*as+act.Act.RowBytes(n))
	if act.Act == ActQ8K && mode != 2 {
		a = randActQ8K(rng, n, cols, as)
		return w, ws, a, as
	}
	x := make([]float32, n)
	for c := range cols {
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if mode != 2 {
				x[i] *= float32(math.Exp(rng.NormFloat64()))
			}
		}
		QuantizeRow(act.Act, a[c*as:], x)
	}
	return w, ws, a, as
}

// checkGo compares the Go kernel of t with its reference bit for bit on
// one call.
func checkGo(t *testing.T, typ gguf.TensorType, w []byte, ws int, a []byte, as int, n, rows, cols, oPad int) {
	t.Helper()
	k, _ := goKernel(typ)
	os := rows + oPad
	got, want := make([]float32, (cols-1)*os+rows), make([]float32, (cols-1)*os+rows)
	for i := range got {
		got[i], want[i] = 7, 7
	}
	k.Mul(n, w, ws, rows, a, as, cols, got, os)
	goRef(typ)(n, w, ws, rows, a, as, cols, want, os)
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("%v n=%d %dx%d: out[%d][%d] = %v (%#x), reference %v (%#x)",
				typ, n, rows, cols, i/os, i%os, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// goN returns a random row length for type t with up to blocks blocks.
func goN(rng *rand.Rand, t gguf.TensorType, blocks int) int {
	switch {
	case t == gguf.F32 || t == gguf.F16 || t == gguf.BF16:
		return 1 + rng.IntN(32*blocks)
	case legacyBlockBytes(t) != 0:
		return 32 * (1 + rng.IntN(blocks))
	}
	return 256 * (1 + rng.IntN(max(1, blocks/8)))
}

func TestGoKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range goTypes() {
		for mode := range 3 {
			for _, sh := range [][2]int{{1, 1}, {7, 1}, {3, 5}, {40, 2}, {33, 17}} {
				n := goN(rng, typ, 24)
				w, ws, a, as := goData(rng, typ, mode, n, sh[0], sh[1], rng.IntN(5), rng.IntN(5))
				checkGo(t, typ, w, ws, a, as, n, sh[0], sh[1], rng.IntN(3))
			}
		}
		// rows longer than a packed chunk, with a tile of rows and more
		n := 32 * (legacyChunk + 3)
		if k, _ := goKernel(typ); k.Act == ActQ8K {
			n = 256 * (kChunk + 2)
		}
		for mode := range 3 {
			w, ws, a, as := goData(rng, typ, mode, n, legacyTile+5, 2, 1, 3)
			checkGo(t, typ, w, ws, a, as, n, legacyTile+5, 2, 1)
		}
	}
}

// TestGoKernelsQ8_0Minus128 checks the Q8_0 kernel on activations with
// -128, which its packed products cannot take.
func TestGoKernelsQ8_0Minus128(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	const n, rows, cols = 96, 9, 3
	w, ws, a, as := goData(rng, gguf.Q8_0, 0, n, rows, cols, 0, 0)
	a[as+5] = 0x80
	for i := range 8 {
		a[2*as+32+i] = 0x80
	}
	checkGo(t, gguf.Q8_0, w, ws, a, as, n, rows, cols, 0)
}

// encodeLegacy writes a block of 32-value type t with scale d, min m
// (types with one) and integer values v (offset included: in [-8, 7] for
// Q4_0, [-16, 15] for Q5_0, [0, 15] or [0, 31] for Q4_1 and Q5_1).
func encodeLegacy(t gguf.TensorType, blk []byte, d, m float32, v *[32]int) {
	binary.LittleEndian.PutUint16(blk, gguf.F32ToF16(d))
	if t == gguf.Q8_0 {
		for j, x := range v {
			blk[2+j] = byte(int8(x))
		}
		return
	}
	off, qs := 0, 2
	switch t {
	case gguf.Q4_0:
		off = 8
	case gguf.Q5_0:
		off, qs = 16, 6
	case gguf.Q4_1:
		qs = 4
	case gguf.Q5_1:
		qs = 8
	}
	if t == gguf.Q4_1 || t == gguf.Q5_1 {
		binary.LittleEndian.PutUint16(blk[2:], gguf.F32ToF16(m))
	}
	var qh uint32
	for j := range 16 {
		lo, hi := v[j]+off, v[j+16]+off
		blk[qs+j] = byte(lo&15 | (hi&15)<<4)
		qh |= uint32(lo>>4&1)<<j | uint32(hi>>4&1)<<(j+16)
	}
	if t == gguf.Q5_0 || t == gguf.Q5_1 {
		binary.LittleEndian.PutUint32(blk[qs-4:], qh)
	}
}

// tieCase builds one weight row and one activation row of type t (n
// values) whose product rounds differently when a float64 sum is rounded
// to float32: lane lane holds 2^50 = 64·2^44 after block (or eight values)
// 0, and block 1 adds 65·16519105·2^-4 = 2^26 + 2^-4, so the float64 sum
// is the tie 2^50 + 2^26 while the exact sum rounds up to 2^50 + 2^27. For
// Q4_1 and Q5_1 the min terms do it in lane 0 (2^14·2^36, then 65 times
// the same scale).
func tieCase(t gguf.TensorType, lane int) (n int, w, a []byte) {
	const big, small = 0x1p44, 16519105 * 0x1p-4
	f32 := func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }
	switch t {
	case gguf.F32, gguf.F16, gguf.BF16:
		n = 16
		a = make([]byte, 4*n)
		f32(a[4*lane:], big)
		f32(a[4*(8+lane):], small)
		w = make([]byte, t.RowBytes(n))
		for i, v := range map[int]float32{lane: 64, 8 + lane: 65} {
			switch t {
			case gguf.F32:
				binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
			case gguf.F16:
				binary.LittleEndian.PutUint16(w[2*i:], gguf.F32ToF16(v))
			default:
				binary.LittleEndian.PutUint16(w[2*i:], uint16(math.Float32bits(v)>>16))
			}
		}
		return n, w, a
	}
	n = 64
	a = make([]byte, ActQ8.RowBytes(n))
	bb := legacyBlockBytes(t)
	w = make([]byte, 2*bb)
	var v0, v1 [32]int
	if t == gguf.Q4_1 || t == gguf.Q5_1 {
		encodeLegacy(t, w, 1, 0x1p14, &v0)
		encodeLegacy(t, w[bb:], 1, 65, &v1)
		f32(a[n+8:], 0x1p36)
		f32(a[n+12:], small)
		return n, w, a
	}
	v0[4*lane], v1[4*lane] = -8, 5
	a[4*lane], a[32+4*lane] = byte(0xf8), 13 // -8·-8 = 64, 5·13 = 65
	encodeLegacy(t, w, 1, 0, &v0)
	encodeLegacy(t, w[bb:], 1, 0, &v1)
	f32(a[n:], big)
	f32(a[n+4:], small)
	return n, w, a
}

// TestGoKernelsDoubleRounding runs the kernels on sums where rounding the
// float64 sum to float32 differs from fma32, in the first and the second
// half of the lanes: they must take the reference's path there.
func TestGoKernelsDoubleRounding(t *testing.T) {
	if got, want := float32(float64(0x1p50)+65*float64(float32(16519105*0x1p-4))), fma32(65, 16519105*0x1p-4, 0x1p50); got == want {
		t.Fatalf("the case does not round twice: %v", got)
	}
	for _, typ := range legacyTypes {
		for _, lane := range []int{0, 5} {
			if (typ == gguf.Q4_1 || typ == gguf.Q5_1) && lane != 0 {
				continue
			}
			n, w, a := tieCase(typ, lane)
			k, _ := goKernel(typ)
			var got, want [1]float32
			k.Mul(n, w, 0, 1, a, 0, 1, got[:], 0)
			goRef(typ)(n, w, 0, 1, a, 0, 1, want[:], 0)
			if want[0] != 0x1p50+0x1p27 {
				t.Fatalf("%v lane %d: the reference gives %v, the case wants 2^50+2^27", typ, lane, want[0])
			}
			if !sameBits(got[0], want[0]) {
				t.Errorf("%v lane %d: %v, reference %v", typ, lane, got[0], want[0])
			}
		}
	}
}

// TestGoFloatSubnormalDoubleRounding is TestGoKernelsDoubleRounding in
// float32's subnormal range for F32 weights: lane 0 holds 2^-127, then
// adds 2^-150 + 2^-183, which float64 rounds to the tie 2^-127 + 2^-150.
func TestGoFloatSubnormalDoubleRounding(t *testing.T) {
	x0, x1 := float32(0x1p-67), float32(0x1p-75*(1-0x1p-11+0x1p-22))
	w0, w1 := float32(0x1p-60), float32(0x1p-75*(1+0x1p-11))
	if float32(float64(0x1p-127)+float64(w1)*float64(x1)) == fma32(w1, x1, 0x1p-127) {
		t.Fatal("the case does not round twice")
	}
	const n = 16 // values 0 and 8 go to lane 0
	w, a := make([]byte, 4*n), make([]byte, 4*n)
	for i, v := range map[int][2]float32{0: {w0, x0}, 8: {w1, x1}} {
		binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v[0]))
		binary.LittleEndian.PutUint32(a[4*i:], math.Float32bits(v[1]))
	}
	k, _ := goKernel(gguf.F32)
	var got, want [1]float32
	k.Mul(n, w, 0, 1, a, 0, 1, got[:], 0)
	goRef(gguf.F32)(n, w, 0, 1, a, 0, 1, want[:], 0)
	if !sameBits(got[0], want[0]) || want[0] != 0x1p-127+0x1p-149 {
		t.Errorf("%v (%#x), reference %v (%#x), want 2^-127+2^-149", got[0], math.Float32bits(got[0]), want[0], math.Float32bits(want[0]))
	}
}

// TestGoLegacyStaysExact checks that on weights and activations as a model
// has them the block kernels keep to their path without tie checks (the
// bound of track holds along whole rows): a property of speed, not of
// results.
func TestGoLegacyStaysExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q5_0, gguf.Q4_0} {
		const n, rows = 4864, 8
		w, ws, a, _ := goData(rng, typ, 2, n, rows, 1, 0, 0)
		nb, rec := n/32, legacyRec(typ)
		buf := make([]byte, nb*rec)
		for b := range nb {
			packLegacy(typ, buf[b*rec:(b+1)*rec], a[32*b:32*b+32], a[n+4*b:], a[n+4*nb+4*b:])
		}
		for r := range rows {
			l := newLanes()
			runLegacyRow(typ, w[r*ws:r*ws+nb*legacyBlockBytes(typ)], buf, a[:n], a[n:], a[n+4*nb:], &l)
			if l.careful {
				t.Errorf("%v row %d: the bound failed (Σ|scale| %v, smallest exponent field %d)", typ, r, l.sum, l.emin)
			}
		}
	}
}

func TestHalfBits(t *testing.T) {
	for h := range 1 << 16 {
		if got, want := halfBits(uint32(h)), gguf.F16ToF32(uint16(h)); !sameBits(got, want) || math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("halfBits(%#04x) = %#x, F16ToF32 %#x", h, math.Float32bits(got), math.Float32bits(want))
		}
	}
}

// FuzzGoKernels compares the Go kernels with the reference on random
// types, shapes, strides and data.
func FuzzGoKernels(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(3), uint8(2), uint8(5), uint8(0))
	f.Add(uint64(2), uint8(4), uint8(40), uint8(1), uint8(70), uint8(1))
	f.Add(uint64(3), uint8(9), uint8(1), uint8(9), uint8(20), uint8(2))
	f.Add(uint64(4), uint8(11), uint8(17), uint8(3), uint8(3), uint8(3))
	types := goTypes()
	f.Fuzz(func(t *testing.T, seed uint64, typ, rows, cols, blocks, mode uint8) {
		rng := rand.New(rand.NewPCG(seed, 5))
		tt := types[int(typ)%len(types)]
		r, c := 1+int(rows%48), 1+int(cols%6)
		n := goN(rng, tt, 1+int(blocks%80))
		if mode%4 == 3 { // a double-rounding case, in a call of several rows
			if tt.RowBytes(256) != 0 && legacyBlockBytes(tt) == 0 && tt != gguf.F32 && tt != gguf.F16 && tt != gguf.BF16 {
				mode = 0
			} else {
				lane := int(seed % 8)
				if tt == gguf.Q4_1 || tt == gguf.Q5_1 {
					lane = 0
				}
				n, w, a := tieCase(tt, lane)
				ws := len(w) + int(seed%3)
				ww := make([]byte, (r-1)*ws+len(w))
				for i := range r {
					copy(ww[i*ws:], w)
				}
				checkGo(t, tt, ww, ws, a, 0, n, r, 1, 0)
				return
			}
		}
		w, ws, a, as := goData(rng, tt, int(mode%3), n, r, c, rng.IntN(4), rng.IntN(4))
		checkGo(t, tt, w, ws, a, as, n, r, c, rng.IntN(3))
	})
}

// BenchmarkGo measures the Go kernels against the reference kernels they
// replace, on weights quantised from normal values (a matrix larger than
// the caches; bytes/s counts weight bytes) with 1 and 4 activation rows.
func BenchmarkGo(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range goTypes() {
		const n, rows = 1536, 1 << 12 // a feed-forward down projection's rows; 6 super-blocks
		for _, cols := range []int{1, 4} {
			w, ws, a, as := goData(rng, typ, 2, n, rows, cols, 0, 0)
			out := make([]float32, rows*cols)
			k, _ := goKernel(typ)
			for _, impl := range []struct {
				name string
				mul  MulFunc
			}{{"ref", goRef(typ)}, {"go", k.Mul}} {
				b.Run(fmt.Sprintf("%v/%s/cols=%d", typ, impl.name, cols), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						impl.mul(n, w, ws, rows, a, as, cols, out, rows)
					}
					b.ReportMetric(float64(b.N)*float64(rows*cols*n)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}
