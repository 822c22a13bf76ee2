package ensemble

import (
	"math"
	"testing"

	"github.com/tokenrouter/tokenrouter/route"
)

func TestWeightsGiveFractions(t *testing.T) {
	a, err := New(route.Spec{Models: []string{"a", "b", "c"}, Params: map[string]string{"weights": "1,2,1"}})
	if err != nil {
		t.Fatal(err)
	}
	var n [3]int
	for id := range uint64(400) {
		r := &route.Request{ID: id, Tokens: make([]int32, 10)}
		for pos := range 50 {
			n[a.(*Algorithm).pick(r, pos)]++
		}
	}
	for i, want := range []float64{0.25, 0.5, 0.25} {
		if got := float64(n[i]) / 20000; math.Abs(got-want) > 0.02 {
			t.Fatalf("model %d: fraction %.3f, want %.2f", i, got, want)
		}
	}
	for _, bad := range []string{"1", "1,-1", "0,0", "x,1"} {
		if _, err := New(route.Spec{Models: []string{"a", "b"}, Params: map[string]string{"weights": bad}}); err == nil {
			t.Fatalf("weights=%q accepted", bad)
		}
	}
}
