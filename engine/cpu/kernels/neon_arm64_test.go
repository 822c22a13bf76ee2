package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// neonLevels are the arm64 levels this CPU runs.
func neonLevels(t testing.TB) []Level {
	var ls []Level
	for _, l := range []Level{NEON, NEONDot} {
		if supported(l) {
			ls = append(ls, l)
		}
	}
	if len(ls) < 2 {
		t.Logf("this CPU runs %v only: NEONDot is not tested (under qemu, set QEMU_CPU=max)", ls)
	}
	return ls
}

// neonKTypes are the K-quant types with NEON kernels.
var neonKTypes = []gguf.TensorType{gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// TestNEONLevels checks that Detect, supported and the test helpers see
// the arm64 levels, and that each of them has its assembly for every type
// it is written for (so that the other tests, which go through
// availableLevels, test it).
func TestNEONLevels(t *testing.T) {
	if Detect() < NEON {
		t.Fatalf("Detect() = %v on arm64", Detect())
	}
	for _, l := range []Level{AVX2, AVX512} {
		if supported(l) {
			t.Errorf("%v reported as supported on arm64", l)
		}
	}
	levels := availableLevels()
	for _, l := range neonLevels(t) {
		found := false
		for _, al := range levels {
			found = found || al == l
		}
		if !found {
			t.Errorf("availableLevels() = %v lacks %v", levels, l)
		}
		tiles := fastTiles(l)
		for _, typ := range legacyTypes {
			if tiles[typ] == nil {
				t.Errorf("%v: no %v tiles", l, typ)
			}
			want, _ := RefKernel(typ, 8)
			if k, _ := NewSet(l).For(typ); k.Act != want.Act || Lanes(l) != 8 {
				t.Errorf("%v %v: Act %v, %d lanes", l, typ, k.Act, Lanes(l))
			}
		}
		for _, typ := range neonKTypes {
			if kquantFast(typ, l) == nil {
				t.Errorf("%v: no %v kernel", l, typ)
			}
		}
		if p, err := ParseLevel(l.String()); err != nil || p != l {
			t.Errorf("ParseLevel(%q) = %v, %v", l.String(), p, err)
		}
	}
}

// kqFusedRef is the arithmetic of the NEON K-quant kernels in Go: per
// output, per super-block in order, the exact integer sums of mulKRef,
// then t = d·dot rounded, t −= dm·off fused, acc += da·t fused. It is
// mulKRef with its multiply-adds fused, as the Go compiler fuses them on
// arm64 (checked by TestKQuantNEONBitExact).
func kqFusedRef(kt kType) MulFunc {
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
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
					var dot, off int32
					for g := range 16 {
						var s int32
						for i := 16 * g; i < 16*g+16; i++ {
							s += int32(blk.u[i]) * int32(int8(act[b*256+i]))
						}
						dot += int32(blk.sc[g]) * s
						off += int32(blk.mn[g]) * int32(int16(binary.LittleEndian.Uint16(bsums[2*(16*b+g):])))
					}
					t := fma32(-blk.dm, float32(off), float32(blk.d*float32(dot)))
					acc = fma32(f32At(act[n:], b), t, acc)
				}
				out[c*outStride+r] = acc
			}
		}
	}
}

// checkKQuantNEON runs the NEON kernels of typ on one random call and
// compares every output with kqFusedRef and with mulKRef bit for bit.
func checkKQuantNEON(t *testing.T, rng *rand.Rand, levels []Level, typ gguf.TensorType, n, rows, cols, wPad, aPad, oPad int, raw []byte) {
	t.Helper()
	rb := n / 256 * kTypeOf(typ).bytes
	wStride, aStride, outStride := rb+wPad, ActQ8K.RowBytes(n)+aPad, rows+oPad
	w := randKWeights(rng, typ, n, rows, wStride)
	copy(w, raw)
	fixKScales(rng, typ, w, rows, rb, wStride)
	a := randActQ8K(rng, n, cols, aStride)
	size := (cols-1)*outStride + rows
	model, ref := make([]float32, size), make([]float32, size)
	kqFusedRef(kTypeOf(typ))(n, w, wStride, rows, a, aStride, cols, model, outStride)
	mulKRef(kTypeOf(typ))(n, w, wStride, rows, a, aStride, cols, ref, outStride)
	for _, l := range levels {
		got := make([]float32, size)
		k, _ := NewSet(l).For(typ)
		k.Mul(n, w, wStride, rows, a, aStride, cols, got, outStride)
		for c := range cols {
			for r := range rows {
				i := c*outStride + r
				if !sameBits(got[i], model[i]) {
					t.Fatalf("%v %v n=%d %dx%d: out[%d][%d] = %v (%#x), model %v (%#x)",
						l, typ, n, rows, cols, c, r, got[i], math.Float32bits(got[i]), model[i], math.Float32bits(model[i]))
				}
				if !sameBits(got[i], ref[i]) {
					t.Fatalf("%v %v n=%d %dx%d: out[%d][%d] = %v (%#x), mulKRef %v (%#x): the compiler no longer fuses mulKRef as kqFusedRef does",
						l, typ, n, rows, cols, c, r, got[i], math.Float32bits(got[i]), ref[i], math.Float32bits(ref[i]))
				}
			}
		}
	}
}

