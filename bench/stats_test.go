package bench

import (
	"math"
	"testing"
)

func TestPairedLead(t *testing.T) {
	a := map[int]float64{0: 10, 1: 12, 2: 11, 7: 99}
	b := map[int]float64{0: 9, 1: 11, 2: 10.5, 5: 0}
	m, h, n := PairedLead(a, b)
	// Differences 1, 1, 0.5 (rounds 5 and 7 are unpaired): mean 5/6,
	// sd 0.2887, se 0.1667, t(0.975, 2 df) = 4.3027.
	if n != 3 || math.Abs(m-5.0/6) > 1e-12 || math.Abs(h-4.302653*math.Sqrt(1.0/12)/math.Sqrt(3)) > 1e-5 {
		t.Fatalf("pairedLead = %v ± %v over %d", m, h, n)
	}
	if m, h, n := PairedLead(map[int]float64{3: 5}, map[int]float64{3: 2}); m != 3 || h != 0 || n != 1 {
		t.Fatalf("one pair: %v ± %v over %d", m, h, n)
	}
}
