package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// encodedTypes are the types QuantizeInto writes.
var encodedTypes = allTypes

// TestLevelRoundsToNearestEven pins the rounding helper.
func TestLevelRoundsToNearestEven(t *testing.T) {
	for _, c := range []struct{ v, want float32 }{
		{0.5, 0}, {1.5, 2}, {2.5, 2}, {-0.5, 0}, {-1.5, -2}, {-2.5, -2}, {0.49999997, 0}, {2.6, 3},
		{-7.4, -7}, {100, 7}, {-100, -8}, {float32(math.Inf(1)), 7}, {float32(math.Inf(-1)), -8},
	} {
		if got := level(c.v, -8, 7); got != c.want {
			t.Errorf("level(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// typeGeometry gives, for a quantised type, the elements over which one
// scale is chosen (a block, or a K-quant super-block) and the number of
// steps its plain scale divides the range into: a block's error is checked
// against one such step.
func typeGeometry(t TensorType) (span int, steps float64, withMin bool) {
	switch t {
	case Q4_0:
		return 32, 7.5, false // range ±amax over 16 levels of which one is used on one side only
	case Q4_1:
		return 32, 15, true
	case Q5_0:
		return 32, 15.5, false
	case Q5_1:
		return 32, 31, true
	case Q8_0, Q8_1:
		return 32, 127, false
	case Q8_K:
		return QK, 127, false
	case Q2_K:
		return QK, 3, true
	case Q3_K:
		return QK, 3.5, false
	case Q4_K:
		return QK, 15, true
	case Q5_K:
		return QK, 31, true
	case Q6_K:
		return QK, 31.5, false
	}
	return 1, math.Inf(1), false
}

// maxScaleFactor is how far a stored scale can exceed one step: the
// super-scale's integer range for K-quants, 1 otherwise.
func maxScaleFactor(t TensorType) float64 {
	switch t {
	case Q2_K:
		return 15
	case Q3_K:
		return 32
	case Q4_K, Q5_K:
		return 63
	case Q6_K:
		return 128
	}
	return 1
}

// roundTrip quantises x as t, checks the decoded values are finite, and
// returns them.
func roundTrip(t testing.TB, typ TensorType, x []float32) []float32 {
	t.Helper()
	q, err := Quantize(typ, x)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, y, q); err != nil {
		t.Fatal(err)
	}
	for i, v := range y {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s: element %d (input %v) decodes to %v", typ, i, x[i], v)
		}
	}
	return y
}

// checkStepBound fails unless, in every scale span of x, each decoded value
// is within one and a half plain steps (the span's range over the type's
// steps) of the input, plus the float16 resolution of the scales. Plain
// rounding errs by half a step; the searches may trade a clipped extreme
// for finer steps elsewhere. Spans whose values
// exceed what float16 scales can reach are skipped (they saturate).
func checkStepBound(t testing.TB, typ TensorType, x, y []float32) {
	t.Helper()
	span, steps, withMin := typeGeometry(typ)
	if typ == F32 || typ == F16 || typ == BF16 {
		return
	}
	for s := 0; s < len(x); s += span {
		lo, hi, amax := math.Inf(1), math.Inf(-1), 0.0
		for _, v := range x[s : s+span] {
			lo, hi, amax = min(lo, float64(v)), max(hi, float64(v)), max(amax, math.Abs(float64(v)))
		}
		rng := 2 * amax
		if withMin {
			rng = hi - min(lo, 0)
			if typ == Q4_1 || typ == Q5_1 {
				rng = hi - lo
			}
		}
		step := 1.5 * rng / steps
		reach := 60000 * maxScaleFactor(typ) // what float16 scales (and mins) can hold
		if typ != Q8_K && (rng/steps > reach || withMin && max(-lo, lo) > reach) {
			continue // beyond float16 scales: saturates
		}
		// Float16 scales: relative rounding 2^-11 of the largest level,
		// absolute resolution 2^-24 per scale unit.
		floor := amax*0x1p-10 + 0x1p-24*maxScaleFactor(typ)*(steps+1)
		if typ == Q4_1 || typ == Q5_1 {
			floor += max(math.Abs(lo), math.Abs(hi)) * 0x1p-11 // the stored min
		}
		for i := s; i < s+span; i++ {
			if err := math.Abs(float64(y[i]) - float64(x[i])); err > step+floor {
				t.Fatalf("%s: element %d: %v decodes to %v, error %g above 1.5 steps %g (+%g) of span [%g, %g]",
					typ, i, x[i], y[i], err, step, floor, lo, hi)
			}
		}
	}
}

// gaussianRows returns n values from N(0, sigma), every 500th (on average)
// multiplied by 20 when outliers is set.
func gaussianRows(seed uint64, n int, sigma float64, outliers bool) []float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sigma)
		if outliers && rng.IntN(500) == 0 {
			x[i] *= 20
		}
	}
	return x
}

