package lab

import (
	"math"
	"slices"
	"testing"
)

func TestDecide(t *testing.T) {
	pts := []ValidatePoint{
		{byRound: map[int]float64{0: 100, 1: 101, 2: 99}},
		{byRound: map[int]float64{0: 110, 1: 111, 2: 109.5}}, // best
		{byRound: map[int]float64{0: 109, 1: 112, 2: 109}},   // close: not yet resolved
		{byRound: map[int]float64{0: 50, 1: 51, 2: 52}},
	}
	c := decide(pts, []int{0, 1, 2, 3})
	if c.best != 1 || c.runnerUp != 2 || !slices.Equal(c.open, []int{2}) || c.pairs != 3 || math.Abs(c.margin-1.0/6) > 1e-12 {
		t.Fatalf("contest %+v", c)
	}
	pts[2].byRound = map[int]float64{0: 108, 1: 109, 2: 107.6}
	if c := decide(pts, []int{0, 1, 2, 3}); c.best != 1 || len(c.open) != 0 || c.runnerUp != 2 {
		t.Fatalf("resolved contest %+v", c)
	}
}

// TestVerdict checks the comparison of the predicted with the measured best:
// the model's own margin, and whether the measurement ranks the predicted
// best below the measured one.
func TestVerdict(t *testing.T) {
	pts := []ValidatePoint{
		{Thresholds: []int{1, 1}, Predicted: 200.0, byRound: map[int]float64{0: 199, 1: 205, 2: 201}},
		{Thresholds: []int{1, 2}, Predicted: 200.5, byRound: map[int]float64{0: 203, 1: 204, 2: 202}}, // predicted best
		{Thresholds: []int{1, 3}, Predicted: 150, byRound: map[int]float64{0: 150, 1: 151, 2: 149}},
	}
	idx := []int{0, 1, 2}
	s := verdict(pts, idx, decide(pts, idx))
	// Measured best B1=2 leads B1=1 by 4/3 ± a wide interval: unresolved, but it is the predicted best.
	if !s.Match || !s.Consistent || s.Resolved || s.PredictedBestB1 != 2 || math.Abs(s.PredictedMargin-0.5) > 1e-12 || s.PredictedLead != 0 {
		t.Fatalf("verdict %+v", s)
	}
	// Now B1=1 measures best, within the noise of B1=2: no match, consistent.
	pts[0].byRound = map[int]float64{0: 204, 1: 206, 2: 201}
	s = verdict(pts, idx, decide(pts, idx))
	if s.Match || !s.Consistent || s.MeasuredBestB1 != 1 || math.Abs(s.PredictedLead-2.0/3) > 1e-12 || !(s.PredictedLeadCI95 > s.PredictedLead) {
		t.Fatalf("verdict %+v", s)
	}
	// And clearly ahead of it: inconsistent.
	pts[0].byRound = map[int]float64{0: 213, 1: 214.5, 2: 212}
	if s = verdict(pts, idx, decide(pts, idx)); s.Match || s.Consistent || !(s.PredictedLead-s.PredictedLeadCI95 > 0) {
		t.Fatalf("verdict %+v", s)
	}
}
