package routertrain

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// TestCurve checks the areas and thresholds on a ranking worked out by
// hand: scores 0.9 (differs), 0.8 (agrees), 0.7 (differs), 0.6 (agrees).
// Of the four (differs, agrees) pairs three are ordered right: AUC 3/4.
// Precision at recall 1/2 is 1, at recall 1 it is 2/3: AP 5/6.
func TestCurve(t *testing.T) {
	p, y := []float64{0.8, 0.9, 0.6, 0.7}, []uint8{0, 1, 0, 1}
	c := Curve(p, y)
	if got := AUC(c); math.Abs(got-0.75) > 1e-12 {
		t.Errorf("AUC = %v, want 0.75", got)
	}
	if got := AveragePrecision(c); math.Abs(got-5.0/6) > 1e-12 {
		t.Errorf("AP = %v, want 5/6", got)
	}
	for _, tc := range []struct {
		target Target
		want   float64
	}{
		{Target{Share: 0.5, Recall: -1}, 0.8}, {Target{Share: 0.25, Recall: -1}, 0.9}, {Target{Share: 1, Recall: -1}, 0.6},
		{Target{Share: -1, Recall: 1}, 0.7}, {Target{Share: -1, Recall: 0.5}, 0.9},
	} {
		if got := Threshold(c, tc.target); got != tc.want {
			t.Errorf("Threshold(%+v) = %v, want %v", tc.target, got, tc.want)
		}
	}
	if th := Threshold(c, Target{Share: 0, Recall: -1}); !(th > 0.9) || at(c, th).Share != 0 {
		t.Errorf("share 0: threshold %v sends %v", th, at(c, th).Share)
	}
	// Equal scores are one operating point: AUC one half.
	if got := AUC(Curve([]float64{0.5, 0.5, 0.5, 0.5}, y)); got != 0.5 {
		t.Errorf("AUC of equal scores = %v, want 0.5", got)
	}
	if (Target{Share: 0.2, Recall: 0.5}).check() == nil || (Target{Share: -1, Recall: -1}).check() == nil || (Target{Share: 1.5, Recall: -1}).check() == nil {
		t.Error("a target with both, neither or an out-of-range value passed")
	}
}

func TestSplitNeedsBothLabels(t *testing.T) {
	if _, _, err := split([]uint8{0, 0, 0, 1}, 0.2, randFor(1)); err == nil {
		t.Fatal("one positive accepted")
	}
	tr, ho, err := split([]uint8{0, 1, 0, 1, 0, 1, 0, 0, 0, 0}, 0.2, randFor(1))
	if err != nil {
		t.Fatal(err)
	}
	pos := func(idx []int) (n int) {
		for _, i := range idx {
			n += []int{0, 1, 0, 1, 0, 1, 0, 0, 0, 0}[i]
		}
		return n
	}
	if len(tr)+len(ho) != 10 || pos(ho) != 1 || len(ho) != 2 || pos(tr) != 2 {
		t.Fatalf("split: train %v held %v", tr, ho)
	}
}

func randFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

func TestFitOptionsRefused(t *testing.T) {
	ds := &Dataset{H: 1, Y: []uint8{0, 1, 0, 1}, X: []float32{1, 2, 3, 4}}
	for name, o := range map[string]FitOptions{
		"algorithm":   {Algorithm: "x", Target: Target{Share: 0.2, Recall: -1}},
		"co-llm dims": {Algorithm: CoLLM, HiddenDims: []int{4}, Target: Target{Share: 0.2, Recall: -1}},
		"dropout":     {Algorithm: R2R, Dropout: 1, Target: Target{Share: 0.2, Recall: -1}},
		"heldout":     {Algorithm: CoLLM, Heldout: 1, Target: Target{Share: 0.2, Recall: -1}},
		"target":      {Algorithm: CoLLM},
		"nan lr":      {Algorithm: CoLLM, LR: math.NaN(), Target: Target{Share: 0.2, Recall: -1}},
		"huge dims":   {Algorithm: R2R, HiddenDims: []int{1 << 20}, Target: Target{Share: 0.2, Recall: -1}},
		"zero dim":    {Algorithm: CITER, HiddenDims: []int{8, 0}, Target: Target{Share: 0.2, Recall: -1}},
	} {
		if _, err := Fit(context.Background(), ds, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
