// Package speculative is speculative decoding (Leviathan, Kalman and
// Matias, "Fast Inference from Transformers via Speculative Decoding",
// ICML 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318) as a
// routing algorithm. Per-token rule: the draft model (model 0) samples k
// tokens, kept as uncommitted drafts; the target (model 1) then appends
// them in one extend asking for the token after every position
// (WantAllTokens), accepts the longest prefix of drafts that equal its own
// tokens, appends one token of its own after it, commits, and hands back.
// Cutting the rejected drafts rolls back both models: the runtime tracks
// what each model has seen, so the draft model truncates its KV cache on
// receipt. Acceptance is by exact match with the target's sampled token,
// so whenever the target samples deterministically from (prefix, seed,
// position) — greedy decoding, or the engines' seeded sampling — the
// output equals the target alone, token for token.
package speculative

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// Name is the registry name.
const Name = "speculative"

// Algorithm drafts K tokens on model 0 and verifies them on model 1.
type Algorithm struct {
	// K is the number of drafts per verification.
	K int
}

// New builds an instance: parameter k (default 4), two models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (draft, target), got %d", route.ErrModels, len(s.Models))
	}
	k, err := s.Int("k", 4)
	if err != nil || k < 1 || k > 64 {
		return nil, fmt.Errorf("k must be an integer in [1, 64]: %v", s.Params["k"])
	}
	return &Algorithm{K: k}, nil
}

// NewState counts the drafts of the current round: {drafted, verified
// rounds, accepted drafts}.
func (a *Algorithm) NewState(*route.Request) route.State { return &route.Ints{0, 0, 0} }

// Want asks the target for its token after every appended position.
func (a *Algorithm) Want(model int, _ *route.Request) engine.Want {
	if model == 1 {
		return engine.WantAllTokens
	}
	return 0
}

// Route keeps draft tokens uncommitted until K are drafted, and on the
// target cuts at the first mismatch and appends the target's own token.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	for i, r := range s.Requests {
		st := r.State.(*route.Ints)
		if s.Model == 0 {
			d[i].Commit = false
			if (*st)[0]++; int((*st)[0]) >= a.K {
				d[i].Next = 1
			}
			continue
		}
		L, drafts := len(r.Tokens), len(r.Tokens)-r.Committed
		own := s.Outputs[i].Tokens[r.Appended-drafts-1:] // own[j]: target's token at L-drafts+j
		acc := 0
		for acc < drafts && own[acc] == r.Tokens[L-drafts+acc] {
			acc++
		}
		d[i].Cut, d[i].Token, d[i].Next = L-drafts+acc, own[acc], 0
		(*st)[0], (*st)[1], (*st)[2] = 0, (*st)[1]+1, (*st)[2]+int64(acc)
	}
}
