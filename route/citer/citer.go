// Package citer is CITER (Zheng et al., "CITER: Collaborative Inference
// for Efficient Large Language Model Decoding with Token-Level Routing",
// 2025, arXiv:2502.01976): an MLP router on the small model's hidden state
// scores how acceptable the small model's token is. Per-token rule: score
// = sigmoid(MLP(h)) on the small model's last hidden state h; score < tau
// drops the small model's token, the large model (model 1) generates that
// one token, and control returns. A step without a hidden state of the
// router's width routes to the large model. The whole step is scored as
// one batch.
//
// Weights: a safetensors file (parameter weights) holding mlp.0.weight
// [D1, H], mlp.0.bias [D1], mlp.1.weight [D2, D1], ..., mlp.N.weight
// [1, DN] and biases, ReLU between layers (PyTorch nn.Linear layout, F32,
// F16 or BF16). Parameter tau (default 0.5). Before it serves, the file is
// checked against the small model (nn.CheckRouter): its metadata, when it
// carries some (nn.RouterMeta), must match the model's vocabulary and
// hidden width, and mlp.0 must take the model's hidden width.
package citer

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// Name is the registry name.
const Name = "citer"

// Algorithm routes low-scoring small-model tokens to the large model.
type Algorithm struct {
	// Layers is the MLP, input first, one output last.
	Layers []nn.Linear
	// Tau is the score threshold.
	Tau float64

	x   []float32
	buf [2][]float32
}

// New builds an instance: parameters weights (path) and tau; two models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (small, large), got %d", route.ErrModels, len(s.Models))
	}
	a := &Algorithm{}
	var err error
	if a.Tau, err = s.Float("tau", 0.5); err != nil || s.Model != 0 {
		return a, err // only the small model evaluates the router
	}
	w, err := nn.Load(s.Params["weights"])
	if err != nil {
		return nil, err
	}
	for in := -1; w.Has(fmt.Sprintf("mlp.%d.weight", len(a.Layers))); in = a.Layers[len(a.Layers)-1].Out {
		l, err := w.Linear(fmt.Sprintf("mlp.%d", len(a.Layers)), in)
		if err != nil {
			return nil, err
		}
		a.Layers = append(a.Layers, l)
	}
	if len(a.Layers) == 0 || a.Layers[len(a.Layers)-1].Out != 1 {
		return nil, fmt.Errorf("citer weights: want mlp.0 ... mlp.N with one output")
	}
	if err := nn.CheckRouter(w, s.Params["weights"], Name, a.Layers[0].In, s.Infos, s.Models); err != nil {
		return nil, err
	}
	return a, nil
}

// Want asks the small model for its hidden state.
func (a *Algorithm) Want(model int, _ *route.Request) engine.Want {
	if model == 0 {
		return engine.WantHidden
	}
	return 0
}

// Speculable opts into speculative continuation: a routed position's
// token is the large model's one token, handed back at once.
func (a *Algorithm) Speculable(from, to int) bool { return from == 0 && to == 1 }

// Route scores the step's requests in one batch and routes those below Tau.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	if s.Model == 1 {
		for i := range d {
			d[i].Next = 0
		}
		return
	}
	in := a.Layers[0].In
	a.x = nn.Grow(a.x, len(d)*in)
	for i, o := range s.Outputs {
		copy(a.x[i*in:(i+1)*in], o.Hidden) // a wrong width fails the check below
	}
	x := a.x
	for j := range a.Layers {
		a.buf[j%2] = a.Layers[j].Forward(x, len(d), a.buf[j%2])
		if x = a.buf[j%2]; j < len(a.Layers)-1 {
			nn.ReLU(x)
		}
	}
	for i, o := range s.Outputs {
		if len(o.Hidden) != in || nn.Sigmoid(x[i]) < a.Tau {
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}
