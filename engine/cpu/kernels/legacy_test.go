package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// availableLevels lists the levels this CPU runs (Generic first).
func availableLevels() []Level {
	var ls []Level
	for l := Generic; int(l) < len(levelNames); l++ {
		if supported(l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// randomWeights returns rows of n values of type t: random quant bytes and
// float values, scales that are finite half-precision numbers of random
// magnitude (the extremes included when extreme is set).
func randomWeights(rng *rand.Rand, t gguf.TensorType, rows, n int, extreme bool) ([]byte, int) {
	half := func() uint16 {
		if extreme && rng.IntN(4) == 0 {
			return []uint16{0x7bff, 0xfbff, 0x0001, 0x8001, 0x0000, 0x0400}[rng.IntN(6)]
		}
		return uint16(0x2000+rng.IntN(0x2400)) | uint16(rng.IntN(2))<<15
	}
	if bb := legacyBlockBytes(t); bb != 0 {
		rb := n / 32 * bb
		w := make([]byte, rows*rb)
		for i := range w {
			w[i] = byte(rng.Uint32())
		}
		for r := range rows {
			for b := range n / 32 {
				blk := w[r*rb+b*bb:]
				binary.LittleEndian.PutUint16(blk, half())
				if t == gguf.Q4_1 || t == gguf.Q5_1 {
					binary.LittleEndian.PutUint16(blk[2:], half())
				}
			}
		}
		return w, rb
	}
	size := 4
	if t != gguf.F32 {
		size = 2
	}
	w := make([]byte, rows*n*size)
	for i := 0; i < rows*n; i++ {
		v := float32(rng.NormFloat64())
		if extreme && rng.IntN(50) == 0 {
			v *= 1e30
		}
		switch t {
		case gguf.F32:
			binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
		case gguf.F16:
			binary.LittleEndian.PutUint16(w[2*i:], half())
		case gguf.BF16:
			binary.LittleEndian.PutUint16(w[2*i:], gguf.F32ToBF16(v))
		}
	}
	return w, n * size
}

// randomActs quantises cols random rows of n values into form a.
func randomActs(rng *rand.Rand, a Act, cols, n int) ([]byte, int) {
	b, stride, _ := randomActRows(rng, a, cols, n)
	return b, stride
}

// randomActRows is randomActs that also returns the values quantised.
func randomActRows(rng *rand.Rand, a Act, cols, n int) ([]byte, int, []float32) {
	stride := a.RowBytes(n)
	out := make([]byte, a.Bytes(n, cols))
	x := make([]float32, cols*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		if rng.IntN(40) == 0 {
			x[i] = 0
		}
	}
	QuantizeRows(a, out, stride, x, n, 0, cols)
	return out, stride, x
}

// actColumn returns activation row c of a batch alone, in a buffer of its
// own: the row's bytes (or, grouped, a new group holding it first).
func actColumn(a Act, buf []byte, stride int, x []float32, n, c int) []byte {
	if a.Group() == 1 {
		return buf[c*stride:]
	}
	one := make([]byte, a.RowBytes(n))
	QuantizeRows(a, one, stride, x[c*n:(c+1)*n], n, 0, 1)
	return one
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// checkLevel runs kernel t of level l on one random shape and compares it
// with the reference of the same lane count bit for bit, checks that the
// kernel's Few (if any) over the narrowed activations gives the same bits,
// that a variant level's kernel (AVX512NoGather) gives its base level's
// bits, and that every output equals the one computed alone (one row, one
// column).
func checkLevel(t *testing.T, rng *rand.Rand, l Level, typ gguf.TensorType, rows, cols, n int, extreme bool) {
	t.Helper()
	k, ok := NewSet(l).For(typ)
	if !ok {
		t.Fatalf("%s: no %s kernel", l, typ)
	}
	ref, _ := levelRef(l, typ)
	w, wStride := randomWeights(rng, typ, rows, n, extreme)
	a, aStride, x := randomActRows(rng, k.Act, cols, n)
	outStride := rows + rng.IntN(3)
	got := make([]float32, cols*outStride)
	want := make([]float32, cols*outStride)
	k.Mul(n, w, wStride, rows, a, aStride, cols, got, outStride)
	ref.Mul(n, w, wStride, rows, a, aStride, cols, want, outStride)
	for c := range cols {
		for r := range rows {
			g, wv := got[c*outStride+r], want[c*outStride+r]
			if !sameBits(g, wv) {
				t.Fatalf("%s %s %dx%d n=%d: out[%d][%d] = %v (%#x), reference %v (%#x)", l, typ, rows, cols, n, c, r, g, math.Float32bits(g), wv, math.Float32bits(wv))
			}
		}
	}
	if k.Few != nil && cols <= FewCols {
		// the same call over the narrow copy of the activations
		narrow := make([]byte, NarrowBytes(n, cols))
		NarrowQ8G(narrow, a, n, cols)
		few := make([]float32, cols*outStride)
		k.Few(n, w, wStride, rows, a, narrow, aStride, cols, few, outStride)
		for c := range cols {
			for r := range rows {
				if g, wv := few[c*outStride+r], got[c*outStride+r]; !sameBits(g, wv) {
					t.Fatalf("%s %s %dx%d n=%d: Few out[%d][%d] = %v (%#x), Mul %v (%#x)", l, typ, rows, cols, n, c, r, g, math.Float32bits(g), wv, math.Float32bits(wv))
				}
			}
		}
	}
	if l.base() != l {
		checkSameAsBase(t, l, typ, n, w, wStride, rows, a, aStride, cols, got, outStride)
	}
	one := make([]float32, 1)
	for range 3 {
		c, r := rng.IntN(cols), rng.IntN(rows)
		k.Mul(n, w[r*wStride:], wStride, 1, actColumn(k.Act, a, aStride, x, n, c), aStride, 1, one, 1)
		if !sameBits(one[0], got[c*outStride+r]) {
			t.Fatalf("%s %s: out[%d][%d] alone %v, in the %dx%d call %v", l, typ, c, r, one[0], rows, cols, got[c*outStride+r])
		}
	}
}

// checkSameAsBase checks that the kernel of l's base level gives got, l's
// outputs, bit for bit, through Mul and (for up to FewCols columns) Few.
func checkSameAsBase(t *testing.T, l Level, typ gguf.TensorType, n int, w []byte, wStride, rows int, a []byte, aStride, cols int, got []float32, outStride int) {
	t.Helper()
	bk, _ := NewSet(l.base()).For(typ)
	outs := map[string][]float32{"Mul": make([]float32, cols*outStride)}
	bk.Mul(n, w, wStride, rows, a, aStride, cols, outs["Mul"], outStride)
	if bk.Few != nil && cols <= FewCols {
		narrow := make([]byte, NarrowBytes(n, cols))
		NarrowQ8G(narrow, a, n, cols)
		outs["Few"] = make([]float32, cols*outStride)
		bk.Few(n, w, wStride, rows, a, narrow, aStride, cols, outs["Few"], outStride)
	}
	for name, base := range outs {
		for c := range cols {
			for r := range rows {
				if g, wv := got[c*outStride+r], base[c*outStride+r]; !sameBits(g, wv) {
					t.Fatalf("%s %s %dx%d n=%d: out[%d][%d] = %v (%#x), %s's %s %v (%#x)", l, typ, rows, cols, n, c, r, g, math.Float32bits(g), l.base(), name, wv, math.Float32bits(wv))
				}
			}
		}
	}
}

func TestLegacyKernelsMatchReferenceBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, l := range availableLevels() {
		for _, typ := range legacyTypes {
			for _, sh := range [][3]int{{1, 1, 32}, {4, 1, 64}, {5, 3, 96}, {9, 7, 32}, {13, 13, 160}, {3, 2, 256}, {17, 6, 64}} {
				n := sh[2]
				if typ == gguf.F32 || typ == gguf.F16 || typ == gguf.BF16 {
					n += rng.IntN(20) // float rows need not be whole blocks
				}
				checkLevel(t, rng, l, typ, sh[0], sh[1], n, false)
				checkLevel(t, rng, l, typ, sh[0], sh[1], n, true)
			}
		}
	}
}

// TestGroupedKernelsLargeShapes runs the grouped kernels on shapes with
// several column groups, more groups than one pass keeps, and rows longer
// than a panel chunk; those of AVX512NoGather with extreme scales too
// (against the reference and AVX512's kernels).
func TestGroupedKernelsLargeShapes(t *testing.T) {
	if !supported(AVX512) {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1} {
		for _, sh := range [][3]int{{33, 40, 32 * (gChunk + 3)}, {16, 17, 64}, {3, groupRows*gMaxGroups + 5, 64},
			{32, 1, 64}, {48, 3, 32 * (gChunk + 3)}, {16, 2, 96}, {35, 4, 160}, {16*gDotTiles + 16, 1, 32},
			{16, 16 + gWideCols - 1, 64}, {33, 16 + gWideCols, 96}, {17, 23, 32 * (gChunk + 1)}} {
			checkLevel(t, rng, AVX512, typ, sh[0], sh[1], sh[2], false)
			checkLevel(t, rng, AVX512NoGather, typ, sh[0], sh[1], sh[2], true)
		}
	}
}

// quantInputs returns n values for the quantisation tests: of very
// different magnitudes, with zeros, values that fall on half steps when
// scaled, and the block [zero, zero+block) all zero.
func quantInputs(rng *rand.Rand, n, zero, block int) []float32 {
	x := make([]float32, n)
	for j := range x {
		x[j] = float32(rng.NormFloat64() * math.Exp(3*rng.NormFloat64()))
		switch rng.IntN(30) {
		case 0:
			x[j] = 0
		case 1:
			x[j] = float32(rng.IntN(255)-127) / 2 // ties after scaling
		}
	}
	if zero >= 0 {
		clear(x[zero : zero+block])
	}
	return x
}

// sameBytes fails the test at the first byte where got and want differ.
func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	for j := range got {
		if got[j] != want[j] {
			t.Fatalf("%s: byte %d = %#x, Go gives %#x", what, j, got[j], want[j])
		}
	}
}

// TestQuantizeLaneFastMatchesGo compares the assembly quantisation into an
// ActQ8G group with the Go one byte for byte.
func TestQuantizeLaneFastMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	const n = 256
	for i := range 50 {
		x := quantInputs(rng, n, []int{32, -1}[min(1, i%7)], 32)
		lane := i % groupRows
		got, want := make([]byte, ActQ8G.RowBytes(n)), make([]byte, ActQ8G.RowBytes(n))
		quantizeLaneFast(got, lane, x)
		quantizeLane(want, lane, x)
		sameBytes(t, fmt.Sprintf("case %d lane %d", i, lane), got, want)
	}
}

// TestQuantizeBlocksMatchesRows quantises rows into ActQ8G groups in
// block ranges (as parts of a step do) and compares with whole rows.
func TestQuantizeBlocksMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n = 320 // 10 blocks
	for _, T := range []int{1, 5, 16, 23} {
		x := quantInputs(rng, n*T, 32, 32)
		want := make([]byte, ActQ8G.Bytes(n, T))
		QuantizeRows(ActQ8G, want, ActQ8G.RowBytes(n), x, n, 0, T)
		for _, parts := range []int{1, 3, 4, 10} {
			got := make([]byte, len(want))
			for p := range parts {
				QuantizeBlocks(ActQ8G, got, ActQ8G.RowBytes(n), x, n, 0, T, 10*p/parts, 10*(p+1)/parts)
			}
			sameBytes(t, fmt.Sprintf("%d rows in %d parts", T, parts), got, want)
		}
	}
}

