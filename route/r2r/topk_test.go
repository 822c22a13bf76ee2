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
	topK([]float32{inf, 2, inf, 5, inf}, dst)
	if want := []float32{5, 2, 0, 0}; !slices.Equal(dst, want) {
		t.Fatalf("top 4 of a masked vocabulary: %v, want %v", dst, want)
	}
}
