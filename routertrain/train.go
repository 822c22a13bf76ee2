// Package routertrain trains the learned token routers (r2r, citer,
// co-llm) on the project's own engines. The small model writes from each
// prompt; every position it wrote is labelled 1 when the large model,
// given the same prefix, would have written a different token (R2R's
// first label), optionally kept only when the two tokens' continuations
// by the large model diverge (Verify); each also records its likelihood
// gap, by which FitOptions.Weight can weigh it. The features are exactly what the
// routers see when serving: the small model's last hidden state, the
// input embedding of the token it sampled and its top logits
// (descending). Training runs in float64 with hand-written forward and
// backward passes (Linear, LayerNorm, GELU, ReLU, dropout, softmax,
// sigmoid cross-entropy), Adam on mini-batches, a stratified held-out
// split with early stopping, and a threshold chosen on the held-out
// positions for a target share of positions sent to the large model or a
// target recall of the differing ones. The result is a safetensors file in
// the algorithm's own layout with nn.RouterMeta, and PNG figures of the
// loss and the held-out ROC and precision–recall curves. Everything is
// seeded: the same inputs and seed give the same file, byte for byte.
package routertrain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// Options describe a training run from model files to a router file.
type Options struct {
	// SLM and LLM are the small and large models (their Name goes into the
	// router's metadata).
	SLM, LLM config.Model
	// Kinds opens them (nil: loader.Builtin()).
	Kinds loader.Kinds
	// Prompts are the texts the small model writes from.
	Prompts []string
	// Collect and Fit configure data generation and training (Collect's
	// Stop is set here); their Progress functions, when set, are told how
	// each goes.
	Collect CollectOptions
	Fit     FitOptions
	// Out is the router file written; with Plots the figures go beside it
	// (PlotPaths of Out without its extension).
	Out   string
	Plots bool
}

// Report is what a run did.
type Report struct {
	// Dataset is the labelled positions and Result the trained router.
	Dataset *Dataset
	Result  *Result
	// Files lists the files written, the router first.
	Files []string
	// Generate and Train are the wall times of data generation (with
	// verification) and of training.
	Generate, Train time.Duration
}

// Train opens the two models, generates and labels the data, trains the
// router and writes it (and its figures).
func Train(ctx context.Context, o Options) (*Report, error) {
	if o.Out == "" {
		return nil, errors.New("routertrain: no output file")
	}
	if o.Kinds == nil {
		o.Kinds = loader.Builtin()
	}
	start := time.Now()
	ds, meta, err := generate(ctx, o)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dataset: ds, Generate: time.Since(start)}
	start = time.Now()
	if rep.Result, err = Fit(ctx, ds, o.Fit); err != nil {
		return nil, err
	}
	rep.Train = time.Since(start)
	if err := rep.Result.Save(o.Out, meta); err != nil {
		return nil, err
	}
	rep.Files = append(rep.Files, o.Out)
	if o.Plots {
		prefix := strings.TrimSuffix(o.Out, filepath.Ext(o.Out))
		if err := rep.Result.Plot(prefix); err != nil {
			return nil, err
		}
		l, r, p := PlotPaths(prefix)
		rep.Files = append(rep.Files, l, r, p)
	}
	return rep, nil
}

// generate opens the models, encodes the prompts with the small model's
// tokenizer and collects the dataset; meta carries the models' facts.
func generate(ctx context.Context, o Options) (*Dataset, nn.RouterMeta, error) {
	var meta nn.RouterMeta
	slm, err := o.Kinds.Open(ctx, o.SLM)
	if err != nil {
		return nil, meta, fmt.Errorf("routertrain: small model: %w", err)
	}
	defer slm.Engine.Close()
	llm, err := o.Kinds.OpenEngine(ctx, o.LLM)
	if err != nil {
		return nil, meta, fmt.Errorf("routertrain: large model: %w", err)
	}
	defer llm.Close()
	si, li := slm.Engine.Info(), llm.Info()
	if si.VocabHash != "" && li.VocabHash != "" && si.VocabHash != li.VocabHash {
		return nil, meta, fmt.Errorf("routertrain: model %q has vocabulary %s, model %q has %s: they must share one", o.SLM.Name, si.VocabHash, o.LLM.Name, li.VocabHash)
	}
	tok := slm.Tokenizer
	if tok == nil {
		return nil, meta, fmt.Errorf("routertrain: model %q has no tokenizer to encode the prompts", o.SLM.Name)
	}
	prompts := make([][]int32, len(o.Prompts))
	for i, p := range o.Prompts {
		ids := tok.Encode(p, true)
		if len(ids) == 0 && tok.BOS >= 0 {
			ids = []int32{tok.BOS}
		}
		if len(ids) == 0 {
			return nil, meta, fmt.Errorf("routertrain: prompt %d encodes to no tokens", i)
		}
		prompts[i] = ids
	}
	c := o.Collect
	c.Stop = func(t int32) bool { return tok.IsEOG(t) || t == tok.BOS }
	ds, err := Collect(ctx, slm.Engine, llm, prompts, c)
	if err != nil {
		return nil, meta, err
	}
	meta = nn.RouterMeta{SLM: o.SLM.Name, LLM: o.LLM.Name, VocabSize: si.VocabSize, VocabHash: si.VocabHash, HiddenSize: si.HiddenSize}
	return ds, meta, nil
}

// Save writes the router to path (through a temporary file beside it, so
// that a failed run leaves no partial file).
func (r *Result) Save(path string, m nn.RouterMeta) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("routertrain: %w", err)
	}
	err = r.Write(f, m)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("routertrain: %w", cerr)
	}
	if err == nil {
		if err = os.Rename(tmp, path); err != nil {
			err = fmt.Errorf("routertrain: %w", err)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
