package r2r

import (
	"math"
	"slices"
	"testing"
)

// TestTopKSkipsMasked: logits ruled out by a mask (−∞) never reach the
// router's features, which stay finite.
func TestTopKSkipsMasked(t *testing.T) {
	inf := float32(math.Inf(-1))
	dst := make([]float32, 4)
	if n := TopK([]float32{inf, 2, inf, 5, inf}, dst); n != 2 {
		t.Fatalf("top 4 of a masked vocabulary: %d values, want 2", n)
	}
	if want := []float32{5, 2, 0, 0}; !slices.Equal(dst, want) {
		t.Fatalf("top 4 of a masked vocabulary: %v, want %v", dst, want)
	}
	if n := TopK([]float32{1, 7, 3, 7, -2, 4}, dst); n != 4 || !slices.Equal(dst, []float32{7, 7, 4, 3}) {
		t.Fatalf("top 4: %d %v", n, dst)
	}
}