// TestQuantizeQ8KFastMatchesGo compares the assembly ActQ8K quantisation
// with QuantizeRow byte for byte.
func TestQuantizeQ8KFastMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for i := range 40 {
		n := 256 * (1 + i%5)
		x := quantInputs(rng, n, []int{0, -1}[min(1, i%3)], 256)
		got, want := make([]byte, ActQ8K.RowBytes(n)), make([]byte, ActQ8K.RowBytes(n))
		if !quantizeQ8KFast(got, x) {
			t.Skip("no assembly quantisation on this CPU")
		}
		QuantizeRow(ActQ8K, want, x)
		sameBytes(t, fmt.Sprintf("case %d (n=%d)", i, n), got, want)
	}
}

// TestReferenceMatchesFloat64 checks the reference kernels against a
// float64 dot product of the dequantised weights and activations, within a
// relative tolerance of the sum of magnitudes (the float32 accumulation).
func TestReferenceMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range legacyTypes {
		for _, L := range []int{8, 16} {
			ref, _ := RefKernel(typ, L)
			const rows, cols, n = 5, 3, 160
			w, ws := randomWeights(rng, typ, rows, n, false)
			a, as := randomActs(rng, ref.Act, cols, n)
			out := make([]float32, rows*cols)
			ref.Mul(n, w, ws, rows, a, as, cols, out, rows)
			for c := range cols {
				x := dequantAct(ref.Act, a[c*as:], n)
				for r := range rows {
					wv := dequantWeights(typ, w[r*ws:], n)
					var want, mag float64
					for i := range n {
						want += wv[i] * x[i]
						mag += math.Abs(wv[i] * x[i])
					}
					if got := float64(out[c*rows+r]); math.Abs(got-want) > 1e-5*mag+1e-30 {
						t.Errorf("%s L=%d out[%d][%d] = %v, float64 %v (magnitude %v)", typ, L, c, r, got, want, mag)
					}
				}
			}
		}
	}
}

