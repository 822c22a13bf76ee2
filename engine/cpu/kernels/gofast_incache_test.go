package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// BenchmarkGenericInCache measures the Generic level's one-column (GEMV)
// kernels on a weight matrix small enough to stay in the L1/L2 caches
// (about 32 KiB), called again and again: the kernels' compute rate, in
// weight bytes per second, without the memory's. Set next to the machine's
// read bandwidth it bounds what decode with --kernels generic can reach.
// The weights are quantised from normal values, as a model's are, with
// the row lengths of a small model's projections (576 and 1536).
func BenchmarkGenericInCache(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q5_0, gguf.Q4_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		for _, n := range []int{576, 1536} {
			if n%typ.BlockSize() != 0 {
				continue
			}
			rows := max(1, 32<<10/typ.RowBytes(n))
			w, ws, a, as := goData(rng, typ, 2, n, rows, 1, 0, 0)
			out := make([]float32, rows)
			k, _ := goKernel(typ)
			b.Run(fmt.Sprintf("%v/n=%d/rows=%d", typ, n, rows), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				b.ReportAllocs()
				for b.Loop() {
					k.Mul(n, w, ws, rows, a, as, 1, out, rows)
				}
				b.ReportMetric(float64(b.N)*float64(rows*n)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
