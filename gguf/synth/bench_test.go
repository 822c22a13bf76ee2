package synth

import (
	"context"
	"io"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf/quantize"
)

// BenchmarkWrite generates two layers of the Qwen2.5-0.5B shape (with a
// small vocabulary) per op on two threads; bytes are F32 weight bytes.
func BenchmarkWrite(b *testing.B) {
	s, _ := Lookup("qwen2.5-0.5b")
	s.Layers, s.Vocab = 2, 1024
	var n int64
	for _, t := range s.Tensors() {
		n += int64(t.Elems())
	}
	for _, mix := range []string{"Q8_0", "Q4_K_M", "Q6_K", "F16"} {
		m, _ := quantize.Lookup(mix)
		b.Run(mix, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := Write(context.Background(), io.Discard, s, m, Options{Seed: 1, Threads: 2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
