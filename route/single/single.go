// Package single is single-model serving as an algorithm of the routed
// runtime: every request stays on the model it entered (model 0, or the
// model named by the "model" parameter). It is the baseline a token-level
// router is compared with (slm-only, llm-only), and it measures the
// runtime's own overhead.
package single

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "single"

// Algorithm keeps every request on one model.
type Algorithm struct {
	// Model is the index of the model that serves every request.
	Model int
}

// New builds an instance; parameter model (default 0) picks the model.
func New(s route.Spec) (route.Algorithm, error) {
	m, err := s.Int("model", 0)
	if err != nil {
		return nil, err
	}
	if m < 0 || m >= len(s.Models) {
		return nil, fmt.Errorf("model=%d: have %d models", m, len(s.Models))
	}
	return &Algorithm{Model: m}, nil
}

// Route keeps the default decision: commit and stay.
func (a *Algorithm) Route(*route.Step, []route.Decision) {}

// Entry starts every request on the chosen model.
func (a *Algorithm) Entry(*route.Request) int { return a.Model }
