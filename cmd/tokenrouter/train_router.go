package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/eval"
	"github.com/tokenrouter/tokenrouter/internal/progress"
	"github.com/tokenrouter/tokenrouter/routertrain"
)

// trainRouterFlags are the train-router command's flags besides the
// library's options.
type trainRouterFlags struct {
	slm, llm, tokenizer, prompts string
	threads                      int
	share, recall                float64
	o                            routertrain.Options
}

const trainRouterLong = `train-router trains a learned router (r2r, citer or co-llm) for a small/large model pair on the
CPU engine. The small model writes --max-tokens tokens from every prompt of a JSONL file
({"prompt": ...} per line); each position is labelled 1 when the large model, given the same prefix,
would have written another token (with --verify K, only when the two tokens' continuations by the
large model differ over K tokens, by --judge). The features are what the router sees when serving.
Training holds out --heldout of the positions, stops early on their loss, and sets the threshold on
them for --target-share (the fraction of positions sent to the large model) or --target-recall (of
the differing ones). The router goes to --out (safetensors with "tokenrouter.router" metadata), the
loss, ROC and precision-recall figures beside it (OUT-loss.png, OUT-roc.png, OUT-pr.png). A line
per epoch goes to stderr, and on a terminal bars of the models' loading, the data phases and the
epoch under way.

  tokenrouter train-router --slm models/tiny/stories260K.gguf --llm models/tiny/llama2xs-model.bin \
    --prompts testdata/eval/train-prompts.jsonl --algorithm r2r --out r2r-tiny.safetensors`

