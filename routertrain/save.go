package routertrain

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tokenrouter/tokenrouter/route/nn"
)

// r2rInitArgs is the init_args metadata of an R2R router file (R2R's
// HiddenStatesTokenLMHeadLogitsClassifier constructor arguments).
type r2rInitArgs struct {
	HiddenStatesSize      int     `json:"hidden_states_size"`
	LogitsSize            int     `json:"logits_size"`
	HiddenDims            []int   `json:"hidden_dims"`
	ExpansionFactor       int     `json:"expansion_factor"`
	DropoutRate           float64 `json:"dropout_rate"`
	NormalizeInput        bool    `json:"normalize_input"`
	UsePositionEmbedding  bool    `json:"use_position_embedding"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
}

// r2rCommonArgs is the common_args metadata of an R2R router file.
type r2rCommonArgs struct {
	Threshold float64  `json:"threshold"`
	InputType []string `json:"input_type"`
}

// RouteThreshold is the threshold in the algorithm's own terms, the value
// of its threshold parameter: r2r's threshold and co-llm's eta on the
// probability that the large model differs, citer's tau on its acceptance
// score (one minus that probability).
func (r *Result) RouteThreshold() float64 {
	if r.Opts.Algorithm == CITER {
		return 1 - r.Threshold
	}
	return r.Threshold
}

// Tensors returns the router's weights in its algorithm's file layout
// (float32, PyTorch nn.Linear layout). A citer router scores acceptance,
// so its output layer is the negation of the trained one.
func (r *Result) Tensors() map[string]nn.Tensor {
	ps := r.net.params()
	out := make(map[string]nn.Tensor, len(ps))
	for _, p := range ps {
		t := nn.Tensor{Shape: append([]int(nil), p.shape...), Data: make([]float32, len(p.w))}
		for i, v := range p.w {
			t.Data[i] = float32(v)
		}
		out[p.name] = t
	}
	if r.Opts.Algorithm == CITER {
		last := r.net.(*mlpNet).layers[len(r.net.(*mlpNet).layers)-1]
		for _, name := range []string{last.w.name, last.b.name} {
			for i, v := range out[name].Data {
				out[name].Data[i] = -v
			}
		}
	}
	return out
}

// Meta completes m (the models' names and the small model's vocabulary and
// hidden width, filled in by the caller) with what training decided: the
// algorithm, the feature widths, the threshold, the target and the
// held-out metrics.
func (r *Result) Meta(m nn.RouterMeta) nn.RouterMeta {
	m.Format, m.Algorithm = nn.MetaFormat, r.Opts.Algorithm
	m.Threshold = r.RouteThreshold()
	if r.Opts.Algorithm == R2R {
		m.EmbedSize, m.TopK = r.E, r.K
	}
	if r.Opts.Target.Share >= 0 {
		m.Target = map[string]float64{"share": r.Opts.Target.Share}
	} else {
		m.Target = map[string]float64{"recall": r.Opts.Target.Recall}
	}
	m.Metrics = map[string]float64{
		"train_loss": r.TrainLoss, "heldout_loss": r.HeldoutLoss, "heldout_auc": r.AUC, "heldout_pr_auc": r.PRAUC,
		"positives": float64(r.Positives), "examples": float64(r.Examples), "heldout_examples": float64(r.Held),
		"heldout_share": r.At.Share, "heldout_recall": r.At.Recall, "heldout_precision": r.At.Precision,
		"epochs": float64(len(r.Losses)), "best_epoch": float64(r.Best + 1), "pos_weight": r.PosWeight,
	}
	return m
}

// Write writes the router as a safetensors file: its tensors, the router
// metadata (nn.MetaKey) and, for r2r, R2R's own model_type, init_args and
// common_args.
func (r *Result) Write(w io.Writer, m nn.RouterMeta) error {
	js, err := r.Meta(m).Encode()
	if err != nil {
		return fmt.Errorf("routertrain: %w", err)
	}
	meta := map[string]string{nn.MetaKey: js}
	if r.Opts.Algorithm == R2R {
		o := r.Opts
		ia, err := json.Marshal(r2rInitArgs{HiddenStatesSize: r.H, LogitsSize: r.K, HiddenDims: o.HiddenDims,
			ExpansionFactor: o.Expansion, DropoutRate: o.Dropout, NormalizeInput: o.NormalizeInput, MaxPositionEmbeddings: 1024})
		if err != nil {
			return fmt.Errorf("routertrain: %w", err)
		}
		ca, err := json.Marshal(r2rCommonArgs{Threshold: r.Threshold, InputType: []string{"hidden_states", "token", "logits"}})
		if err != nil {
			return fmt.Errorf("routertrain: %w", err)
		}
		meta["model_type"], meta["init_args"], meta["common_args"] = "HiddenStatesTokenLMHeadLogitsClassifier", string(ia), string(ca)
	}
	return nn.Write(w, r.Tensors(), meta)
}
