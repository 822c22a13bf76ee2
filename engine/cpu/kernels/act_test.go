package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpf(t *testing.T) {
	if expf(-200) != 0 || !math.IsInf(float64(expf(100)), 1) || expf(0) != 1 || !math.IsNaN(float64(expf(float32(math.NaN())))) {
		t.Fatal("expf limits")
	}
	worst := 0.0
	for x := float32(-87); x < 88.7; x += 0.00173 {
		want := math.Exp(float64(x))
		worst = math.Max(worst, math.Abs(float64(expf(x))-want)/want)
	}
	if worst > 2e-7 {
		t.Fatalf("expf relative error up to %g", worst)
	}
}

func TestExpShift(t *testing.T) {
	xs := []float32{0, -1, -0.5, -10, -90, -200, 1e-3}
	ys := append([]float32(nil), xs...)
	expShiftRef(ys, 1e-3, 1)
	for i, x := range xs {
		if e := expf(x - 1e-3); ys[i] != e {
			t.Fatalf("element %d: %v, expf gives %v", i, ys[i], e)
		}
	}
	rng := rand.New(rand.NewPCG(27, 28))
	for _, n := range []int{1, 15, 16, 40, 333} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 30)
			switch rng.IntN(20) {
			case 0:
				x[i] = float32(math.NaN())
			case 1:
				x[i] = -1e30
			}
		}
		mx, scale := float32(80), float32(0.125+rng.Float64())
		want := append([]float32(nil), x...)
		expShiftRef(want, mx, scale)
		for _, l := range availableLevels() {
			got := append([]float32(nil), x...)
			NewSet(l).ExpShift()(got, mx, scale)
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s n=%d: e^((%v-%v)·%v) = %v, reference %v", l, n, x[i], mx, scale, got[i], want[i])
				}
			}
		}
	}
}

// swigluInputs returns n values around every branch of expf.
func swigluInputs(rng *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), 87.33, 87.3301, -88.72283, -88.7229, -88.5, -88.4, 88.8,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30, 1e30, -1e30}
	g := make([]float32, n)
	for i := range g {
		switch rng.IntN(4) {
		case 0:
			g[i] = special[rng.IntN(len(special))]
		case 1:
			g[i] = -88.72283 + rng.Float32()*0.4 // e^−g scaled by 2^128
		default:
			g[i] = float32(rng.NormFloat64() * math.Exp(2*rng.NormFloat64()))
		}
	}
	return g
}

func checkSwiGLU(t *testing.T, rng *rand.Rand, n int) {
	t.Helper()
	g := swigluInputs(rng, n)
	u := swigluInputs(rng, n)
	want := append([]float32(nil), g...)
	swigluRef(want, u)
	for _, l := range availableLevels() {
		got := append([]float32(nil), g...)
		NewSet(l).SwiGLU()(got, u)
		for i := range got {
			if !sameBits(got[i], want[i]) {
				t.Fatalf("%s: swiglu(%v, %v) = %v, reference %v", l, g[i], u[i], got[i], want[i])
			}
		}
	}
}

func TestSwiGLUMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{1, 7, 8, 16, 33, 4864} {
		checkSwiGLU(t, rng, n)
	}
}

func FuzzSwiGLU(f *testing.F) {
	f.Add(uint64(1), uint16(40))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16) {
		checkSwiGLU(t, rand.New(rand.NewPCG(seed, 5)), int(n%300))
	})
}

// TestGeGLU compares the GeGLU kernel with GELU's tanh form in float64,
// across the range where tanh saturates and where it does not.
func TestGeGLU(t *testing.T) {
	var g, u, want []float32
	for x := -12.0; x <= 12; x += 0.01 {
		g = append(g, float32(x))
		u = append(u, float32(1.5-x/10))
		gelu := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		want = append(want, float32(gelu*(1.5-x/10)))
	}
	NewSet(Generic).GeGLU()(g, u)
	for i, v := range g {
		if d := math.Abs(float64(v - want[i])); d > 2e-6*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("x=%v: got %v, want %v", -12+0.01*float64(i), v, want[i])
		}
	}
}
