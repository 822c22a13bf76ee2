package rstitch

import (
	"math"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

func TestEntropyAndRule(t *testing.T) {
	if h := Entropy([]float32{3, 3, 3, 3}); math.Abs(h-1) > 1e-9 {
		t.Fatalf("uniform: %v", h)
	}
	if h := Entropy([]float32{100, 0, 0, 0}); h > 1e-9 {
		t.Fatalf("one-hot: %v", h)
	}
	sharp, flat := []float32{9, 0, 0, 0}, []float32{1, 1, 1, 0.9}
	a := &Algorithm{Tau: 0.5}
	for _, c := range []struct {
		model   int
		logits  []float32
		next    int
		dropped bool
	}{{0, sharp, 0, false}, {0, flat, 1, true}, {1, flat, 1, false}, {1, sharp, 0, false}} {
		d := []route.Decision{{Next: c.model, Cut: -1, Token: 7, Commit: true}}
		a.Route(&route.Step{Model: c.model, Requests: []*route.Request{{}}, Outputs: []engine.Output{{Token: 7, Logits: c.logits}}}, d)
		if d[0].Next != c.next || (d[0].Token == route.NoToken) != c.dropped {
			t.Fatalf("model %d logits %v: %+v", c.model, c.logits, d[0])
		}
	}
}

// TestEntropyMasked: tokens ruled out by a mask (logit −∞) count as
// probability 0, not NaN.
func TestEntropyMasked(t *testing.T) {
	inf := float32(math.Inf(-1))
	got := Entropy([]float32{0, 0, inf, inf})
	if want := math.Log(2) / math.Log(4); math.Abs(got-want) > 1e-12 {
		t.Fatalf("entropy of two equal tokens of four: %v, want %v", got, want)
	}
}
