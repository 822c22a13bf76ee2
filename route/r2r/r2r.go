// Package r2r is R2R, Roads to Rome (Fu et al., "R2R: Efficiently
// Navigating Divergent Reasoning Paths with Small-Large Model Token
// Routing", 2025, arXiv:2505.21600): a neural router on the small model's
// step decides which tokens the large model must regenerate. Per-token
// rule: x = [h ‖ e(t) ‖ P·topk(z)] — the small model's last hidden state,
// its input embedding of the sampled token t (Step.Embed; zeros when the
// engine has none), and its K largest logits (descending) projected by P —
// goes through x ← Wx, residual blocks x ← x + fc2(GELU(fc1(LN(x)))), a
// final LayerNorm and one output logit; sigmoid ≥ threshold drops t, the
// large model (model 1) generates that position, and control returns
// after one token. The step is evaluated as one batch. A step without a
// hidden state of the router's width routes to the large model.
//
// Weights: a safetensors file (parameter weights; PyTorch layouts, F32,
// F16 or BF16) with metadata hidden_size = H and tensors logits_proj
// (.weight [P, K], .bias [P]), input (.weight [D, H+E+P], .bias [D]),
// blocks.0 ... blocks.N-1, each norm (.weight, .bias [D]), fc1 (.weight
// [F, D], .bias [F]) and fc2 (.weight [D, F], .bias [D]), out_norm
// (.weight, .bias [D]) and out (.weight [1, D], .bias [1]). Parameter
// threshold (default 0.5).
package r2r

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// Name is the registry name.
const Name = "r2r"

// Block is one pre-LayerNorm residual MLP block.
type Block struct {
	// Norm, FC1 and FC2 compute x + FC2(GELU(FC1(Norm(x)))).
	Norm     nn.LayerNorm
	FC1, FC2 nn.Linear
}

// Algorithm is the neural router.
type Algorithm struct {
	// H and E are the hidden-state and embedding widths of the input.
	H, E int
	// Proj, In, Blocks, OutNorm and Out are the network.
	Proj, In, Out nn.Linear
	Blocks        []Block
	OutNorm       nn.LayerNorm
	// Threshold is the routing probability threshold.
	Threshold float64

	x, z, p, t, u []float32
}

// New builds an instance: parameters weights (path) and threshold.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("needs exactly 2 models (small, large), got %d", len(s.Models))
	}
	a := &Algorithm{}
	var err error
	if a.Threshold, err = s.Float("threshold", 0.5); err != nil || s.Model != 0 {
		return a, err // only the small model evaluates the router
	}
	w, err := nn.Load(s.Params["weights"])
	if err != nil {
		return nil, err
	}
	if a.H, err = strconv.Atoi(w.Meta["hidden_size"]); err != nil || a.H <= 0 {
		return nil, fmt.Errorf("r2r weights: metadata hidden_size=%q", w.Meta["hidden_size"])
	}
	if a.Proj, err = w.Linear("logits_proj", -1); err != nil {
		return nil, err
	}
	if a.In, err = w.Linear("input", -1); err != nil {
		return nil, err
	}
	if a.E = a.In.In - a.H - a.Proj.Out; a.E < 0 {
		return nil, fmt.Errorf("r2r weights: input width %d < hidden %d + projection %d", a.In.In, a.H, a.Proj.Out)
	}
	D := a.In.Out
	for n := 0; w.Has(fmt.Sprintf("blocks.%d.norm.weight", n)); n++ {
		var b Block
		p := fmt.Sprintf("blocks.%d.", n)
		if b.Norm, err = w.LayerNorm(p+"norm", D); err == nil {
			if b.FC1, err = w.Linear(p+"fc1", D); err == nil {
				b.FC2, err = w.Linear(p+"fc2", b.FC1.Out)
			}
		}
		if err == nil && b.FC2.Out != D {
			err = fmt.Errorf("r2r weights: %sfc2 has %d outputs, want %d", p, b.FC2.Out, D)
		}
		if err != nil {
			return nil, err
		}
		a.Blocks = append(a.Blocks, b)
	}
	if a.OutNorm, err = w.LayerNorm("out_norm", D); err != nil {
		return nil, err
	}
	if a.Out, err = w.Linear("out", D); err == nil && a.Out.Out != 1 {
		err = fmt.Errorf("r2r weights: out has %d outputs, want 1", a.Out.Out)
	}
	return a, err
}

// Want asks the small model for its hidden state and logits.
func (a *Algorithm) Want(model int, _ *route.Request) engine.Want {
	if model == 0 {
		return engine.WantHidden | engine.WantLogits
	}
	return 0
}

// Speculable opts into speculative continuation: a routed position's
// token is the large model's one token, handed back at once.
func (a *Algorithm) Speculable(from, to int) bool { return from == 0 && to == 1 }

// Route evaluates the router over the step and routes tokens whose
// probability reaches Threshold; the large model's token returns.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	if s.Model == 1 {
		for i := range d {
			d[i].Next = 0
		}
		return
	}
	n, K, W := len(d), a.Proj.In, a.In.In
	a.x, a.z = nn.Grow(a.x, n*W), nn.Grow(a.z, n*K)
	clear(a.x)
	for i, o := range s.Outputs {
		copy(a.x[i*W:i*W+a.H], o.Hidden)
		if s.Embed != nil && a.E > 0 {
			s.Embed.Embed(o.Token, a.x[i*W+a.H:i*W+a.H+a.E])
		}
		topK(o.Logits, a.z[i*K:(i+1)*K])
	}
	a.p = a.Proj.Forward(a.z, n, a.p)
	for i := range n {
		copy(a.x[i*W+a.H+a.E:(i+1)*W], a.p[i*a.Proj.Out:(i+1)*a.Proj.Out])
	}
	a.z = a.In.Forward(a.x, n, a.z) // z: the residual stream
	for _, b := range a.Blocks {
		a.t = b.Norm.Forward(a.z, n, a.t)
		a.u = b.FC1.Forward(a.t, n, a.u)
		nn.GELU(a.u)
		a.t = b.FC2.Forward(a.u, n, a.t)
		for k := range a.z {
			a.z[k] += a.t[k]
		}
	}
	a.t = a.OutNorm.Forward(a.z, n, a.t)
	a.u = a.Out.Forward(a.t, n, a.u)
	for i, o := range s.Outputs {
		if len(o.Hidden) != a.H || nn.Sigmoid(a.u[i]) >= a.Threshold {
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}

// topK writes the len(dst) largest logits in descending order (zeros pad
// a vocabulary smaller than len(dst)). Tokens ruled out by a
// structured-output mask (−∞) are left out, as if the vocabulary lacked
// them.
func topK(logits, dst []float32) {
	n := 0
	for _, v := range logits {
		if len(dst) == 0 || n == len(dst) && v <= dst[n-1] || math.IsInf(float64(v), -1) {
			continue
		}
		k := min(n, len(dst)-1)
		n = min(n+1, len(dst))
		for ; k > 0 && dst[k-1] < v; k-- {
			dst[k] = dst[k-1]
		}
		dst[k] = v
	}
	clear(dst[n:])
}