// dequantWeights returns the values a row of type t stands for, decoded
// from the GGUF block layout independently of the kernels.
func dequantWeights(t gguf.TensorType, row []byte, n int) []float64 {
	out := make([]float64, n)
	half := func(off int) float64 { return float64(gguf.F16ToF32(binary.LittleEndian.Uint16(row[off:]))) }
	switch t {
	case gguf.F32:
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:])))
		}
	case gguf.F16:
		for i := range out {
			out[i] = half(2 * i)
		}
	case gguf.BF16:
		for i := range out {
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*i:])) << 16))
		}
	default:
		bb := legacyBlockBytes(t)
		for b := range n / 32 {
			o := b * bb
			d := half(o)
			var m float64
			var qs []byte
			var qh uint32
			switch t {
			case gguf.Q8_0:
				for j := range 32 {
					out[b*32+j] = d * float64(int8(row[o+2+j]))
				}
				continue
			case gguf.Q4_0:
				qs = row[o+2 : o+18]
			case gguf.Q4_1:
				m, qs = half(o+2), row[o+4:o+20]
			case gguf.Q5_0:
				qh, qs = binary.LittleEndian.Uint32(row[o+2:]), row[o+6:o+22]
			case gguf.Q5_1:
				m, qh, qs = half(o+2), binary.LittleEndian.Uint32(row[o+4:]), row[o+8:o+24]
			}
			for j := range 32 {
				v := float64(qs[j%16] & 0x0f)
				if j >= 16 {
					v = float64(qs[j%16] >> 4)
				}
				v += float64(qh>>j&1) * 16
				switch t {
				case gguf.Q4_0:
					out[b*32+j] = d * (v - 8)
				case gguf.Q5_0:
					out[b*32+j] = d * (v - 16)
				default:
					out[b*32+j] = d*v + m
				}
			}
		}
	}
	return out
}

