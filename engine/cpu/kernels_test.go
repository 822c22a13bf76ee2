package cpu

import (
	"encoding/binary"
	"math"
	"testing"
)

// Plain reference kernels, written for clarity; the fast kernels must agree.

func dotRef(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func rmsnormRef(x, w []float32, eps float32) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	sc := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float64, len(x))
	for i := range x {
		out[i] = float64(x[i]) * sc * float64(w[i])
	}
	return out
}

func softmaxRef(x []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	out := make([]float64, len(x))
	sum := 0.0
	for i, v := range x {
		out[i] = math.Exp(float64(v) - mx)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// floatsFrom turns fuzz bytes into bounded float32 values.
func floatsFrom(b []byte, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		var u uint16
		if len(b) >= 2 {
			u = binary.LittleEndian.Uint16(b)
			b = b[2:]
		} else {
			u = uint16(i*7919 + 13)
		}
		out[i] = (float32(u)/65535 - 0.5) * 4
	}
	return out
}

func approx(got float32, want, scale float64) bool {
	return math.Abs(float64(got)-want) <= 1e-5*scale+1e-6
}

// checkKernels compares the vector helpers with float64 references.
func checkKernels(t *testing.T, data []byte, cols int) {
	w := floatsFrom(data, cols)
	in := floatsFrom(data[min(len(data), 7):], cols)
	x := in[:cols]
	if d := dot(x, w[:cols]); !approx(d, dotRef(x, w[:cols]), float64(cols)*4) {
		t.Fatalf("dot %v, reference %v", d, dotRef(x, w[:cols]))
	}
	nw := floatsFrom(data[min(len(data), 3):], cols)
	out := make([]float32, cols)
	rmsnorm(out, x, nw, 1e-5)
	for i, v := range rmsnormRef(x, nw, 1e-5) {
		if !approx(out[i], v, 10) {
			t.Fatalf("rmsnorm[%d] = %v, reference %v", i, out[i], v)
		}
	}
	sm := append([]float32(nil), x...)
	for i := range sm {
		sm[i] *= 20
	}
	ref := softmaxRef(sm)
	softmax(sm)
	for i, v := range ref {
		if !approx(sm[i], v, 1) {
			t.Fatalf("softmax[%d] = %v, reference %v", i, sm[i], v)
		}
	}
	y := append([]float32(nil), nw...)
	axpy(0.5, x, y)
	for i := range y {
		if want := float64(nw[i]) + 0.5*float64(x[i]); !approx(y[i], want, 1) {
			t.Fatalf("axpy[%d] = %v, want %v", i, y[i], want)
		}
	}
	for _, v := range x {
		e := float64(v) * 10
		if got, want := expf(float32(e)), math.Exp(float64(float32(e))); math.Abs(float64(got)-want) > 2e-7*want {
			t.Fatalf("expf(%v) = %v, want %v", e, got, want)
		}
	}
}

func TestKernelsAgainstReference(t *testing.T) {
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(i*131 + i/7)
	}
	for _, cols := range []int{1, 7, 32, 64, 96, 173} {
		checkKernels(t, data, cols)
	}
	if expf(-200) != 0 || !math.IsInf(float64(expf(100)), 1) || expf(0) != 1 {
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
	xs := []float32{0, -1, -0.5, -10, -90, -200, 1e-3}
	ys := append([]float32(nil), xs...)
	sum := expShiftSum(ys, 1e-3, 1)
	want := 0.0
	for i, x := range xs {
		e := expf(x - 1e-3)
		want += float64(e)
		if ys[i] != e {
			t.Fatalf("expShiftSum element %d: %v, expf gives %v", i, ys[i], e)
		}
	}
	if math.Abs(float64(sum)-want) > 1e-6 {
		t.Fatalf("expShiftSum sum %v, want %v", sum, want)
	}
}

// FuzzKernels compares the vector helpers with the plain reference ones on
// random lengths and values (the weight and attention kernels have their
// own fuzz tests in package kernels).
func FuzzKernels(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5}, uint8(3), uint8(1), uint8(2))
	f.Add([]byte{200, 100, 50}, uint8(16), uint8(2), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, rows, blocks, T uint8) {
		checkKernels(t, data, 32*(int(blocks%4)+1)-int(T%7))
	})
}
