// Package querylevel is query-level routing in the style of RouteLLM
// (Ong et al., "RouteLLM: Learning to Route LLMs with Preference Data",
// 2024, arXiv:2406.18665): one decision per request, made on entry from a
// score and a threshold; every token of the request then comes from that
// one model. Scores: "random" (default) is RouteLLM's calibrated random
// router, score = r.Draw(0) < strong (seeded: see route.Request.Draw), so a fraction
// strong of requests goes to the strong model (model 1); "length" scores a
// prompt by its token count and sends prompts of at least threshold tokens
// to the strong model.
package querylevel

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "query-level"

// Algorithm picks one model per request.
type Algorithm struct {
	// Score is "random" or "length".
	Score string
	// Strong is the target strong fraction of the random score.
	Strong float64
	// Threshold is the prompt length from which the length score routes
	// to the strong model.
	Threshold int
}

// New builds an instance: parameters score, strong (default 0.5),
// threshold (default 32); two models (weak, strong).
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (weak, strong), got %d", route.ErrModels, len(s.Models))
	}
	a := &Algorithm{Score: s.Params["score"]}
	if a.Score == "" {
		a.Score = "random"
	}
	if a.Score != "random" && a.Score != "length" {
		return nil, fmt.Errorf("score=%q: want random or length", a.Score)
	}
	var err error
	if a.Strong, err = s.Float("strong", 0.5); err != nil || a.Strong < 0 || a.Strong > 1 {
		return nil, fmt.Errorf("strong must be a number in [0, 1]: %v", s.Params["strong"])
	}
	if a.Threshold, err = s.Int("threshold", 32); err != nil {
		return nil, err
	}
	return a, nil
}

// Entry makes the request's one routing decision.
func (a *Algorithm) Entry(r *route.Request) int {
	if a.Score == "length" && r.PromptLen >= a.Threshold ||
		a.Score == "random" && r.Draw(0) < a.Strong {
		return 1
	}
	return 0
}

// Route keeps every request where it is.
func (a *Algorithm) Route(*route.Step, []route.Decision) {}
