// Package r2rrandom is the "random" variant of R2R (Roads to Rome,
// Fu et al. 2025, arXiv:2505.21600): instead of a neural router, each token
// the small model (model 0) samples is routed to the large model (model 1)
// with probability p. A routed token is dropped; the large model extends
// the suffix it has not seen, generates that position itself, commits it,
// and hands the request back. It is the routing process the paper's
// throughput model assumes: P = [[1−p, p], [1, 0]].
package r2rrandom

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "r2r-random"

// Algorithm routes each small-model token with probability P.
type Algorithm struct {
	// P is the routing probability.
	P float64
}

// New builds an instance from parameters: p (default 0.35), two models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("needs exactly 2 models (small, large), got %d", len(s.Models))
	}
	p, err := s.Float("p", 0.35)
	if err != nil {
		return nil, err
	}
	if p < 0 || p > 1 {
		return nil, fmt.Errorf("p=%g: must be in [0, 1]", p)
	}
	return &Algorithm{P: p}, nil
}

// Route sends a small-model token to the large model with probability P,
// dropping it; the large model's token is always committed and returned.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	for i, r := range s.Requests {
		switch {
		case s.Model == 1:
			d[i].Next = 0
		case route.Uniform(r.Params.Seed, r.ID, len(r.Tokens)) < a.P:
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}