// relRMSE is the root mean square of y − x over that of x, in float64.
func relRMSE(x, y []float32) float64 {
	var se, ss float64
	for i := range x {
		d := float64(y[i]) - float64(x[i])
		se += d * d
		ss += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(se / ss)
}

// gaussianBound is the largest relative RMS error each type may show on
// N(0, 1) rows (the measured values are about 5% below).
var gaussianBound = map[TensorType]float64{
	F32: 0, F16: 0.00022, BF16: 0.00176,
	Q4_0: 0.084, Q4_1: 0.073, Q5_0: 0.0415, Q5_1: 0.036, Q8_0: 0.0056, Q8_1: 0.0056, Q8_K: 0.0075,
	Q2_K: 0.283, Q3_K: 0.149, Q4_K: 0.074, Q5_K: 0.0374, Q6_K: 0.0183,
}

// TestQuantizeGaussianError round-trips N(0, 1) and N(0, 0.02) rows with
// and without outliers through every type: the error stays within the
// per-type bound and within one step everywhere.
func TestQuantizeGaussianError(t *testing.T) {
	for _, typ := range encodedTypes {
		x := gaussianRows(1, 8*QK, 1, false)
		y := roundTrip(t, typ, x)
		e := relRMSE(x, y)
		if e > gaussianBound[typ] {
			t.Errorf("%s: relative RMS error %.5f on N(0, 1), bound %.5f", typ, e, gaussianBound[typ])
		}
		t.Logf("%-5s relative RMS error on N(0, 1): %.5f", typ, e)
		checkStepBound(t, typ, x, y)
		for _, x := range [][]float32{gaussianRows(2, 8*QK, 0.02, false), gaussianRows(3, 16*QK, 1, true)} {
			checkStepBound(t, typ, x, roundTrip(t, typ, x))
		}
	}
}

// adversarialRows are rows meant to break scale searches: zeros,
// constants, spikes, alternating signs, offsets far from zero, magnitudes
// from subnormal float32 to the largest float32, and mixtures of those.
func adversarialRows() map[string][]float32 {
	n := QK
	fill := func(f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	rows := map[string][]float32{
		"zeros":         fill(func(int) float32 { return 0 }),
		"negative zero": fill(func(int) float32 { return float32(math.Copysign(0, -1)) }),
		"constant":      fill(func(int) float32 { return 0.75 }),
		"negative":      fill(func(int) float32 { return -3 }),
		"spike":         fill(func(i int) float32 { return float32(b2f(i == 77)) * 5 }),
		"neg spike":     fill(func(i int) float32 { return float32(b2f(i == 3)) * -1e-3 }),
		"alternating":   fill(func(i int) float32 { return float32(1 - 2*(i%2)) }),
		"ramp":          fill(func(i int) float32 { return float32(i) - 100 }),
		"offset":        fill(func(i int) float32 { return 1000 + 0.01*float32(i%7) }),
		"neg offset":    fill(func(i int) float32 { return -50 - float32(i%3) }),
		"f16 max":       fill(func(i int) float32 { return 65504 * float32(1-2*(i%2)) }),
		"above f16":     fill(func(i int) float32 { return 1e6 * float32(i%5-2) }),
		"huge":          fill(func(i int) float32 { return math.MaxFloat32 * float32(1-2*(i%2)) }),
		"huge and tiny": fill(func(i int) float32 { return []float32{3e38, 1e-38, -2e38, 0}[i%4] }),
		"1e30":          fill(func(i int) float32 { return 1e30 * float32(i%3-1) }),
		"tiny":          fill(func(i int) float32 { return 1e-30 * float32(i%9-4) }),
		"subnormal":     fill(func(i int) float32 { return math.SmallestNonzeroFloat32 * float32(i%5-2) }),
		"f16 subnormal": fill(func(i int) float32 { return 0x1p-24 * float32(i%11-5) }),
		"mixed scales":  fill(func(i int) float32 { return float32(math.Pow(10, float64(i%41-20))) * float32(1-2*(i/41%2)) }),
		"one group big": fill(func(i int) float32 { return float32(1+999*b2f(i < 16)) * float32(1-2*(i%2)) }),
		"half negative": fill(func(i int) float32 { return -float32(b2f(i < 128)) * float32(i%13) }),
	}
	return rows
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestQuantizeAdversarial checks every type on adversarial rows: the
// output is always finite, the error within one step wherever float16
// scales reach, and rows beyond their reach saturate with the right sign.
func TestQuantizeAdversarial(t *testing.T) {
	for name, x := range adversarialRows() {
		for _, typ := range encodedTypes {
			y := roundTrip(t, typ, x)
			if typ == F32 || typ == BF16 || typ == F16 {
				continue
			}
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				checkStepBound(t, typ, x, y)
				for i := range x {
					if x[i] > 1e20 && y[i] <= 0 || x[i] < -1e20 && y[i] >= 0 {
						t.Fatalf("element %d: %v decodes to %v", i, x[i], y[i])
					}
				}
			})
		}
	}
}

// plainError is the squared error of the plain scale rules, written here
// from the formats (no search, integers and scales nearest): symmetric
// blocks put the largest magnitude at the lowest level, blocks with a min
// spread [min, max] over all levels, and K-quant super-scales put the
// largest group scale at the top integer.
func plainError(typ TensorType, x []float32) float64 {
	type kind struct {
		group             int
		lo, hi, smax      float64
		withMin, twoLevel bool
	}
	k := map[TensorType]kind{
		Q4_0: {32, -8, 7, 0, false, false}, Q5_0: {32, -16, 15, 0, false, false},
		Q4_1: {32, 0, 15, 0, true, false}, Q5_1: {32, 0, 31, 0, true, false},
		Q2_K: {16, 0, 3, 15, true, true}, Q4_K: {32, 0, 15, 63, true, true}, Q5_K: {32, 0, 31, 63, true, true},
		Q3_K: {16, -4, 3, -32, false, true}, Q6_K: {16, -32, 31, -128, false, true},
	}[typ]
	f16 := func(v float64) float64 { return float64(F16ToF32(F32ToF16(float32(v)))) }
	near := func(v, lo, hi float64) float64 { return max(lo, min(hi, math.RoundToEven(v))) }
	var e float64
	span := k.group
	if k.twoLevel {
		span = QK
	}
	for s := 0; s < len(x); s += span {
		n := span / k.group
		scale, off := make([]float64, n), make([]float64, n)
		for g := range n {
			xs := x[s+g*k.group : s+(g+1)*k.group]
			lo, hi, ext := math.Inf(1), math.Inf(-1), 0.0
			for _, v := range xs {
				lo, hi = min(lo, float64(v)), max(hi, float64(v))
				if math.Abs(float64(v)) > math.Abs(ext) {
					ext = float64(v)
				}
			}
			if k.withMin {
				if k.twoLevel {
					lo = min(lo, 0)
				}
				scale[g], off[g] = (hi-lo)/k.hi, lo
			} else {
				scale[g] = ext / k.lo
			}
		}
		if k.twoLevel {
			var smax, omax, sext float64
			for g := range n {
				if math.Abs(scale[g]) > math.Abs(sext) {
					sext = scale[g]
				}
				smax, omax = max(smax, scale[g]), max(omax, -off[g])
			}
			d, dm := f16(smax/k.smax), f16(omax/k.smax)
			if !k.withMin {
				d = f16(sext / k.smax)
			}
			for g := range n {
				lo, hi := 0.0, math.Abs(k.smax)
				if !k.withMin {
					lo, hi = k.smax, -k.smax-1
				}
				if d != 0 {
					scale[g] = d * near(scale[g]/d, lo, hi)
				}
				if dm != 0 {
					off[g] = -dm * near(-off[g]/dm, 0, k.smax)
				}
			}
		} else {
			for g := range n {
				scale[g], off[g] = f16(scale[g]), f16(off[g])
			}
		}
		for g := range n {
			for _, v := range x[s+g*k.group : s+(g+1)*k.group] {
				q := 0.0
				if scale[g] != 0 {
					q = near((float64(v)-off[g])/scale[g], k.lo, k.hi)
				}
				r := float64(v) - (scale[g]*q + off[g])
				e += r * r
			}
		}
	}
	return e
}

// TestQuantizeSearchBeatsPlainScales checks that the scale searches
// improve on the plain rules on Gaussian rows with and without outliers.
func TestQuantizeSearchBeatsPlainScales(t *testing.T) {
	for _, typ := range []TensorType{Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		for _, outliers := range []bool{false, true} {
			x := gaussianRows(5, 32*QK, 1, outliers)
			y := roundTrip(t, typ, x)
			var e float64
			for i := range x {
				d := float64(y[i]) - float64(x[i])
				e += d * d
			}
			plain := plainError(typ, x)
			t.Logf("%-5s outliers %-5v: squared error %.4g, plain scales %.4g (%.1f%% less)", typ, outliers, e, plain, 100*(1-e/plain))
			if e >= plain {
				t.Errorf("%s (outliers %v): error %g not below the plain scales' %g", typ, outliers, e, plain)
			}
		}
	}
}

// TestQuantizeRejectsNonFinite checks the input checks.
func TestQuantizeRejectsNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		x := make([]float32, QK)
		x[100] = bad
		for _, typ := range quantTypes {
			if _, err := Quantize(typ, x); !errors.Is(err, ErrRange) {
				t.Errorf("%s with %v: %v, want ErrRange", typ, bad, err)
			}
		}
		if _, err := Quantize(F16, x); err != nil {
			t.Errorf("F16 with %v: %v", bad, err)
		}
	}
	if _, err := Quantize(Q4_K, make([]float32, 32)); !errors.Is(err, ErrFormat) {
		t.Errorf("32 elements as Q4_K: %v", err)
	}
	if err := QuantizeInto(Q8_0, make([]byte, 33), make([]float32, 32)); !errors.Is(err, ErrFormat) {
		t.Errorf("short destination: %v", err)
	}
	if _, err := Quantize(IQ4_NL, make([]float32, 32)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("IQ4_NL: %v", err)
	}
	// F16 saturates finite values beyond its range.
	h, _ := Quantize(F16, []float32{1e6, -70000})
	if a, b := binary.LittleEndian.Uint16(h), binary.LittleEndian.Uint16(h[2:]); a != 0x7BFF || b != 0xFBFF {
		t.Errorf("F16 saturation: %#04x %#04x", a, b)
	}
}

// FuzzQuantize quantises arbitrary finite float32 rows as every type: the
// decoded values are finite and within one step of the input.
func FuzzQuantize(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 192})
	f.Add(binary.LittleEndian.AppendUint32(nil, math.Float32bits(math.MaxFloat32)))
	f.Add(binary.LittleEndian.AppendUint32(nil, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := make([]float32, QK)
		for i := range x {
			if 4*i+4 > len(b) {
				break
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			if v-v == 0 {
				x[i] = v
			}
		}
		for _, typ := range encodedTypes {
			checkStepBound(t, typ, x, roundTrip(t, typ, x))
		}
	})
}
