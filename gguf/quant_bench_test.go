package gguf

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkQuantize measures each encoder on N(0, 1) rows of 4096.
func BenchmarkQuantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, typ := range append([]TensorType{F16, BF16}, quantTypes...) {
		dst := make([]byte, typ.RowBytes(len(x)))
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if err := QuantizeInto(typ, dst, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