// TestKQuantNEONBitExact compares the NEON K-quant kernels with the Go
// arithmetic they implement, bit for bit, on shapes that take every
// column count of the assembly, several column groups and row chunks.
func TestKQuantNEONBitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	levels := neonLevels(t)
	for _, typ := range neonKTypes {
		for _, s := range [][3]int{{256, 1, 1}, {512, 7, 2}, {768, 3, 3}, {1024, 5, 4}, {19 * 256, 4, 9}, {256, 70, 6}, {2048, 2, 13}} {
			t.Run(fmt.Sprintf("%v/%v", typ, s), func(t *testing.T) {
				checkKQuantNEON(t, rng, levels, typ, s[0], s[1], s[2], rng.IntN(9), rng.IntN(9), rng.IntN(3), nil)
			})
		}
	}
}

// FuzzKQuantNEON compares the NEON K-quant kernels with their Go
// arithmetic bit for bit on the fuzzer's super-block bytes (scales made
// finite) and random shapes and strides.
func FuzzKQuantNEON(f *testing.F) {
	f.Add(uint64(1), uint32(0), uint8(0), []byte{})
	f.Add(uint64(2), uint32(0xffffffff), uint8(1), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add(uint64(3), uint32(0x12345678), uint8(2), make([]byte, 300))
	levels := neonLevels(f)
	f.Fuzz(func(t *testing.T, seed uint64, shape uint32, which uint8, raw []byte) {
		rng := rand.New(rand.NewPCG(seed, uint64(shape)))
		typ := neonKTypes[int(which)%len(neonKTypes)]
		n := 256 * (1 + int(shape%8))
		rows := 1 + int(shape>>3%9)
		cols := 1 + int(shape>>7%20)
		checkKQuantNEON(t, rng, levels, typ, n, rows, cols, int(shape>>12%8), int(shape>>15%8), int(shape>>18%3), raw)
	})
}

// neonRandomIters is how many random cases TestNEONRandomCases draws per
// family (a tenth with -short). The fuzz targets cannot run under a
// user-mode emulator (the fuzzing engine starts its workers by executing
// the test binary itself), so this test stands in for them there: it runs
// their bodies on random inputs.
const neonRandomIters = 200

// TestNEONRandomCases runs the bodies of FuzzKQuantNEON and
// FuzzLegacyKernels on random inputs at the NEON levels, bit for bit.
func TestNEONRandomCases(t *testing.T) {
	iters := neonRandomIters
	if testing.Short() {
		iters /= 10
	}
	levels := neonLevels(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for i := range iters {
		shape := rng.Uint32()
		typ := neonKTypes[i%len(neonKTypes)]
		raw := make([]byte, rng.IntN(400))
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		n := 256 * (1 + int(shape%8))
		rows := 1 + int(shape>>3%9)
		cols := 1 + int(shape>>7%20)
		checkKQuantNEON(t, rng, levels, typ, n, rows, cols, int(shape>>12%8), int(shape>>15%8), int(shape>>18%3), raw)
	}
	for i := range iters {
		typ := legacyTypes[i%len(legacyTypes)]
		n := 32 * (1 + rng.IntN(12))
		if legacyBlockBytes(typ) == 0 {
			n -= rng.IntN(32)
		}
		rows, cols, extreme := 1+rng.IntN(24), 1+rng.IntN(40), rng.IntN(2) == 0
		for _, l := range levels {
			checkLevel(t, rng, l, typ, rows, cols, n, extreme)
		}
	}
}
