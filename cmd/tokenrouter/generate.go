package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// generateConfig is what the generate flags describe.
type generateConfig struct {
	models    []modelSpec
	tokenizer string
	prompt    string
	maxTokens int
	sampling  engine.Sampling
	format    string
	threads   int
}

// modelSpec is one --model value: PATH or NAME=PATH.
type modelSpec struct {
	name, path string
}

var modelNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)

// parseModelSpec splits NAME=PATH; a value whose prefix is not a plain name,
// or that names an existing file as a whole, is a bare path.
func parseModelSpec(v string) modelSpec {
	if name, path, ok := strings.Cut(v, "="); ok && modelNameRE.MatchString(name) && path != "" {
		if _, err := os.Stat(v); err != nil {
			return modelSpec{name: name, path: path}
		}
	}
	return modelSpec{path: v}
}

// generateResult is the --format json output.
type generateResult struct {
	PromptIDs       []int32 `json:"prompt_ids"`
	OutputIDs       []int32 `json:"output_ids"`
	Text            string  `json:"text"`
	TokensPerSecond float64 `json:"tokens_per_second"`
}

func newGenerateCmd() *cobra.Command {
	var (
		models      []string
		cfg         generateConfig
		temperature float32
		topP        float32
		topK        int
		seed        uint64
		rf          routeFlags
	)
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate text with a model on the CPU engine",
		Long: "Generate encodes --prompt with BOS first, runs the CPU engine and prints the text as it is\n" +
			"generated, or one JSON object with --format json. --model takes a GGUF file or a llama2.c\n" +
			"checkpoint (which needs --tokenizer); it may be written NAME=PATH.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, m := range models {
				cfg.models = append(cfg.models, parseModelSpec(m))
			}
			cfg.sampling = engine.Sampling{Temperature: temperature, TopK: topK, TopP: topP, Seed: seed}
			if len(cfg.models) > 1 {
				return runGenerateRouted(cmd, cfg, &rf)
			}
			return runGenerate(cmd, cfg)
		},
	}
	f := cmd.Flags()
	addRouteFlags(f, &rf)
	f.StringArrayVar(&models, "model", nil, "model file (GGUF or llama2.c .bin), optionally NAME=PATH")
	f.StringVar(&cfg.tokenizer, "tokenizer", "", "tokenizer file for every --model (llama2.c tokenizer.bin, SentencePiece .model or GGUF; needed for llama2.c checkpoints); default: a GGUF file's own")
	f.StringVar(&cfg.prompt, "prompt", "", "prompt text")
	f.IntVar(&cfg.maxTokens, "max-tokens", 256, "maximum number of tokens to generate")
	f.Float32Var(&temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	f.IntVar(&topK, "top-k", 0, "keep the K most likely tokens; 0 disables")
	f.Float32Var(&topP, "top-p", 1, "keep the smallest set of tokens reaching probability P; 1 disables")
	f.Uint64Var(&seed, "seed", 0, "sampling seed")
	f.StringVar(&cfg.format, "format", "text", "output format: text or json")
	f.IntVar(&cfg.threads, "threads", 0, "kernel threads; 0 uses GOMAXPROCS")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func runGenerate(cmd *cobra.Command, cfg generateConfig) error {
	switch {
	case len(cfg.models) == 0:
		return errors.New("generate: --model is required")
	case len(cfg.models) > 1:
		return fmt.Errorf("generate: %d models given; generating with several models needs --algorithm, which is not available yet", len(cfg.models))
	case cfg.format != "text" && cfg.format != "json":
		return fmt.Errorf("generate: --format %q (want text or json)", cfg.format)
	case cfg.maxTokens < 0:
		return fmt.Errorf("generate: --max-tokens %d is negative", cfg.maxTokens)
	case cfg.sampling.Temperature < 0:
		return fmt.Errorf("generate: --temperature %v is negative", cfg.sampling.Temperature)
	}
	ctx := cmd.Context()
	eng, tok, err := openModel(ctx, cfg.models[0].name, cfg.models[0].path, cfg.tokenizer, cfg.threads)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	defer eng.Close()

	info := eng.Info()
	prompt := tok.Encode(cfg.prompt, false)
	if bos := tok.BOS; bos >= 0 && (tok.AddBOS || len(prompt) == 0) {
		prompt = append([]int32{bos}, prompt...)
	}
	if len(prompt) == 0 {
		return errors.New("generate: empty prompt and the model has no BOS token")
	}
	stdout := cmd.OutOrStdout()
	text := cfg.format == "text"
	var piece []byte
	res := generateResult{PromptIDs: prompt, OutputIDs: []int32{}}
	out := make([]engine.Output, 1)
	in := []engine.Input{{Seq: 1, Tokens: prompt, Sampling: cfg.sampling}}
	var outBytes []byte
	next1 := make([]int32, 1)
	held := 0 // tokens in the sequence's KV cache
	start := time.Now()
	for len(res.OutputIDs) < cfg.maxTokens && held+len(in[0].Tokens) <= info.ContextLength {
		if err := eng.Step(ctx, in, out); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		held += len(in[0].Tokens)
		next := out[0].Token
		if next == tok.EOS || next == tok.BOS {
			break
		}
		res.OutputIDs = append(res.OutputIDs, next)
		piece = tok.AppendPiece(piece[:0], next)
		outBytes = append(outBytes, piece...)
		if text {
			if _, err := stdout.Write(piece); err != nil {
				return err
			}
		}
		next1[0] = next
		in[0].Tokens = next1
	}
	elapsed := time.Since(start).Seconds()
	if elapsed > 0 {
		res.TokensPerSecond = float64(len(res.OutputIDs)) / elapsed
	}
	if text {
		_, err := fmt.Fprintln(stdout)
		return err
	}
	res.Text = string(bytes.ToValidUTF8(outBytes, []byte("\uFFFD")))
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// openModel opens a model file on the CPU engine with its text side: the
// GGUF file's own tokenizer, or tokenizerPath (required for llama2.c
// checkpoints).
func openModel(ctx context.Context, name, path, tokenizerPath string, threads int) (engine.Engine, *tokenizer.Tokenizer, error) {
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	m, err := loader.Builtin().Open(ctx, config.Model{Name: name, Engine: loader.KindCPU, Path: path, Tokenizer: tokenizerPath, Threads: threads})
	if err != nil {
		return nil, nil, err
	}
	return m.Engine, m.Tokenizer, nil
}
