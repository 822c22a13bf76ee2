// Package rstitch is R-Stitch (Chen et al., "R-Stitch: Dynamic Trajectory
// Stitching for Efficient Reasoning", 2025, arXiv:2507.17307): entropy-
// guided switching between a small and a large model. Per-token rule: let
// H be the normalised entropy (entropy / ln V) of the stepping model's
// next-token distribution. On the small model (0), H > τ means the model is
// uncertain: its token is dropped and the large model (1) generates that
// position. On the large model the token is always kept, and control
// returns to the small model once H ≤ τ. Parameter tau (default 0.5).
package rstitch

import (
	"fmt"
	"math"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "r-stitch"

// Algorithm switches models on normalised entropy against Tau.
type Algorithm struct {
	// Tau is the normalised-entropy threshold in [0, 1].
	Tau float64
}

// New builds an instance: parameter tau, two models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (small, large), got %d", route.ErrModels, len(s.Models))
	}
	tau, err := s.Float("tau", 0.5)
	if err != nil || tau < 0 || tau > 1 {
		return nil, fmt.Errorf("tau must be a number in [0, 1]: %v", s.Params["tau"])
	}
	return &Algorithm{Tau: tau}, nil
}

// Want asks both models for logits.
func (a *Algorithm) Want(int, *route.Request) engine.Want { return engine.WantLogits }

// Route applies the entropy rule to each request of the step.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	for i := range s.Requests {
		h := Entropy(s.Outputs[i].Logits)
		switch {
		case s.Model == 0 && h > a.Tau:
			d[i].Next, d[i].Token = 1, route.NoToken
		case s.Model == 1 && h <= a.Tau:
			d[i].Next = 0
		}
	}
}

// Entropy returns the entropy of softmax(logits) divided by ln(len(logits)).
func Entropy(logits []float32) float64 {
	if len(logits) < 2 {
		return 0
	}
	m := float64(logits[0])
	for _, v := range logits {
		m = max(m, float64(v))
	}
	var z, e float64
	for _, v := range logits {
		x := float64(v) - m
		if math.IsInf(x, -1) {
			continue // a token ruled out (a structured-output mask): p = 0 adds nothing
		}
		p := math.Exp(x)
		z += p
		e += p * x
	}
	return (math.Log(z) - e/z) / math.Log(float64(len(logits)))
}
