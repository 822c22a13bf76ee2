package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// check rejects bad output options.
func (cfg generateConfig) check() error {
	switch {
	case cfg.format != "text" && cfg.format != "json":
		return fmt.Errorf("generate: --format %q (want text or json)", cfg.format)
	case cfg.maxTokens < 0:
		return fmt.Errorf("generate: --max-tokens %d is negative", cfg.maxTokens)
	case cfg.sampling.Temperature < 0:
		return fmt.Errorf("generate: --temperature %v is negative", cfg.sampling.Temperature)
	}
	return nil
}

// encodePrompt encodes --prompt with BOS first when the tokenizer asks
// for it (or the prompt is empty).
func encodePrompt(tok *tokenizer.Tokenizer, prompt string) ([]int32, error) {
	ids := tok.Encode(prompt, false)
	if bos := tok.BOS; bos >= 0 && (tok.AddBOS || len(ids) == 0) {
		ids = append([]int32{bos}, ids...)
	}
	if len(ids) == 0 {
		return nil, errors.New("generate: empty prompt and the model has no BOS token")
	}
	return ids, nil
}

func runGenerate(cmd *cobra.Command, cfg generateConfig) error {
	if len(cfg.models) == 0 {
		return errors.New("generate: --model is required")
	}
	if err := cfg.check(); err != nil {
		return err
	}
	ctx := cmd.Context()
	m, err := loader.Builtin().Open(withLoadBars(ctx, cmd.ErrOrStderr()), cpuModel(cfg.models[0], 0, cfg.tokenizer, cfg.threads))
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	defer m.Engine.Close()
	if m.Tokenizer == nil {
		return fmt.Errorf("generate: model %s has no text", m.Engine.Info().Name)
	}
	prompt, err := encodePrompt(m.Tokenizer, cfg.prompt)
	if err != nil {
		return err
	}
	res := generateResult{PromptIDs: prompt, OutputIDs: []int32{}}
	var text []byte
	start := time.Now()
	err = decode(ctx, m.Engine, prompt, cfg, func(id int32) (bool, error) {
		if m.Tokenizer.IsEOG(id) || id == m.Tokenizer.BOS {
			return false, nil
		}
		res.OutputIDs = append(res.OutputIDs, id)
		return true, writePiece(cmd, cfg, &text, m.Tokenizer, id)
	})
	if err != nil {
		return err
	}
	res.TokensPerSecond = perSecond(len(res.OutputIDs), time.Since(start))
	return writeResult(cmd, cfg, text, &res.Text, &res)
}

// decode runs one sequence on eng from prompt, greedily or as cfg samples,
// and hands each sampled token to emit until it says stop, cfg.maxTokens
// are out or the context is full.
func decode(ctx context.Context, eng engine.Engine, prompt []int32, cfg generateConfig, emit func(int32) (bool, error)) error {
	out := make([]engine.Output, 1)
	in := []engine.Input{{Seq: 1, Tokens: prompt, Sampling: cfg.sampling}}
	next := make([]int32, 1)
	held := 0 // tokens in the sequence's KV cache
	for n := 0; n < cfg.maxTokens && held+len(in[0].Tokens) <= eng.Info().ContextLength; n++ {
		if err := eng.Step(ctx, in, out); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		held += len(in[0].Tokens)
		if more, err := emit(out[0].Token); !more || err != nil {
			return err
		}
		next[0] = out[0].Token
		in[0].Tokens = next
	}
	return nil
}

// writePiece appends token id's text to text and, in text format, prints
// it at once.
func writePiece(cmd *cobra.Command, cfg generateConfig, text *[]byte, tok *tokenizer.Tokenizer, id int32) error {
	n := len(*text)
	*text = tok.AppendPiece(*text, id)
	if cfg.format != "text" {
		return nil
	}
	_, err := cmd.OutOrStdout().Write((*text)[n:])
	return err
}

// writeResult ends the output: a newline after streamed text, or res as
// JSON with its text field (*field) set to text.
func writeResult(cmd *cobra.Command, cfg generateConfig, text []byte, field *string, res any) error {
	if cfg.format == "text" {
		_, err := fmt.Fprintln(cmd.OutOrStdout())
		return err
	}
	*field = string(bytes.ToValidUTF8(text, []byte("\uFFFD")))
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// perSecond is n over d in tokens per second (0 for no time).
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// cpuModel describes the --model value spec (the i-th) on the CPU engine.
func cpuModel(spec modelSpec, i int, tokenizerPath string, threads int) config.Model {
	name := spec.name
	if name == "" {
		name = fmt.Sprintf("m%d", i)
	}
	return config.Model{Name: name, Engine: loader.KindCPU, Path: spec.path, Tokenizer: tokenizerPath, Threads: threads}
}
