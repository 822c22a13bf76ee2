package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// scriptEngine is an engine kind of its own, as a new engine package would
// provide one: every sequence writes script over and over.
type scriptEngine struct {
	script []int32
	vocab  int
	seqs   map[engine.SeqID]int
}

func (e *scriptEngine) Info() engine.Info {
	return engine.Info{Name: "script", Arch: "script", VocabSize: e.vocab, HiddenSize: 1, ContextLength: 512, BOS: 1, EOS: 2}
}

func (e *scriptEngine) Step(_ context.Context, in []engine.Input, out []engine.Output) error {
	for i, x := range in {
		n := e.seqs[x.Seq] + len(x.Tokens)
		e.seqs[x.Seq] = n
		out[i] = engine.Output{Token: e.script[n%len(e.script)]}
	}
	return nil
}

func (e *scriptEngine) Truncate(seq engine.SeqID, n int) error {
	e.seqs[seq] = min(e.seqs[seq], n)
	return nil
}

func (e *scriptEngine) Release(seq engine.SeqID) { delete(e.seqs, seq) }

func (e *scriptEngine) Close() error { return nil }

// scriptKind is the kind: its engine writes the tokens of cfg.Profile's
// text, and its text side is the tokenizer file cfg.Tokenizer names.
func scriptKind() loader.Kind {
	return loader.Kind{
		Name:  "script",
		Check: func(config.Model) error { return nil },
		Engine: func(_ context.Context, m config.Model) (engine.Engine, error) {
			tok, err := tokenizer.Open(m.Tokenizer, 0)
			if err != nil {
				return nil, err
			}
			return &scriptEngine{script: tok.Encode(m.Profile, false), vocab: tok.VocabSize(), seqs: map[engine.SeqID]int{}}, nil
		},
		Text: func(m config.Model, vocab int) (loader.Text, error) {
			tok, err := tokenizer.Open(m.Tokenizer, vocab)
			return loader.Text{Tokenizer: tok}, err
		},
	}
}

// TestEngineKindOfItsOwn registers an engine kind with one line (the table
// the server opens models with) and serves an HTTP request through it.
func TestEngineKindOfItsOwn(t *testing.T) {
	tok := filepath.Join(testmodels.Dir(t), "tok512.bin")
	kinds := append(loader.Builtin(), scriptKind())
	e := startWith(t, func(c *config.Config) {
		c.Models = []config.Model{{Name: "writer", Engine: "script", Profile: " the end", Tokenizer: tok}}
		c.Presets = []config.Preset{{Name: "scripted", Algorithm: "single", Models: []string{"writer"}, Thresholds: "1"}}
	}, Options{Kinds: kinds})
	var r NativeResponse
	e.post("/generate", map[string]any{"model": "scripted", "text": "Once", "sampling_params": map[string]any{"max_new_tokens": 9}}, &r)
	script, err := tokenizer.Open(tok, 0)
	if err != nil {
		t.Fatal(err)
	}
	period := len(script.Encode(" the end", false))
	if len(r.OutputIDs) != 9 || !strings.Contains(r.Text, "the end") {
		t.Fatalf("the script engine wrote %q (%v)", r.Text, r.OutputIDs)
	}
	for k := period; k < len(r.OutputIDs); k++ {
		if r.OutputIDs[k] != r.OutputIDs[k-period] {
			t.Fatalf("output %v does not repeat the script's %d tokens", r.OutputIDs, period)
		}
	}
	if _, err := New(context.Background(), func() config.Config {
		c := config.Default()
		c.Models[0].Engine = "script"
		return c
	}(), Options{}); err == nil || !strings.Contains(err.Error(), `engine "script"`) {
		t.Fatalf("without the kind in the table: %v", err)
	}
}
