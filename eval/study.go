package eval

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/system"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// Study is a sweep of one algorithm parameter over a dataset on real
// models: the large model alone gives the agreement reference, then the
// routed runtime runs the dataset once per value.
type Study struct {
	// Models describe the models, small first (at least two); the last is
	// the large model. They must share a vocabulary.
	Models []config.Model
	// Kinds opens the models (nil: loader.Builtin()).
	Kinds loader.Kinds
	// Registry resolves Algorithm.
	Registry *route.Registry
	// Algorithm is swept; Fixed are its other parameters.
	Algorithm string
	Fixed     map[string]string
	// Param is the swept parameter's name, Values its values.
	Param  string
	Values []string
	// Scorer is "agreement" (the share of the large model's own output
	// reproduced before the first difference) or "exact" (the output
	// starts with the example's answer).
	Scorer string
	// Examples are the dataset.
	Examples []Example
	// Options size the requests.
	Options
}

// Run runs the study and returns one point per value, Pareto-optimal
// points marked.
func Run(ctx context.Context, s Study) ([]Point, error) {
	if len(s.Models) < 2 {
		return nil, errors.New("eval: give at least two models (small first)")
	}
	if s.Kinds == nil {
		s.Kinds = loader.Builtin()
	}
	// The large model alone gives the agreement reference and the prompts.
	ref, tok, err := s.open(ctx, "single", map[string]string{"model": strconv.Itoa(len(s.Models) - 1)})
	if err != nil {
		return nil, err
	}
	prompts := make([][]int32, len(s.Examples))
	for i, e := range s.Examples {
		p := tok.Encode(e.Prompt, false)
		if tok.BOS >= 0 {
			p = append([]int32{tok.BOS}, p...)
		}
		prompts[i] = p
	}
	refs, err := generate(ctx, ref, prompts, s.Options)
	if cerr := ref.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("eval: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	score, err := s.scorer(refs, tok)
	if err != nil {
		return nil, err
	}
	return Sweep(ctx, s.Values, func(v string) (bench.System, error) {
		params := maps.Clone(s.Fixed)
		if params == nil {
			params = map[string]string{}
		}
		params[s.Param] = v
		r, _, err := s.open(ctx, s.Algorithm, params)
		return r, err
	}, prompts, score, s.Options)
}

// generate runs every prompt on r, one after the other, and returns the
// outputs.
func generate(ctx context.Context, r *deploy.Deployment, prompts [][]int32, o Options) ([][]int32, error) {
	out := make([][]int32, len(prompts))
	for i, p := range prompts {
		st, err := r.Submit(ctx, p, route.Params{MaxTokens: o.MaxTokens, Seed: o.Seed})
		if err != nil {
			return nil, fmt.Errorf("eval: reference: %w", err)
		}
		res, err := st.Wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("eval: reference: %w", err)
		}
		out[i] = res.Tokens
	}
	return out, nil
}

// scorer returns the study's scorer.
func (s Study) scorer(refs [][]int32, tok *tokenizer.Tokenizer) (Scorer, error) {
	switch s.Scorer {
	case "agreement", "":
		return Agreement(refs), nil
	case "exact":
		return Exact(s.Examples, func(ids []int32) string {
			var b []byte
			for _, id := range ids {
				b = tok.AppendPiece(b, id)
			}
			return string(b)
		}), nil
	}
	return nil, fmt.Errorf("eval: scorer %q: want agreement or exact", s.Scorer)
}

// open builds a deployment running alg over fresh engines of the models, and
// returns it with the first model's tokenizer.
func (s Study) open(ctx context.Context, alg string, params map[string]string) (*deploy.Deployment, *tokenizer.Tokenizer, error) {
	r, texts, err := system.Open(ctx, system.Spec{Models: s.Models, Kinds: s.Kinds, Algorithm: alg, Params: params,
		Registry: s.Registry, SameVocabulary: true})
	if err != nil {
		return nil, nil, fmt.Errorf("eval: %w", err)
	}
	return r, texts[0].Tokenizer, nil
}
