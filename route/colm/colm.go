// Package colm is Co-LLM (Shen et al., "Learning to Decode Collaboratively
// with Multiple Language Models", ACL 2024, arXiv:2403.03870): a base
// model (model 0) with a learned linear deferral head. Per-token rule: on
// the base model's last hidden state h, P(defer) = sigmoid(w·h + b); when
// P(defer) > eta the base model's token is dropped, the assistant model
// (model 1) generates that one token, and control returns to the base
// model. A step without a hidden state of the head's width defers.
//
// Weights: a safetensors file (parameter weights) holding defer.weight
// [1, H] and defer.bias [1] (F32, F16 or BF16), H the base model's hidden
// size. Parameter eta (default 0.5). Before it serves, the file is checked
// against the base model (nn.CheckRouter): its metadata, when it carries
// some (nn.RouterMeta), must match the model's vocabulary and hidden
// width, and defer.weight must take the model's hidden width.
package colm

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// Name is the registry name.
const Name = "co-llm"

// Algorithm defers tokens to the assistant by a linear head.
type Algorithm struct {
	// Head maps a hidden state to the deferral logit.
	Head nn.Linear
	// Eta is the deferral probability threshold.
	Eta float64
}

// New builds an instance: parameters weights (path) and eta; two models.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (base, assistant), got %d", route.ErrModels, len(s.Models))
	}
	a := &Algorithm{}
	var err error
	if a.Eta, err = s.Float("eta", 0.5); err != nil {
		return nil, err
	}
	if s.Model != 0 {
		return a, nil // only the base model evaluates the head
	}
	w, err := nn.Load(s.Params["weights"])
	if err != nil {
		return nil, err
	}
	if a.Head, err = w.Linear("defer", -1); err == nil && a.Head.Out != 1 {
		err = fmt.Errorf("defer.weight has %d rows, want 1", a.Head.Out)
	}
	if err != nil {
		return nil, err
	}
	if err := nn.CheckRouter(w, s.Params["weights"], Name, a.Head.In, s.Infos, s.Models); err != nil {
		return nil, err
	}
	return a, nil
}

// Want asks the base model for its hidden state.
func (a *Algorithm) Want(model int, _ *route.Request) engine.Want {
	if model == 0 {
		return engine.WantHidden
	}
	return 0
}

// Speculable opts into speculative continuation: a routed position's
// token is the large model's one token, handed back at once.
func (a *Algorithm) Speculable(from, to int) bool { return from == 0 && to == 1 }

// Route defers base-model tokens whose P(defer) exceeds Eta; the
// assistant's token is kept and control returns.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	for i := range s.Requests {
		if s.Model == 1 {
			d[i].Next = 0
			continue
		}
		h := s.Outputs[i].Hidden
		if len(h) != a.Head.In || nn.Sigmoid(a.Head.Forward(h, 1, nil)[0]) > a.Eta {
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}
