package routetest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/route/nn/torchtest"
)

// R2RWeights returns random weights and metadata of an R2R router (R2R's
// HiddenStatesTokenLMHeadLogitsClassifier as its save_model writes it,
// route/r2r) for hidden size h: the top 16 logits, hidden_dims [32, 24]
// (so the first block changes width), expansion factor 2, no threshold of
// its own. bias shifts the output logit (0 gives routing probabilities
// around one half).
func R2RWeights(h int, seed uint64, bias float32) (map[string]nn.Tensor, map[string]string) {
	rng := rand.New(rand.NewPCG(seed, 8))
	mat := func(rows, cols int, scale float64) nn.Tensor {
		t := nn.Tensor{Shape: []int{rows, cols}, Data: make([]float32, rows*cols)}
		for i := range t.Data {
			t.Data[i] = float32(scale * rng.NormFloat64() / math.Sqrt(float64(max(cols, 1))))
		}
		return t
	}
	vec := func(n int, v float32) nn.Tensor {
		t := nn.Tensor{Shape: []int{n}, Data: make([]float32, n)}
		for i := range t.Data {
			t.Data[i] = v + float32(rng.NormFloat64())*0.01
		}
		return t
	}
	const k, x = 16, 2
	dims := []int{32, 24, 24}
	ts := map[string]nn.Tensor{
		// Logits are large and alike: a small projection keeps them from
		// swamping the other features.
		"logits_projection.weight": mat(h, k, 0.1), "logits_projection.bias": vec(h, 0),
		"combined_projection.weight": mat(dims[0], 3*h, 1), "combined_projection.bias": vec(dims[0], 0),
		"backbone.input_projection.weight": mat(dims[0], dims[0], 1), "backbone.input_projection.bias": vec(dims[0], 0),
		"backbone.output_layer.0.weight": vec(dims[2], 1), "backbone.output_layer.0.bias": vec(dims[2], 0),
		// Routing probabilities spread around one half.
		"backbone.output_layer.1.weight": mat(1, dims[2], 0.5), "backbone.output_layer.1.bias": vec(1, bias),
	}
	for i := range 2 {
		pre := fmt.Sprintf("backbone.blocks.%d.", i)
		in, out := dims[i], dims[i+1]
		ts[pre+"layer_norm.weight"], ts[pre+"layer_norm.bias"] = vec(in, 1), vec(in, 0)
		ts[pre+"mlp.0.weight"], ts[pre+"mlp.0.bias"] = mat(in*x, in, 1), vec(in*x, 0)
		ts[pre+"mlp.3.weight"], ts[pre+"mlp.3.bias"] = mat(out, in*x, 1), vec(out, 0)
		if in != out {
			ts[pre+"dim_change.weight"], ts[pre+"dim_change.bias"] = mat(out, in, 1), vec(out, 0)
		}
	}
	meta := map[string]string{
		"model_type": "HiddenStatesTokenLMHeadLogitsClassifier",
		"init_args": fmt.Sprintf(`{"hidden_states_size":%d,"logits_size":%d,"hidden_dims":[%d,%d],"expansion_factor":%d,`+
			`"dropout_rate":0.1,"normalize_input":false,"use_position_embedding":false,"max_position_embeddings":1024}`, h, k, dims[0], dims[1], x),
		"common_args": `{"threshold":null,"input_type":["hidden_states","token","logits"]}`,
	}
	return ts, meta
}

// WriteR2RTorch writes R2RWeights(h, seed, bias) to path as R2R's
// save_model saves a router (torch.save; route/nn/torchtest), with
// threshold (a float64, or nil for none) in its common_args.
func WriteR2RTorch(path string, h int, seed uint64, bias float32, threshold any) error {
	ts, meta := R2RWeights(h, seed, bias)
	var init any
	if err := json.Unmarshal([]byte(meta["init_args"]), &init); err != nil {
		return err
	}
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	var state []torchtest.Pair
	for _, n := range names {
		state = append(state, torchtest.Pair{Key: n, Value: &torchtest.Tensor{Shape: ts[n].Shape, Data: ts[n].Data}})
	}
	return torchtest.Write(path, torchtest.R2R(meta["model_type"], pyValue(init).(torchtest.Dict), threshold, state))
}

// pyValue turns decoded JSON into the values a torch file pickles
// (objects as dicts with sorted keys, whole numbers as ints).
func pyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := torchtest.Dict{}
		for _, k := range keys {
			d = append(d, torchtest.Pair{Key: k, Value: pyValue(v[k])})
		}
		return d
	case []any:
		l := torchtest.List{}
		for _, x := range v {
			l = append(l, pyValue(x))
		}
		return l
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int(v)
		}
	}
	return v
}
