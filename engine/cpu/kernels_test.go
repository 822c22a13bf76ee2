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
	y := append([]float32(nil), nw...)
	axpy(0.5, x, y)
	for i := range y {
		if want := float64(nw[i]) + 0.5*float64(x[i]); !approx(y[i], want, 1) {
			t.Fatalf("axpy[%d] = %v, want %v", i, y[i], want)
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
