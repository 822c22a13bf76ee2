package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/router"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/stream"
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
	switch {
	case cfg.format != "text" && cfg.format != "json":
		return fmt.Errorf("generate: --format %q (want text or json)", cfg.format)
	case cfg.sampling.Temperature < 0:
		return fmt.Errorf("generate: --temperature %v is negative", cfg.sampling.Temperature)
	}
	if rf.algorithm == "" {
		return fmt.Errorf("generate: %d models given: choose a routing algorithm with --algorithm (have %v)", len(cfg.models), builtin.Registry().Names())
	}
	params, err := parseParams(rf.params)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	var ms []router.Model
	names := map[string]bool{}
	defer func() {
		for _, m := range ms {
			_ = m.Engine.Close()
		}
	}()
	var tok *tokenizer.Tokenizer
	for i, spec := range cfg.models {
		name := spec.name
		if name == "" {
			name = fmt.Sprintf("m%d", i)
		}
		if names[name] {
			return fmt.Errorf("generate: model name %q given twice", name)
		}
		names[name] = true
		eng, t, err := openModel(cmd.Context(), name, spec.path, cfg.tokenizer, cfg.threads)
		if err != nil {
			return fmt.Errorf("generate: model %s: %w", name, err)
		}
		ms = append(ms, router.Model{Name: name, Engine: eng, Policy: sched.Policy{B: sched.Static(1)}})
		if tok == nil {
			tok = t
		} else if err := sameVocabulary(tok, t); err != nil {
			return fmt.Errorf("generate: models %s and %s cannot share steps: %w", ms[0].Name, name, err)
		}
	}
	prompt := tok.Encode(cfg.prompt, false)
	if bos := tok.BOS; bos >= 0 && (tok.AddBOS || len(prompt) == 0) {
		prompt = append([]int32{bos}, prompt...)
	}
	if len(prompt) == 0 {
		return errors.New("generate: empty prompt and the model has no BOS token")
	}
	maxTokens := cfg.maxTokens
	for _, m := range ms {
		maxTokens = min(maxTokens, m.Engine.Info().ContextLength-len(prompt))
	}
	res := routedResult{generateResult: generateResult{PromptIDs: prompt, OutputIDs: []int32{}},
		Models: []string{}, TokensByModel: map[string]int{}, Algorithm: rf.algorithm}
	for _, m := range ms {
		res.TokensByModel[m.Name] = 0
	}
	if maxTokens <= 0 {
		return writeRouted(cmd, cfg, res, nil)
	}
	r, err := router.New(router.Config{Models: ms, Algorithm: rf.algorithm, Params: params, Registry: builtin.Registry()})
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	ms = nil // the router closes the engines
	defer r.Close()
	ctx := cmd.Context()
	start := time.Now()
	s, err := r.Submit(ctx, prompt, route.Params{MaxTokens: maxTokens, Sampling: cfg.sampling, Seed: cfg.sampling.Seed})
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	defer s.Close()
	var out []byte
	var c stream.Chunk
	for !c.Done {
		if err := s.Recv(ctx, &c); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		for i, id := range c.Tokens {
			if id == tok.BOS {
				c.Done = true
				break
			}
			name := r.Names()[c.By[i]]
			res.OutputIDs = append(res.OutputIDs, id)
			res.Models = append(res.Models, name)
			res.TokensByModel[name]++
			piece := tok.AppendPiece(nil, id)
			out = append(out, piece...)
			if cfg.format == "text" {
				if _, err := cmd.OutOrStdout().Write(piece); err != nil {
					return err
				}
			}
		}
	}
	if d := time.Since(start).Seconds(); d > 0 {
		res.TokensPerSecond = float64(len(res.OutputIDs)) / d
	}
	return writeRouted(cmd, cfg, res, out)
}

// writeRouted prints the result: a newline after streamed text, or JSON.
func writeRouted(cmd *cobra.Command, cfg generateConfig, res routedResult, text []byte) error {
	if cfg.format == "text" {
		_, err := fmt.Fprintln(cmd.OutOrStdout())
		return err
	}
	res.Text = string(bytes.ToValidUTF8(text, []byte("\uFFFD")))
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// sameVocabulary checks that two tokenizers give every id the same text
// (control tokens are compared by id, since their spellings differ between
// file formats) and the same special tokens.
func sameVocabulary(a, b *tokenizer.Tokenizer) error {
	if a.VocabSize() != b.VocabSize() {
		return fmt.Errorf("vocabularies of %d and %d tokens", a.VocabSize(), b.VocabSize())
	}
	if a.BOS != b.BOS || a.EOS != b.EOS {
		return fmt.Errorf("BOS/EOS %d/%d and %d/%d differ", a.BOS, a.EOS, b.BOS, b.EOS)
	}
	for id := range int32(a.VocabSize()) {
		if a.IsControl(id) != b.IsControl(id) {
			return fmt.Errorf("token %d is a control token in one vocabulary only", id)
		}
		if !a.IsControl(id) && !bytes.Equal(a.AppendPiece(nil, id), b.AppendPiece(nil, id)) {
			return fmt.Errorf("token %d is %q in one vocabulary and %q in the other", id, a.AppendPiece(nil, id), b.AppendPiece(nil, id))
		}
	}
	return nil
}
