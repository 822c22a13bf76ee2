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
// models: the routed runtime runs the dataset once per value, and the
// large model scores every value's outputs teacher-forced (Judge).
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
	// Scorer gives Point.Quality: "agreement" (default: the large model's
	// teacher-forced agreement, Measures.Agreement), "prefix" (the share
	// of the large model's own greedy output reproduced before the first
	// difference) or "exact" (the output starts with the example's
	// answer).
	Scorer string
	// Examples are the dataset.
	Examples []Example
	// Options size the requests (Options.Judge is set by Run).
	Options
}

// Run runs the study and returns one point per value, Pareto-optimal
// points marked.
func Run(ctx context.Context, s Study) ([]Point, error) {
	switch s.Scorer {
	case "", "agreement", "prefix", "exact":
	default:
		return nil, fmt.Errorf("eval: scorer %q: want agreement, prefix or exact", s.Scorer)
	}
	ss, err := openSession(ctx, s.Models, s.Kinds, s.Examples)
	if err != nil {
		return nil, err
	}
	defer ss.close()
	score, err := s.scorer(ctx, ss)
	if err != nil {
		return nil, err
	}
	o := s.Options
	o.Judge = ss.judge.Score
	return Sweep(ctx, s.Values, ss.builder(ctx, s.Registry, s.Algorithm, s.Fixed, s.Param), ss.prompts, score, o)
}

// scorer returns the study's scorer (nil: the judge's agreement).
func (s Study) scorer(ctx context.Context, ss *session) (Scorer, error) {
	switch s.Scorer {
	case "prefix":
		ref, err := ss.open(ctx, s.Registry, "single", map[string]string{"model": strconv.Itoa(len(ss.models) - 1)})
		if err != nil {
			return nil, err
		}
		refs, err := generate(ctx, ref, ss.prompts, s.Options)
		if cerr := ref.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("eval: %w", cerr)
		}
		if err != nil {
			return nil, err
		}
		return Prefix(refs), nil
	case "exact":
		tok := ss.tok
		return Exact(s.Examples, func(ids []int32) string {
			var b []byte
			for _, id := range ids {
				b = tok.AppendPiece(b, id)
			}
			return string(b)
		}), nil
	}
	return nil, nil
}

// session is what every sweep over one dataset and model set shares: the
// large model's engine as the judge, its tokenizer, and the encoded
// prompts.
type session struct {
	models  []config.Model
	kinds   loader.Kinds
	judge   *Judge
	tok     *tokenizer.Tokenizer
	prompts [][]int32
}

// openSession opens the large model (the last of models) as the judge and
// encodes the examples' prompts with its tokenizer, after its BOS token.
func openSession(ctx context.Context, models []config.Model, kinds loader.Kinds, ex []Example) (*session, error) {
	if len(models) < 2 {
		return nil, errors.New("eval: give at least two models (small first)")
	}
	if len(ex) == 0 {
		return nil, errors.New("eval: no examples")
	}
	if kinds == nil {
		kinds = loader.Builtin()
	}
	m, err := kinds.Open(ctx, models[len(models)-1])
	if err != nil {
		return nil, fmt.Errorf("eval: judge: %w", err)
	}
	tok := m.Text.Tokenizer
	if tok == nil {
		return nil, errors.Join(fmt.Errorf("eval: model %s has no tokenizer", models[len(models)-1].Name), m.Engine.Close())
	}
	prompts := make([][]int32, len(ex))
	for i, e := range ex {
		p := tok.Encode(e.Prompt, false)
		if tok.BOS >= 0 {
			p = append([]int32{tok.BOS}, p...)
		}
		if len(p) == 0 {
			return nil, errors.Join(fmt.Errorf("eval: prompt %d encodes to no tokens", i), m.Engine.Close())
		}
		prompts[i] = p
	}
	return &session{models: models, kinds: kinds, judge: &Judge{Engine: m.Engine}, tok: tok, prompts: prompts}, nil
}

// close closes the judge's engine.
func (ss *session) close() { _ = ss.judge.Engine.Close() }

// builder returns the function that opens alg with fixed and param = v.
func (ss *session) builder(ctx context.Context, reg *route.Registry, alg string, fixed map[string]string,
	param string) func(v string) (bench.System, error) {
	return func(v string) (bench.System, error) {
		params := maps.Clone(fixed)
		if params == nil {
			params = map[string]string{}
		}
		params[param] = v
		r, err := ss.open(ctx, reg, alg, params)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// open builds a deployment running alg over fresh engines of the models.
func (ss *session) open(ctx context.Context, reg *route.Registry, alg string, params map[string]string) (*deploy.Deployment, error) {
	r, _, err := system.Open(ctx, system.Spec{Models: ss.models, Kinds: ss.kinds, Algorithm: alg, Params: params,
		Registry: reg, SameVocabulary: true})
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	return r, nil
}

// generate runs every prompt on r, one after the other, and returns the
// outputs.
func generate(ctx context.Context, r *deploy.Deployment, prompts [][]int32, o Options) ([][]int32, error) {
	out := make([][]int32, len(prompts))
	for i, p := range prompts {
		st, err := r.Submit(ctx, p, route.Params{MaxTokens: o.MaxTokens, Seed: o.seed(i)})
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
