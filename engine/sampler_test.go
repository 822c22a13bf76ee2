package engine

import (
	"math"
	"slices"
	"testing"
)

func TestPenalize(t *testing.T) {
	logits := []float32{1, 2, -1, 0.5, 3, -2}
	// prompt: 0 1 1; output: 2 2 3 4 2 (token 2 three times); position 7
	// sees the first seven (the last 2 is after it).
	sp := Sampling{History: []int32{0, 1, 1, 2, 2, 3, 4, 2}, PromptLen: 3,
		Penalties: Penalties{Frequency: 0.5, Presence: 0.25, Repetition: 2, Bias: []TokenBias{{Token: 5, Bias: 10}, {Token: 0, Bias: -1}}}}
	var s Sampler
	s.Order = make([]int32, len(logits))
	adj := slices.Clone(logits)
	s.penalize(adj, &sp, 7)
	want := []float32{
		(1 - 1) * 2,         // bias to 0, then repetition (a prompt token): 0 is not positive, so times 2
		2.0 / 2,             // prompt token: repetition only
		-1*2 - 2*0.5 - 0.25, // output twice before position 7: repetition, 2 x frequency, presence
		0.5/2 - 0.5 - 0.25,  // output once
		3.0/2 - 0.5 - 0.25,  // output once
		-2 + 10,             // biased, never seen
	}
	for i := range want {
		if math.Abs(float64(adj[i]-want[i])) > 1e-6 {
			t.Errorf("token %d: %v, want %v", i, adj[i], want[i])
		}
	}
}

func TestSampleLeavesLogits(t *testing.T) {
	logits := []float32{3, 1, 2}
	orig := slices.Clone(logits)
	sp := Sampling{History: []int32{0, 0}, PromptLen: 1, Penalties: Penalties{Frequency: 5}}
	var s Sampler
	if tok := s.Sample(logits, &sp, 2); tok != 2 {
		t.Fatalf("greedy with token 0 penalised by 5: %d, want 2", tok)
	}
	if !slices.Equal(logits, orig) {
		t.Fatalf("the logits changed: %v", logits)
	}
	if tok := s.Sample(logits, &Sampling{}, 2); tok != 0 {
		t.Fatalf("greedy without penalties: %d, want 0", tok)
	}
}

func TestMinP(t *testing.T) {
	// Relative weights at temperature 1: 1, 0.37, 0.22.
	logits := []float32{0, -1, -1.5}
	var s Sampler
	count := func(minP float32) [3]int {
		var c [3]int
		for seed := range uint64(400) {
			c[s.Sample(logits, &Sampling{Temperature: 1, MinP: minP, Seed: seed}, 5)]++
		}
		return c
	}
	if c := count(0); c[2] == 0 || c[1] == 0 {
		t.Fatalf("without min-p every token should be drawn: %v", c)
	}
	if c := count(0.3); c[2] != 0 || c[1] == 0 {
		t.Fatalf("min-p 0.3 must drop only the token at 0.22 of the top: %v", c)
	}
}
