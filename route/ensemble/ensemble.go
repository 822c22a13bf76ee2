// Package ensemble is ME, token-level model ensembling by random
// selection: every output position is produced by one model drawn at
// random with fixed weights among two or more models, the sampling view of
// a mixture of the models' next-token distributions (cf. "Fast and Slow
// Generating: An Empirical Study on Large and Small Language Models
// Collaborative Decoding", Zhang et al., 2024, arXiv:2406.12295). Per-token
// rule: position p of request id is produced by model i with probability
// wᵢ/Σw, drawn with Request.Draw(p) so the choice is the same
// wherever the request runs. Parameter weights (comma-separated, default
// equal).
package ensemble

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "ensemble"

// Algorithm draws the producing model of every position by weight.
type Algorithm struct {
	// Cum holds the cumulative normalised weights, one per model.
	Cum []float64
}

// New builds an instance: parameter weights ("1,3"), two or more models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) < 2 {
		return nil, fmt.Errorf("%w: needs 2 or more models, got %d", route.ErrModels, len(s.Models))
	}
	w := strings.Split(s.Params["weights"], ",")
	if s.Params["weights"] == "" {
		w = strings.Split(strings.Repeat("1,", len(s.Models))[:2*len(s.Models)-1], ",")
	}
	if len(w) != len(s.Models) {
		return nil, fmt.Errorf("weights=%q: want %d values", s.Params["weights"], len(s.Models))
	}
	a, sum := &Algorithm{}, 0.0
	for _, x := range w {
		v, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || !(v >= 0) {
			return nil, fmt.Errorf("weights=%q: %q is not a non-negative number", s.Params["weights"], x)
		}
		sum += v
		a.Cum = append(a.Cum, sum)
	}
	if sum <= 0 {
		return nil, fmt.Errorf("weights=%q: sum is zero", s.Params["weights"])
	}
	for i := range a.Cum {
		a.Cum[i] /= sum
	}
	return a, nil
}

// pick draws the model that produces position pos.
func (a *Algorithm) pick(r *route.Request, pos int) int {
	u := r.Draw(pos)
	for i, c := range a.Cum {
		if u < c {
			return i
		}
	}
	return len(a.Cum) - 1
}

// Entry draws the model of the first output position.
func (a *Algorithm) Entry(r *route.Request) int { return a.pick(r, len(r.Tokens)) }

// Route keeps the token and sends the request to the next position's model.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	for i, r := range s.Requests {
		d[i].Next = a.pick(r, len(r.Tokens)+1)
	}
}