func newTrainRouterCmd() *cobra.Command {
	f := &trainRouterFlags{}
	c, t := &f.o.Collect, &f.o.Fit
	cmd := &cobra.Command{
		Use:   "train-router",
		Short: "Train an r2r, citer or co-llm router for a model pair on the CPU engine",
		Long:  trainRouterLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runTrainRouter(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.slm, "slm", "", "small model file (GGUF or llama2.c .bin), optionally NAME=PATH (required)")
	fl.StringVar(&f.llm, "llm", "", "large model file, optionally NAME=PATH (required)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "tokenizer file for both models (needed when the small model is a llama2.c checkpoint); default: a GGUF file's own")
	fl.StringVar(&f.prompts, "prompts", "", `JSONL file of {"prompt": ...} lines (required)`)
	fl.StringVar(&t.Algorithm, "algorithm", routertrain.R2R, "r2r, citer or co-llm")
	fl.StringVar(&f.o.Out, "out", "", "router file to write (required)")
	fl.BoolVar(&f.o.Plots, "plots", true, "write the loss, ROC and precision-recall PNGs beside --out")
	fl.IntVar(&c.MaxTokens, "max-tokens", 64, "tokens the small model writes per prompt")
	fl.Float32Var(&c.Sampling.Temperature, "temperature", 0, "the small model's sampling temperature; 0 is greedy")
	fl.Uint64Var(&t.Seed, "seed", 1, "seed of sampling, the split, the initialisation, the batch order and dropout")
	fl.IntVar(&c.Batch, "batch", 16, "sequences per engine step")
	fl.IntVar(&f.threads, "threads", 0, "CPU engine threads per model (0: all cores)")
	fl.IntVar(&c.Verify, "verify", 0, "keep a differing position only if the continuations from both tokens differ over this many tokens (0: off)")
	fl.StringVar(&c.Judge, "judge", routertrain.JudgeExact, "how --verify compares continuations: exact or likelihood")
	fl.Float64Var(&c.Margin, "margin", 0.1, "--judge likelihood: divergent when the small model's token's continuation has a mean log-probability lower by more than this (nats)")
	fl.IntVar(&c.TopK, "topk", 100, "top logits among r2r's features")
	fl.IntSliceVar(&t.HiddenDims, "hidden-dims", nil, "hidden widths (r2r default 256,512,256; citer 256,128; co-llm has none)")
	fl.IntVar(&t.Expansion, "expansion", 4, "r2r blocks' MLP expansion factor")
	fl.Float64Var(&t.Dropout, "dropout", 0.3, "r2r blocks' dropout rate while training")
	fl.BoolVar(&t.NormalizeInput, "normalize-input", false, "r2r: LayerNorm the hidden state and the embedding, softmax the top logits")
	fl.IntVar(&t.Epochs, "epochs", 50, "most passes over the training positions")
	fl.IntVar(&t.Patience, "patience", 5, "stop after this many epochs without a better held-out loss")
	fl.IntVar(&t.BatchSize, "batch-size", 64, "positions per optimiser step")
	fl.Float64Var(&t.LR, "lr", 1e-3, "Adam learning rate")
	fl.Float64Var(&t.Heldout, "heldout", 0.2, "fraction of the positions (of each label) held out")
	fl.Float64Var(&t.PosWeight, "pos-weight", 0, "loss weight of the differing positions (0: negatives/positives)")
	fl.StringVar(&t.Weight, "weight", routertrain.WeightLabel, "label: every differing position weighs the same; gap: each in proportion to how much more log-probability the large model gives its own token")
	fl.Float64Var(&f.share, "target-share", 0.2, "choose the threshold that sends this fraction of held-out positions to the large model")
	fl.Float64Var(&f.recall, "target-recall", 0, "instead, the threshold that sends this fraction of the differing held-out positions")
	return cmd
}

func runTrainRouter(cmd *cobra.Command, f *trainRouterFlags) error {
	if f.slm == "" || f.llm == "" || f.prompts == "" || f.o.Out == "" {
		return errors.New("train-router: --slm, --llm, --prompts and --out are required")
	}
	fl := cmd.Flags()
	switch {
	case fl.Changed("target-share") && fl.Changed("target-recall"):
		return errors.New("train-router: give --target-share or --target-recall, not both")
	case fl.Changed("target-recall"):
		f.o.Fit.Target = routertrain.Target{Share: -1, Recall: f.recall}
	default:
		f.o.Fit.Target = routertrain.Target{Share: f.share, Recall: -1}
	}
	if f.o.Fit.Algorithm != routertrain.R2R && !fl.Changed("dropout") {
		f.o.Fit.Dropout = 0 // the citer and co-llm networks have no dropout
	}
	ex, err := eval.Load(f.prompts)
	if err != nil {
		return fmt.Errorf("train-router: %w", err)
	}
	for _, e := range ex {
		f.o.Prompts = append(f.o.Prompts, e.Prompt)
	}
	f.o.SLM, f.o.LLM = trainModel(f.slm, f.tokenizer, f.threads), trainModel(f.llm, f.tokenizer, f.threads)
	f.o.Collect.Sampling.Seed = f.o.Fit.Seed
	errw := cmd.ErrOrStderr()
	tp := &trainProgress{w: errw}
	f.o.Collect.Progress, f.o.Fit.Progress = tp.phase, tp.train
	rep, err := routertrain.Train(withLoadBars(cmd.Context(), errw), f.o)
	tp.end()
	if err != nil {
		return fmt.Errorf("train-router: %w", err)
	}
	return printTrainReport(cmd.OutOrStdout(), rep)
}

// trainModel describes a --slm or --llm value on the CPU engine; its name
// is NAME of NAME=PATH, else the file's base name.
func trainModel(v, tokenizer string, threads int) config.Model {
	spec := parseModelSpec(v)
	if spec.name == "" {
		spec.name = strings.TrimSuffix(filepath.Base(spec.path), filepath.Ext(spec.path))
	}
	return cpuModel(spec, 0, tokenizer, threads)
}

// printTrainReport prints what the run did.
func printTrainReport(w io.Writer, rep *routertrain.Report) error {
	r, ds := rep.Result, rep.Dataset
	_, err := fmt.Fprintf(w, "positions %d (differ %d, labelled 1 %d), training %d, held out %d\n"+
		"epochs %d (kept %d), train loss %.4f, held-out loss %.4f, held-out AUC %.3f, AP %.3f\n"+
		"threshold %.4f (%s parameter %.4f): held-out share %.3f, recall %.3f, precision %.3f\n"+
		"wall time: data %s, training %s\nwrote %s\n",
		ds.Len(), ds.Differ, ds.Positives(), r.Train, r.Held,
		len(r.Losses), r.Best+1, r.TrainLoss, r.HeldoutLoss, r.AUC, r.PRAUC,
		r.Threshold, r.Opts.Algorithm, r.RouteThreshold(), r.At.Share, r.At.Recall, r.At.Precision,
		rep.Generate.Round(1e7), rep.Train.Round(1e7), strings.Join(rep.Files, ", "))
	return err
}

// trainProgress shows train-router's progress on w: on a terminal a bar
// per data phase and one for the epoch under way with its running loss;
// everywhere a line per finished epoch.
type trainProgress struct {
	w     io.Writer
	bar   *progress.Bar
	label string
}

// phase is routertrain's CollectOptions.Progress.
func (p *trainProgress) phase(phase string, done, total int) {
	p.show(phase, int64(done), int64(total), "")
}

// train is routertrain's FitOptions.Progress.
func (p *trainProgress) train(q routertrain.Progress) {
	label := fmt.Sprintf("epoch %d/%d", q.Epoch, q.Epochs)
	if !q.EpochDone {
		p.show(label, int64(q.Batch), int64(q.Batches), fmt.Sprintf("loss %.4f", q.Loss))
		return
	}
	if p.bar != nil {
		p.bar.Clear()
		p.bar = nil
	}
	mark := ""
	if q.Best {
		mark = " (best)"
	}
	fmt.Fprintf(p.w, "%s  train loss %.4f  held-out loss %.4f%s\n", label, q.Loss, q.HeldoutLoss, mark)
}

// show draws done of total under label, on a new bar when the label
// changes (the last one's final frame kept).
func (p *trainProgress) show(label string, done, total int64, note string) {
	if p.bar == nil || p.label != label {
		p.end()
		p.bar, p.label = progress.New(p.w, label, total, progress.Options{}), label
	}
	p.bar.Update(done, total, note)
}

// end finishes the bar under way, if any.
func (p *trainProgress) end() {
	if p.bar != nil {
		p.bar.Done()
		p.bar = nil
	}
}
