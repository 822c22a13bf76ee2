package engine

import (
	"math"
	"testing"
)

func TestLogProb(t *testing.T) {
	logits := []float32{1, 2, 3}
	// log(e^2 / (e^1 + e^2 + e^3)), worked out by hand.
	want := 2 - math.Log(math.Exp(1)+math.Exp(2)+math.Exp(3))
	if got := LogProb(logits, 1); math.Abs(got-want) > 1e-12 {
		t.Errorf("LogProb = %v, want %v", got, want)
	}
	for _, tok := range []int32{-1, 3} {
		if got := LogProb(logits, tok); !math.IsInf(got, -1) {
			t.Errorf("LogProb(tok %d) = %v, want -Inf", tok, got)
		}
	}
}
