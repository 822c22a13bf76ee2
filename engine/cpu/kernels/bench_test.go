package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// BenchmarkMul measures each level's kernels on a weight matrix far larger
// than the caches (bytes/s counts weight bytes) with 1, 4, 16, 22 and 24
// activation columns (22: a group of 16 and one of 6, the fewest that
// takes the 16-column micro-kernel; 24: two groups).
func BenchmarkMul(b *testing.B) {
	const n, rows = 896, 1 << 16
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q5_0, gguf.F16} {
		w, ws := randomWeights(rng, typ, rows, n, false)
		for _, l := range availableLevels()[1:] {
			k, _ := NewSet(l).For(typ)
			for _, cols := range []int{1, 4, 16, 22, 24} {
				a, as := randomActs(rng, k.Act, cols, n)
				out := make([]float32, rows*cols)
				b.Run(fmt.Sprintf("%s/%s/cols=%d", typ, l, cols), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						k.Mul(n, w, ws, rows, a, as, cols, out, rows)
					}
					b.ReportMetric(float64(b.N)*float64(rows*cols*n)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkDecodeInCache measures Q8_0's fused one- and four-column
// kernels of AVX512 and AVX512NoGather (the scales gathered or loaded one
// by one) on weights that stay in the second-level cache, where the
// kernels' own work, not memory, sets the time.
func BenchmarkDecodeInCache(b *testing.B) {
	const n, rows = 896, 256
	rng := rand.New(rand.NewPCG(3, 4))
	w, ws := randomWeights(rng, gguf.Q8_0, rows, n, false)
	for _, l := range []Level{AVX512, AVX512NoGather} {
		if !supported(l) {
			continue
		}
		k, _ := NewSet(l).For(gguf.Q8_0)
		for _, cols := range []int{1, 4} {
			a, as := randomActs(rng, k.Act, cols, n)
			out := make([]float32, rows*cols)
			b.Run(fmt.Sprintf("%s/cols=%d", l, cols), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					k.Mul(n, w, ws, rows, a, as, cols, out, rows)
				}
			})
		}
	}
}