func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 200000 {
		x := math.Float32frombits(rng.Uint32())
		y := math.Float32frombits(rng.Uint32())
		z := math.Float32frombits(rng.Uint32())
		if rng.IntN(2) == 0 { // cancellation-prone cases
			z = -float32(float64(x) * float64(y))
		}
		got := fma32(x, y, z)
		// exact reference: big-float sum rounded once
		want := exactFMA32(x, y, z)
		if !sameBits(got, want) {
			t.Fatalf("fma32(%v, %v, %v) = %v, want %v", x, y, z, got, want)
		}
	}
}

func FuzzLegacyKernels(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(3), uint8(2), uint8(1), false)
	f.Add(uint64(2), uint8(3), uint8(9), uint8(5), uint8(7), true)
	levels := availableLevels()
	f.Fuzz(func(t *testing.T, seed uint64, typ, rows, cols, blocks uint8, extreme bool) {
		rng := rand.New(rand.NewPCG(seed, 1))
		tt := legacyTypes[int(typ)%len(legacyTypes)]
		n := 32 * (1 + int(blocks%12))
		if legacyBlockBytes(tt) == 0 {
			n -= rng.IntN(32)
		}
		for _, l := range levels {
			t.Run(fmt.Sprint(l), func(t *testing.T) {
				checkLevel(t, rng, l, tt, 1+int(rows%24), 1+int(cols%40), n, extreme)
			})
		}
	})
}

