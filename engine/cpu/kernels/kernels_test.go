package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// dequantAct returns the values an activation row stands for.
func dequantAct(a Act, row []byte, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		switch a {
		case ActF32:
			x[i] = float64(f32At(row, i))
		case ActQ8:
			x[i] = float64(f32At(row[n:], i/32)) * float64(int8(row[i]))
		case ActQ8K:
			x[i] = float64(f32At(row[n:], i/256)) * float64(int8(row[i]))
		}
	}
	return x
}

func TestQuantizeRowBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, a := range []Act{ActF32, ActQ8, ActQ8K} {
		n := 512
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * 3
		}
		x[7] = 0
		row := make([]byte, a.RowBytes(n))
		QuantizeRow(a, row, x)
		got := dequantAct(a, row, n)
		for i, v := range x {
			blockMax := 0.0
			for j := i / a.Block() * a.Block(); j < (i/a.Block()+1)*a.Block(); j++ {
				blockMax = max(blockMax, math.Abs(float64(x[j])))
			}
			if err := math.Abs(got[i] - float64(v)); err > blockMax/127*0.5001 {
				t.Fatalf("%d: value %d: %v stands for %v (error %v > half a step)", a, i, v, got[i], err)
			}
		}
		if a == ActQ8K {
			bs := row[n+4*(n/256):]
			for g := range n / 16 {
				var want int16
				for _, q := range row[16*g : 16*g+16] {
					want += int16(int8(q))
				}
				if s := int16(binary.LittleEndian.Uint16(bs[2*g:])); s != want {
					t.Fatalf("bsum %d = %d, want %d", g, s, want)
				}
			}
		}
	}
}

func TestReferenceQ8_0MatchesDequantised(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, rows, cols = 96, 3, 2
	rb := gguf.Q8_0.RowBytes(n)
	w := make([]byte, rows*rb)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	for r := range rows {
		for b := range n / 32 {
			binary.LittleEndian.PutUint16(w[r*rb+b*34:], 0x2c00+uint16(rng.IntN(0x800))) // finite scales
		}
	}
	a := make([]byte, cols*ActQ8.RowBytes(n))
	for c := range cols {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		QuantizeRow(ActQ8, a[c*ActQ8.RowBytes(n):], x)
	}
	out := make([]float32, rows*cols)
	k, ok := NewSet(Generic).For(gguf.Q8_0)
	if !ok {
		t.Fatal("no Q8_0 kernel")
	}
	k.Mul(n, w, rb, rows, a, ActQ8.RowBytes(n), cols, out, rows)
	for c := range cols {
		x := dequantAct(ActQ8, a[c*ActQ8.RowBytes(n):], n)
		for r := range rows {
			wf := make([]float32, n)
			if err := gguf.Dequantize(gguf.Q8_0, wf, w[r*rb:(r+1)*rb]); err != nil {
				t.Fatal(err)
			}
			var want, mag float64
			for i := range n {
				want += float64(wf[i]) * x[i]
				mag += math.Abs(float64(wf[i]) * x[i])
			}
			if got := float64(out[c*rows+r]); math.Abs(got-want) > 1e-6*mag {
				t.Errorf("out[%d][%d] = %v, want %v", c, r, got, want)
			}
		}
	}
}

// TestMulAllocatesNothing checks that no kernel of any level allocates: a
// decode step calls them hundreds of times.
func TestMulAllocatesNothing(t *testing.T) {
	const n, rows = 512, 64
	rng := rand.New(rand.NewPCG(7, 8))
	types := append([]gguf.TensorType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0}, kQuantTypes...)
	for _, l := range availableLevels() {
		set := NewSet(l)
		for _, typ := range types {
			k, ok := set.For(typ)
			if !ok {
				t.Fatalf("%s: no kernel for %s", l, typ)
			}
			w, ws := randomWeights(rng, typ, rows, n, false)
			for _, cols := range []int{1, 4, 16} {
				a, as := randomActs(rng, k.Act, cols, n)
				out := make([]float32, rows*cols)
				if allocs := testing.AllocsPerRun(5, func() { k.Mul(n, w, ws, rows, a, as, cols, out, rows) }); allocs != 0 {
					t.Errorf("%s %s cols=%d: %v allocations per call", l, typ, cols, allocs)
				}
			}
		}
	}
}
