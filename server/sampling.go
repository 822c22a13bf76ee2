package server

import (
	"math"
	"slices"
	"strconv"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// The sampling controls beyond temperature / top-p / top-k: penalties,
// logit biases, min-p, stop tokens and several choices. The runtime
// applies the penalties in every engine by one rule (engine.Sampler), so a
// routed request is penalised alike whichever model produces a token.

// Bounds of the sampling controls.
const (
	maxChoices    = 16
	maxStopTokens = 64
	maxLogitBias  = 1024
)

// penaltyParams are the sampling controls of SamplingParams.
type penaltyParams struct {
	// FrequencyPenalty lowers a token's logit by this much per time it
	// occurs in the output so far (-2 to 2).
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	// PresencePenalty lowers the logit of every token of the output so
	// far by this much (-2 to 2).
	PresencePenalty *float64 `json:"presence_penalty,omitempty"`
	// RepetitionPenalty divides the positive logits (multiplies the
	// negative ones) of the tokens of the prompt and output (0 to 10; 1
	// is off).
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	// MinP drops the tokens less likely than MinP times the most likely
	// one (0 to 1).
	MinP *float64 `json:"min_p,omitempty"`
	// LogitBias adds a bias (-100 to 100) to the logits of token ids
	// (keys are the ids as strings, as OpenAI's logit_bias).
	LogitBias map[string]float64 `json:"logit_bias,omitempty"`
	// StopTokenIDs end the output before any of these tokens.
	StopTokenIDs []int32 `json:"stop_token_ids,omitempty"`
	// N is the number of independent choices (1 to 16), each its own
	// routed request.
	N *int `json:"n,omitempty"`
	// Speculate bounds this request's speculative continuation: -1 turns
	// it off, 0 keeps the server's setting, n > 0 lets the small model run
	// at most n tokens past an unverified routed position (the output is
	// the same either way; only speed changes).
	Speculate *int `json:"speculate,omitempty"`
}

// applyPenalties validates sp's sampling controls into g.
func (g *genRequest) applyPenalties(sp *penaltyParams, names paramNames) *apiError {
	s := &g.params.Sampling
	for _, f := range []struct {
		name   string
		v      *float64
		lo, hi float64
		dst    *float32
	}{
		{"sampling_params.frequency_penalty", sp.FrequencyPenalty, -2, 2, &s.Penalties.Frequency},
		{"sampling_params.presence_penalty", sp.PresencePenalty, -2, 2, &s.Penalties.Presence},
		{"sampling_params.repetition_penalty", sp.RepetitionPenalty, math.SmallestNonzeroFloat32, 10, &s.Penalties.Repetition},
		{"sampling_params.min_p", sp.MinP, 0, 1, &s.MinP},
	} {
		if f.v == nil {
			continue
		}
		if v := *f.v; !(v >= f.lo && v <= f.hi) {
			pn := names.name(f.name)
			return badRequest(pn, "invalid_value", "%s must be between %v and %v, got %v", pn, bound(f.lo), f.hi, v)
		}
		*f.dst = float32(*f.v)
	}
	vocab := g.dep.models[0].info.VocabSize
	if aerr := g.logitBias(sp.LogitBias, vocab, names.name("sampling_params.logit_bias")); aerr != nil {
		return aerr
	}
	pn := names.name("sampling_params.stop_token_ids")
	if len(sp.StopTokenIDs) > maxStopTokens {
		return badRequest(pn, "invalid_value", "At most %d %s, got %d", maxStopTokens, pn, len(sp.StopTokenIDs))
	}
	if aerr := g.dep.checkIDs(sp.StopTokenIDs, pn); aerr != nil {
		return aerr
	}
	g.stopIDs = slices.Clone(sp.StopTokenIDs)
	if !g.params.IgnoreEOS { // ignore_eos keeps going past the model's end tokens, not the request's
		g.stopIDs = append(g.stopIDs, g.dep.stopIDs...)
	}
	g.params.StopIDs = g.stopIDs // every sub-server stops there too
	if sp.Speculate != nil {
		pn := names.name("sampling_params.speculate")
		if d := *sp.Speculate; d < -1 || d > subserver.MaxDepth {
			return badRequest(pn, "invalid_value", "%s must be between -1 (off) and %d, got %d", pn, subserver.MaxDepth, d)
		}
		g.params.Speculate = *sp.Speculate
	}
	g.n = 1
	if sp.N != nil {
		pn := names.name("sampling_params.n")
		if *sp.N < 1 || *sp.N > maxChoices {
			return badRequest(pn, "invalid_value", "%s must be between 1 and %d, got %d", pn, maxChoices, *sp.N)
		}
		g.n = *sp.N
	}
	return nil
}

// bound prints a lower bound, the smallest positive float as "0 (excluded)".
func bound(lo float64) string {
	if lo == math.SmallestNonzeroFloat32 {
		return "0 (excluded)"
	}
	return strconv.FormatFloat(lo, 'g', -1, 64)
}

// logitBias validates OpenAI's logit_bias into g's sampling.
func (g *genRequest) logitBias(m map[string]float64, vocab int, pn string) *apiError {
	if len(m) > maxLogitBias {
		return badRequest(pn, "invalid_value", "At most %d entries in %s, got %d", maxLogitBias, pn, len(m))
	}
	bias := make([]engine.TokenBias, 0, len(m))
	for k, v := range m {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || int(id) >= vocab {
			return badRequest(pn, "invalid_value", "%s key %s is not a token id of the vocabulary of %d tokens", pn, clip(k), vocab)
		}
		if !(v >= -100 && v <= 100) {
			return badRequest(pn, "invalid_value", "%s[%s] must be between -100 and 100, got %v", pn, k, v)
		}
		bias = append(bias, engine.TokenBias{Token: int32(id), Bias: float32(v)})
	}
	slices.SortFunc(bias, func(a, b engine.TokenBias) int { return int(a.Token - b.Token) })
	if len(bias) > 0 {
		g.params.Sampling.Penalties.Bias = bias
	}
	return nil
}
