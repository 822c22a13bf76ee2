package quantize

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// TestFallbacks checks the row-length fallbacks.
func TestFallbacks(t *testing.T) {
	for _, c := range []struct {
		typ  gguf.TensorType
		n    uint64
		want gguf.TensorType
	}{
		{gguf.Q4_K, 896, gguf.Q5_0}, {gguf.Q5_K, 576, gguf.Q5_1}, {gguf.Q6_K, 960, gguf.Q8_0},
		{gguf.Q2_K, 896, gguf.Q4_0}, {gguf.Q3_K, 896, gguf.Q4_0}, {gguf.Q4_K, 1536, gguf.Q4_K},
		{gguf.Q4_0, 48, gguf.F16}, {gguf.Q6_K, 80, gguf.F16}, {gguf.F16, 7, gguf.F16},
	} {
		if got := fallback(c.typ, c.n); got != c.want {
			t.Errorf("fallback(%s, %d) = %s, want %s", c.typ, c.n, got, c.want)
		}
	}
	for name, want := range map[string]int{"blk.12.ffn_down.weight": 12, "blk.x.a": -1, "output.weight": -1, "blk.3": -1} {
		if got, ok := layerOf(name); ok != (want >= 0) || ok && got != want {
			t.Errorf("layerOf(%q) = %d, %v", name, got, ok)
		}
	}
}