// exactFMA32 computes x·y+z exactly with big floats and rounds once.
func exactFMA32(x, y, z float32) float32 {
	if isNaN32(x) || isNaN32(y) || isNaN32(z) {
		return float32(math.NaN())
	}
	p := float64(x) * float64(y)
	if math.IsInf(p, 0) || math.IsInf(float64(z), 0) || math.IsNaN(p) {
		return float32(p + float64(z))
	}
	bx := new(big.Float).SetPrec(200).SetFloat64(p)
	bx.Add(bx, new(big.Float).SetPrec(200).SetFloat64(float64(z)))
	r, _ := bx.Float32()
	if r == 0 && p+float64(z) == 0 {
		return float32(p + float64(z)) // sign of an exact zero
	}
	return r
}

func isNaN32(v float32) bool { return v != v }

// TestQuantizeRoundsLikeMathRound checks the fast rounding of QuantizeRow
// against math.Round on values at and around every half step.
func TestQuantizeRoundsLikeMathRound(t *testing.T) {
	x := make([]float32, 32)
	q := make([]byte, 32)
	for k := -254; k <= 254; k++ {
		for _, eps := range []float32{-1e-4, 0, 1e-4} {
			x[0] = 127 // scale 1
			x[1] = float32(k)/2 + eps
			x[2] = -x[1]
			d, _ := quantizeBlock(q, x)
			for i := 1; i < 3; i++ {
				want := max(-127, min(127, math.Round(float64(x[i]*(1/d)))))
				if got := float64(int8(q[i])); got != want {
					t.Fatalf("%v quantised to %v, math.Round gives %v", x[i], got, want)
				}
			}
		}
	}
}

// TestFusedTwiceChunks checks five to eight columns on rows long enough
// that the fused kernels' two passes go chunk by chunk (gTwiceBytes),
// with a last chunk and a tail of fewer than 16 rows, against the
// reference.
func TestFusedTwiceChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	n := 32 * 256
	rows := 2*gTwiceBytes/(n/32*legacyBlockBytes(gguf.Q8_0)) + 21
	for _, l := range availableLevels() {
		for _, tt := range legacyTypes {
			for _, cols := range []int{5, 8} {
				t.Run(fmt.Sprint(l, tt, cols), func(t *testing.T) { checkLevel(t, rng, l, tt, rows, cols, n, false) })
			}
		}
	}
}
