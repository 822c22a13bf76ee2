package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// checkAttention compares each level's attention kernels with the
// reference bit for bit on one random shape.
func checkAttention(t *testing.T, rng *rand.Rand, hd, heads, m, stride int) {
	t.Helper()
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		}
		return x
	}
	q, kt := rnd(heads*hd), rnd(hd*KeyBlock)
	sStride := KeyBlock + rng.IntN(5)
	want := make([]float32, (heads-1)*sStride+KeyBlock)
	scoresRef(q, hd, kt, want, sStride)
	e, v, out0 := rnd(m), rnd((m-1)*stride+hd), rnd(hd)
	wantOut := append([]float32(nil), out0...)
	valuesRef(e, v, stride, wantOut)
	for _, l := range availableLevels() {
		scores, values := NewSet(l).Attention()
		got := make([]float32, len(want))
		scores(q, hd, kt, got, sStride)
		for h := range heads {
			for p := range KeyBlock {
				if i := h*sStride + p; !sameBits(got[i], want[i]) {
					t.Fatalf("%s hd=%d heads=%d: score[%d][%d] = %v, reference %v", l, hd, heads, h, p, got[i], want[i])
				}
			}
		}
		out := append([]float32(nil), out0...)
		values(e, v, stride, out)
		for d := range out {
			if !sameBits(out[d], wantOut[d]) {
				t.Fatalf("%s hd=%d m=%d stride=%d: value[%d] = %v, reference %v", l, hd, m, stride, d, out[d], wantOut[d])
			}
		}
	}
}

func TestAttentionKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, hd := range []int{8, 12, 16, 32, 64, 128, 80} {
		for _, heads := range []int{1, 3, 4, 7, 9} {
			m := 1 + rng.IntN(KeyBlock)
			checkAttention(t, rng, hd, heads, m, hd*(1+rng.IntN(3)))
		}
	}
}

func TestAttentionReferenceSumsInOrder(t *testing.T) {
	// scores: one head, the products rounded and added in order of d
	q := []float32{1e8, 1, -1e8}
	kt := make([]float32, 3*KeyBlock)
	for p := range KeyBlock {
		kt[p], kt[KeyBlock+p], kt[2*KeyBlock+p] = 1, 1, 1
	}
	s := make([]float32, KeyBlock)
	scoresRef(q, 3, kt, s, KeyBlock)
	if s[0] != 0 { // (1e8 + 1) rounds to 1e8 in float32, minus 1e8
		t.Fatalf("score %v, want 0 (in-order float32 sum)", s[0])
	}
	out := []float32{0}
	valuesRef([]float32{1e8, 1, -1e8}, []float32{1, 1, 1}, 1, out)
	if out[0] != 0 {
		t.Fatalf("value %v, want 0 (in-order float32 sum)", out[0])
	}
}

func FuzzAttention(f *testing.F) {
	f.Add(uint64(1), uint8(64), uint8(7), uint8(16), uint8(1))
	f.Add(uint64(2), uint8(8), uint8(1), uint8(3), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, hd, heads, m, pad uint8) {
		rng := rand.New(rand.NewPCG(seed, 3))
		h := 1 + int(hd%128)
		t.Run(fmt.Sprint(h), func(t *testing.T) {
			checkAttention(t, rng, h, 1+int(heads%9), 1+int(m%KeyBlock), h+int(pad%9))
		})
	})
}
