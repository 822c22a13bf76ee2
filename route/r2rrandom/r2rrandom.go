// Package r2rrandom is the "random" variant of R2R (Roads to Rome,
// Fu et al. 2025, arXiv:2505.21600): instead of a neural router, each token
// the small model (model 0) samples is routed to the large model (model 1)
// with probability p. A routed token is dropped; the large model extends
// the suffix it has not seen, generates that position itself, commits it,
// and hands the request back. It is the routing process the paper's
// throughput model assumes: P = [[1−p, p], [1, 0]].
//
// For drift experiments the probability can change once during a run:
// with the parameters p-after and switch-at, every small-model step that
// starts switch-at (a Go duration such as "20s") or later after the
// instance was built routes with probability p-after instead of p. The
// switch is by wall-clock time since the algorithm was instantiated (when
// the router starts), so it includes any benchmark warm-up.
package r2rrandom

import (
	"fmt"
	"time"

	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "r2r-random"

// Algorithm routes each small-model token with probability P.
type Algorithm struct {
	// P is the routing probability.
	P float64
	// PAfter replaces P from SwitchAt on, when SwitchAt is positive.
	PAfter float64
	// SwitchAt is the time after Start at which PAfter takes over; zero
	// means P holds for the whole run.
	SwitchAt time.Duration
	// Start is when the instance was built.
	Start time.Time
}

// New builds an instance from parameters: p (default 0.35), optionally
// p-after and switch-at (both or neither), two models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (small, large), got %d", route.ErrModels, len(s.Models))
	}
	p, err := s.Float("p", 0.35)
	if err != nil {
		return nil, err
	}
	if p < 0 || p > 1 {
		return nil, fmt.Errorf("p=%g: must be in [0, 1]", p)
	}
	a := &Algorithm{P: p, PAfter: p, Start: time.Now()}
	after, hasAfter := s.Params["p-after"]
	at, hasAt := s.Params["switch-at"]
	if hasAfter != hasAt {
		return nil, fmt.Errorf("p-after and switch-at go together (got p-after=%q, switch-at=%q)", after, at)
	}
	if hasAt {
		if a.PAfter, err = s.Float("p-after", p); err != nil {
			return nil, err
		}
		if a.PAfter < 0 || a.PAfter > 1 {
			return nil, fmt.Errorf("p-after=%g: must be in [0, 1]", a.PAfter)
		}
		if a.SwitchAt, err = time.ParseDuration(at); err != nil {
			return nil, fmt.Errorf("switch-at=%q: %w", at, err)
		}
		if a.SwitchAt <= 0 {
			return nil, fmt.Errorf("switch-at=%v: must be positive", a.SwitchAt)
		}
	}
	return a, nil
}

// Process is the routing process of DESIGN §6's R2R case:
// P = [[1−p, p], [1, 0]], C = [[1, 0], [1, 0]] (a routed token is dropped,
// the large model commits one and hands back). It is not stationary when
// p is scheduled to change (switch-at).
func (a *Algorithm) Process() (p, c [][]float64, ok bool) {
	return [][]float64{{1 - a.P, a.P}, {1, 0}}, [][]float64{{1, 0}, {1, 0}}, a.SwitchAt == 0
}

var _ route.Predictable = (*Algorithm)(nil)

// Speculable opts into speculative continuation: a routed position's
// token is the large model's one token, handed back at once. Not when p
// is scheduled to change: the decision would then depend on when a
// position is stepped, which speculation changes.
func (a *Algorithm) Speculable(from, to int) bool { return from == 0 && to == 1 && a.SwitchAt == 0 }

// Prob returns the routing probability in force at time now.
func (a *Algorithm) Prob(now time.Time) float64 {
	if a.SwitchAt > 0 && now.Sub(a.Start) >= a.SwitchAt {
		return a.PAfter
	}
	return a.P
}

// Route sends a small-model token to the large model with probability P
// (PAfter once the switch time has passed), dropping it; the large model's
// token is always committed and returned.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	p := a.P
	if s.Model == 0 && a.SwitchAt > 0 {
		p = a.Prob(time.Now())
	}
	for i, r := range s.Requests {
		switch {
		case s.Model == 1:
			d[i].Next = 0
		case r.Draw(len(r.Tokens)) < p:
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}
