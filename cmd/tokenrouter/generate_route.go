package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/system"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// routeFlags are generate's routing flags, used with several --model flags.
type routeFlags struct {
	algorithm string
	params    []string
}

// addRouteFlags registers --algorithm and --param on generate.
func addRouteFlags(f *pflag.FlagSet, rf *routeFlags) {
	f.StringVar(&rf.algorithm, "algorithm", "", "routing algorithm when several --model flags are given (e.g. speculative, r2r, r-stitch)")
	f.StringArrayVar(&rf.params, "param", nil, "algorithm parameter name=value (repeatable)")
}

// routedResult is generate's JSON with the producing model of each token.
type routedResult struct {
	generateResult
	Models        []string       `json:"models"`
	TokensByModel map[string]int `json:"tokens_by_model"`
	Algorithm     string         `json:"algorithm"`
}

// runGenerateRouted generates with several models through the routed
// runtime: one sub-server per model, the algorithm moving the request
// between them. Models must share a vocabulary.
func runGenerateRouted(cmd *cobra.Command, cfg generateConfig, rf *routeFlags) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if rf.algorithm == "" {
		return fmt.Errorf("generate: %d models given: choose a routing algorithm with --algorithm (have %v)", len(cfg.models), builtin.Registry().Names())
	}
	params, err := parseParams(rf.params)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	r, tok, err := openRouted(cmd.Context(), cfg, rf.algorithm, params)
	if err != nil {
		return err
	}
	defer r.Close()
	prompt, err := encodePrompt(tok, cfg.prompt)
	if err != nil {
		return err
	}
	maxTokens := cfg.maxTokens
	for _, in := range r.Models() {
		maxTokens = min(maxTokens, in.ContextLength-len(prompt))
	}
	res := routedResult{generateResult: generateResult{PromptIDs: prompt, OutputIDs: []int32{}},
		Models: []string{}, TokensByModel: map[string]int{}, Algorithm: rf.algorithm}
	for _, n := range r.Names() {
		res.TokensByModel[n] = 0
	}
	var text []byte
	if maxTokens > 0 {
		start := time.Now()
		if err := streamRouted(cmd, cfg, r, tok, prompt, maxTokens, &res, &text); err != nil {
			return err
		}
		res.TokensPerSecond = perSecond(len(res.OutputIDs), time.Since(start))
	}
	return writeResult(cmd, cfg, text, &res.Text, &res)
}

// openRouted opens the --model models and starts a router running alg over
// them; it returns the router and the models' shared tokenizer.
func openRouted(ctx context.Context, cfg generateConfig, alg string, params map[string]string) (*deploy.Deployment, *tokenizer.Tokenizer, error) {
	descs := make([]config.Model, len(cfg.models))
	for i, spec := range cfg.models {
		descs[i] = cpuModel(spec, i, cfg.tokenizer, cfg.threads)
		for _, d := range descs[:i] {
			if d.Name == descs[i].Name {
				return nil, nil, fmt.Errorf("generate: model name %q given twice", d.Name)
			}
		}
	}
	r, texts, err := system.Open(ctx, system.Spec{Models: descs, Algorithm: alg, Params: params, Registry: builtin.Registry(),
		SameVocabulary: true})
	if err != nil {
		return nil, nil, fmt.Errorf("generate: %w", err)
	}
	return r, texts[0].Tokenizer, nil
}

// streamRouted submits prompt and records (and, as text, prints) each
// committed token with the model that wrote it, until the request ends or
// the model writes BOS or an end-of-generation token.
func streamRouted(cmd *cobra.Command, cfg generateConfig, r *deploy.Deployment, tok *tokenizer.Tokenizer, prompt []int32,
	maxTokens int, res *routedResult, text *[]byte) error {
	ctx := cmd.Context()
	s, err := r.Submit(ctx, prompt, route.Params{MaxTokens: maxTokens, Sampling: cfg.sampling, Seed: cfg.sampling.Seed})
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	defer s.Close()
	names := r.Names()
	var c stream.Chunk
	for !c.Done {
		if err := s.Recv(ctx, &c); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		for i, id := range c.Tokens {
			if id == tok.BOS || tok.IsEOG(id) {
				return nil
			}
			name := names[c.By[i]]
			res.OutputIDs = append(res.OutputIDs, id)
			res.Models = append(res.Models, name)
			res.TokensByModel[name]++
			if err := writePiece(cmd, cfg, text, tok, id); err != nil {
				return err
			}
		}
	}
	return nil
}
