package r2r_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/route/nn/torchtest"
	"github.com/tokenrouter/tokenrouter/route/r2r"
)

// arch is a router's architecture, as R2R's init_args give it.
type arch struct {
	typ    string
	H, K   int   // hidden width, top logits (0: none)
	V      int   // vocabulary of the small model
	dims   []int // hidden_dims
	X      int   // expansion_factor
	norm   bool  // normalize_input
	ownEmb bool  // the file carries token_embeddings.weight (V × H)
}

// shapes lists the state dict R2R's classifier has for a, in its order.
func (a arch) shapes() [][2]any {
	var out [][2]any
	add := func(name string, shape ...int) { out = append(out, [2]any{name, shape}) }
	lin := func(name string, o, i int) { add(name+".weight", o, i); add(name+".bias", o) }
	ln := func(name string, d int) { add(name+".weight", d); add(name+".bias", d) }
	token, logits := a.typ != r2r.TypeLogits, a.typ != r2r.TypeToken
	if a.norm {
		ln("layer_norm_hidden_states", a.H)
		if token {
			ln("layer_norm_token", a.H)
		}
	}
	if token && a.ownEmb {
		add("token_embeddings.weight", a.V, a.H)
	}
	width := a.H
	if token {
		width += a.H
	}
	if logits {
		lin("logits_projection", a.H, a.K)
		width += a.H
	}
	lin("combined_projection", a.dims[0], width)
	lin("backbone.input_projection", a.dims[0], a.dims[0])
	dims := append(slices.Clone(a.dims), a.dims[len(a.dims)-1])
	for i := range a.dims {
		pre := fmt.Sprintf("backbone.blocks.%d.", i)
		ln(pre+"layer_norm", dims[i])
		lin(pre+"mlp.0", dims[i]*a.X, dims[i])
		lin(pre+"mlp.3", dims[i+1], dims[i]*a.X)
		if dims[i] != dims[i+1] {
			lin(pre+"dim_change", dims[i+1], dims[i])
		}
	}
	ln("backbone.output_layer.0", dims[len(dims)-1])
	lin("backbone.output_layer.1", 1, dims[len(dims)-1])
	return out
}

// weights draws random weights for a: names in state-dict order and the
// tensors. Some are stored as the file format allows: transposed, at an
// offset, as a parameter, in bfloat16 and float16 (their values exact in
// those types).
func (a arch) weights(seed uint64) ([]string, map[string]*torchtest.Tensor) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var names []string
	ts := map[string]*torchtest.Tensor{}
	for _, s := range a.shapes() {
		name, shape := s[0].(string), s[1].([]int)
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := &torchtest.Tensor{Shape: shape, Data: make([]float32, n)}
		for i := range t.Data {
			switch {
			case len(shape) == 2:
				t.Data[i] = float32(rng.NormFloat64() / math.Sqrt(float64(shape[1])))
			case strings.HasSuffix(name, "norm.weight") || strings.Contains(name, "norm_") && strings.HasSuffix(name, ".weight") || name == "backbone.output_layer.0.weight":
				t.Data[i] = float32(1 + 0.2*rng.NormFloat64())
			default:
				t.Data[i] = float32(0.2 * rng.NormFloat64())
			}
		}
		names = append(names, name)
		ts[name] = t
	}
	ts["combined_projection.weight"].Offset = 5
	ts["backbone.input_projection.weight"].Parameter = true
	if t, ok := ts["logits_projection.weight"]; ok {
		t.Transposed = true
	}
	out := ts["backbone.output_layer.1.weight"]
	out.Storage = "BFloat16Storage"
	for i, v := range out.Data {
		out.Data[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff)
	}
	b := ts["backbone.blocks.0.layer_norm.bias"]
	b.Storage = "HalfStorage"
	for i, v := range b.Data {
		b.Data[i] = float32(math.Round(float64(v)*256) / 256)
	}
	return names, ts
}

// file is the dict R2R's save_model saves for a with these weights.
func (a arch) file(names []string, ts map[string]*torchtest.Tensor, threshold any) torchtest.Dict {
	dims := torchtest.List{}
	for _, d := range a.dims {
		dims = append(dims, d)
	}
	init := torchtest.Dict{
		{Key: "hidden_states_size", Value: a.H}, {Key: "hidden_dims", Value: dims}, {Key: "expansion_factor", Value: a.X},
		{Key: "dropout_rate", Value: 0.3}, {Key: "dtype", Value: torchtest.DType("float32")},
		{Key: "pretrained_model_name", Value: "small"}, {Key: "use_position_embedding", Value: false},
		{Key: "max_position_embeddings", Value: 1024}, {Key: "normalize_input", Value: a.norm}, {Key: "freeze_lm_head", Value: true},
	}
	if a.K > 0 {
		init = append(init, torchtest.Pair{Key: "logits_size", Value: a.K})
	}
	var state []torchtest.Pair
	for _, n := range names {
		state = append(state, torchtest.Pair{Key: n, Value: ts[n]})
	}
	return torchtest.R2R(a.typ, init, threshold, state)
}

// reference is the router's forward pass written out plainly, in float64,
// from the tensors' logical values.
type reference struct {
	a     arch
	ts    map[string]*torchtest.Tensor
	embed [][]float32 // the small model's embedding table
}

func (r reference) linear(name string, x []float64) []float64 {
	w, b := r.ts[name+".weight"], r.ts[name+".bias"]
	out, in := w.Shape[0], w.Shape[1]
	if len(x) != in {
		panic(fmt.Sprintf("%s: %d inputs, want %d", name, len(x), in))
	}
	y := make([]float64, out)
	for o := range out {
		y[o] = float64(b.Data[o])
		for i := range in {
			y[o] += float64(w.Data[o*in+i]) * x[i]
		}
	}
	return y
}

func (r reference) layerNorm(name string, x []float64) []float64 {
	var mean, v float64
	for _, e := range x {
		mean += e
	}
	mean /= float64(len(x))
	for _, e := range x {
		v += (e - mean) * (e - mean)
	}
	v /= float64(len(x))
	y := make([]float64, len(x))
	for i, e := range x {
		y[i] = (e-mean)/math.Sqrt(v+1e-5)*float64(r.ts[name+".weight"].Data[i]) + float64(r.ts[name+".bias"].Data[i])
	}
	return y
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// prob is the routing probability of one output.
func (r reference) prob(o engine.Output) float64 {
	a := r.a
	h := f64(o.Hidden)
	if a.norm {
		h = r.layerNorm("layer_norm_hidden_states", h)
	}
	feats := h
	if a.typ != r2r.TypeLogits {
		var e []float64
		if a.ownEmb {
			e = f64(r.ts["token_embeddings.weight"].Data[int(o.Token)*a.H : int(o.Token+1)*a.H])
		} else {
			e = f64(r.embed[o.Token])
		}
		if a.norm {
			e = r.layerNorm("layer_norm_token", e)
		}
		feats = append(feats, e...)
	}
	if a.typ != r2r.TypeToken {
		var valid []float64
		for _, v := range o.Logits {
			if !math.IsInf(float64(v), -1) {
				valid = append(valid, float64(v))
			}
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(valid)))
		valid = valid[:min(len(valid), a.K)]
		if a.norm && len(valid) > 0 {
			var sum float64
			top := valid[0]
			for _, v := range valid {
				sum += math.Exp(v - top)
			}
			for i, v := range valid {
				valid[i] = math.Exp(v-top) / sum
			}
		}
		z := make([]float64, a.K)
		copy(z, valid)
		feats = append(feats, r.linear("logits_projection", z)...)
	}
	x := r.linear("backbone.input_projection", r.linear("combined_projection", feats))
	dims := append(slices.Clone(a.dims), a.dims[len(a.dims)-1])
	for i := range a.dims {
		pre := fmt.Sprintf("backbone.blocks.%d.", i)
		m := r.linear(pre+"mlp.0", r.layerNorm(pre+"layer_norm", x))
		for k, v := range m {
			m[k] = v / 2 * (1 + math.Erf(v/math.Sqrt2))
		}
		m = r.linear(pre+"mlp.3", m)
		res := x
		if dims[i] != dims[i+1] {
			res = r.linear(pre+"dim_change", x)
		}
		for k := range m {
			m[k] += res[k]
		}
		x = m
	}
	logit := r.linear("backbone.output_layer.1", r.layerNorm("backbone.output_layer.0", x))[0]
	return 1 / (1 + math.Exp(-logit))
}

// table is the small model's token embedding (engine.Embedder).
type table [][]float32

func (e table) Embed(tok int32, dst []float32) { copy(dst, e[tok]) }

// outputs draws n small-model outputs for a: hidden states, logits over
// the vocabulary (a few masked in the second output), sampled tokens.
func outputs(a arch, n int, seed uint64) []engine.Output {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]engine.Output, n)
	for i := range out {
		o := &out[i]
		o.Token = int32(rng.IntN(a.V))
		o.Hidden = make([]float32, a.H)
		for k := range o.Hidden {
			o.Hidden[k] = float32(2 * rng.NormFloat64())
		}
		o.Logits = make([]float32, a.V)
		for k := range o.Logits {
			o.Logits[k] = float32(3 * rng.NormFloat64())
			if i == 1 && k%3 != 0 {
				o.Logits[k] = float32(math.Inf(-1))
			}
		}
	}
	return out
}

// archs are the routers the format tests read: R2R's three hidden-state
// classifiers, with and without normalisation and their own embedding
// table; hidden_dims [6, 10, 6] with expansion 2 change width twice.
func archs() map[string]arch {
	base := arch{typ: r2r.TypeTokenLogits, H: 8, K: 4, V: 20, dims: []int{6, 10, 6}, X: 2}
	norm := base
	norm.norm, norm.ownEmb = true, true
	logits := base
	logits.typ, logits.dims = r2r.TypeLogits, []int{5}
	token := base
	token.typ, token.K, token.norm, token.ownEmb = r2r.TypeToken, 0, true, true
	return map[string]arch{"token+logits": base, "normalized, own embedding": norm, "logits only": logits, "token only": token}
}

func newRouter(t *testing.T, path string, params map[string]string, infos ...engine.Info) (*r2r.Algorithm, error) {
	t.Helper()
	p := map[string]string{"weights": path}
	for k, v := range params {
		p[k] = v
	}
	alg, err := r2r.New(route.Spec{Model: 0, Models: []string{"s", "l"}, Infos: infos, Params: p})
	if err != nil {
		return nil, err
	}
	return alg.(*r2r.Algorithm), nil
}

// TestReadsR2RFiles writes each router as torch.save would (from the
// format's specification), loads it, and checks the batched routing
// probabilities against the plain forward pass; then the same for the
// file converted to safetensors, and the threshold's sources.
func TestReadsR2RFiles(t *testing.T) {
	for name, a := range archs() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			names, ts := a.weights(7)
			pt := filepath.Join(dir, "router.pt")
			if err := torchtest.Write(pt, a.file(names, ts, 0.37)); err != nil {
				t.Fatal(err)
			}
			emb := make(table, a.V)
			for i := range emb {
				emb[i] = make([]float32, a.H)
				for k := range emb[i] {
					emb[i][k] = float32(i%5) - float32(k%3)
				}
			}
			ref := reference{a: a, ts: ts, embed: emb}
			outs := outputs(a, 6, 9)
			outs[5].Hidden = nil // unreadable: NaN, routed
			s := &route.Step{Model: 0, Requests: make([]*route.Request, len(outs)), Outputs: outs, Embed: emb}
			for i := range s.Requests {
				s.Requests[i] = &route.Request{ID: uint64(i)}
			}
			info := engine.Info{HiddenSize: a.H, VocabSize: a.V}
			alg, err := newRouter(t, pt, nil, info, engine.Info{})
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Clone(alg.Probabilities(s))
			for i, o := range outs[:5] {
				if want := ref.prob(o); math.Abs(got[i]-want) > 1e-5 {
					t.Errorf("output %d: probability %v, want %v", i, got[i], want)
				}
			}
			if !math.IsNaN(got[5]) {
				t.Errorf("output without hidden state: %v, want NaN", got[5])
			}
			checkThreshold(t, alg, s, 0.37)

			st := filepath.Join(dir, "router.safetensors")
			if _, err := nn.ConvertTorch(pt, st); err != nil {
				t.Fatal(err)
			}
			conv, err := newRouter(t, st, map[string]string{"threshold": "0.6"}, info)
			if err != nil {
				t.Fatal(err)
			}
			if p := conv.Probabilities(s); !slices.EqualFunc(p, got, func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }) {
				t.Errorf("converted file: %v, torch file %v", p, got)
			}
			checkThreshold(t, conv, s, 0.6)
		})
	}
}

// checkThreshold checks that Route sends exactly the outputs whose
// probability reaches thr (or is NaN) to the large model.
func checkThreshold(t *testing.T, a *r2r.Algorithm, s *route.Step, thr float64) {
	t.Helper()
	if a.Threshold != thr {
		t.Fatalf("threshold %v, want %v", a.Threshold, thr)
	}
	p := slices.Clone(a.Probabilities(s))
	d := make([]route.Decision, len(p))
	for i := range d {
		d[i] = route.Decision{Cut: -1, Token: s.Outputs[i].Token, Commit: true}
	}
	a.Route(s, d)
	for i, x := range p {
		if want := x >= thr || math.IsNaN(x); (d[i].Next == 1) != want || want && d[i].Token != route.NoToken {
			t.Errorf("output %d (p %v, threshold %v): %+v", i, x, thr, d[i])
		}
	}
}

// badCase is a router file that must be refused, the small model's facts,
// and what the error must say.
type badCase struct {
	name, path string
	info       engine.Info
	want       string
}

// TestBadRouterFiles: each bad file is refused with an error that says
// what is wrong, and nothing panics.
func TestBadRouterFiles(t *testing.T) {
	for _, c := range badFiles(t, t.TempDir()) {
		if _, err := newRouter(t, c.path, nil, c.info, engine.Info{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// badFiles writes the bad router files into dir: torch files of
// token+logits with one thing wrong (a tensor, init_args, model_type, a
// global), files for another model, and others.
func badFiles(t *testing.T, dir string) []badCase {
	a := archs()["token+logits"]
	info := engine.Info{HiddenSize: a.H, VocabSize: a.V}
	write := func(name string, edit func(map[string]*torchtest.Tensor, *torchtest.Dict)) string {
		names, ts := a.weights(3)
		f := a.file(names, ts, nil)
		if edit != nil {
			edit(ts, &f)
		}
		path := filepath.Join(dir, name)
		if err := torchtest.Write(path, f); err != nil {
			t.Fatal(err)
		}
		return path
	}
	initArg := func(f *torchtest.Dict, key string, v any) {
		init := (*f)[1].Value.(torchtest.Dict)
		for i := range init {
			if init[i].Key == key {
				init[i].Value = v
			}
		}
	}
	good := write("good.pt", nil)
	cases := append(otherFiles(t, dir, a, good), []badCase{
		{"NaN weight", write("nan.pt", func(ts map[string]*torchtest.Tensor, _ *torchtest.Dict) {
			ts["backbone.blocks.1.mlp.3.weight"].Data[4] = float32(math.NaN())
		}), info, `tensor "backbone.blocks.1.mlp.3.weight" holds NaN at element 4`},
		{"Inf bias", write("inf.pt", func(ts map[string]*torchtest.Tensor, _ *torchtest.Dict) {
			ts["combined_projection.bias"].Data[0] = float32(math.Inf(1))
		}), info, `tensor "combined_projection.bias" holds +Inf`},
		{"shape against init_args", write("dims.pt", func(_ map[string]*torchtest.Tensor, f *torchtest.Dict) {
			initArg(f, "hidden_dims", torchtest.List{6, 12, 6})
		}), info, `tensor "backbone.blocks.0.mlp.3.weight" has shape [10 12], want [12 12] from init_args`},
		{"hidden width of the model", good, engine.Info{HiddenSize: 16, VocabSize: a.V}, `takes hidden states of 8 values, but model "s" has hidden 16`},
		{"unknown model_type", write("type.pt", func(_ map[string]*torchtest.Tensor, f *torchtest.Dict) {
			(*f)[0].Value = "MultiLogitsClassifier"
		}), info, `model_type "MultiLogitsClassifier" is not supported; r2r runs HiddenStatesTokenLMHeadLogitsClassifier, HiddenStatesTokenLMHeadClassifier and HiddenStatesLogitsClassifier`},
		{"position embedding", write("pos.pt", func(_ map[string]*torchtest.Tensor, f *torchtest.Dict) {
			initArg(f, "use_position_embedding", true)
		}), info, "use_position_embedding is true"},
		{"forbidden global", write("global.pt", func(_ map[string]*torchtest.Tensor, f *torchtest.Dict) {
			(*f)[3].Value = torchtest.Call{Func: torchtest.Global{Module: "os", Name: "system"}, Args: torchtest.Tuple{"true"}}
		}), info, "global os.system is not allowed"},
		{"extra tensor", write("extra.pt", func(ts map[string]*torchtest.Tensor, f *torchtest.Dict) {
			sd := (*f)[4].Value.(torchtest.OrderedDict)
			sd.Items = append(sd.Items, torchtest.Pair{Key: "backbone.blocks.3.mlp.0.weight", Value: ts["combined_projection.bias"]})
			(*f)[4].Value = sd
		}), info, `tensors ["backbone.blocks.3.mlp.0.weight"] have no place`},
	}...)
	return cases
}

// otherFiles writes bad files of other kinds, good (a torch file of a)
// aside: missing, truncated, for another vocabulary (by embedding table
// and by metadata), in the layout of old.
func otherFiles(t *testing.T, dir string, a arch, good string) []badCase {
	info := engine.Info{HiddenSize: a.H, VocabSize: a.V}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.pt")
	if err := os.WriteFile(truncated, raw[:len(raw)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	withMeta := filepath.Join(dir, "meta.safetensors")
	w, err := nn.ConvertTorch(good, withMeta)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nn.RouterMeta{Algorithm: "r2r", SLM: "other", VocabSize: a.V, VocabHash: "0123456789abcdef", HiddenSize: a.H}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	w.Meta[nn.MetaKey] = m
	if err := nn.Save(withMeta, w.Tensors, w.Meta); err != nil {
		t.Fatal(err)
	}
	oldLayout := filepath.Join(dir, "old.safetensors")
	if err := nn.Save(oldLayout, map[string]nn.Tensor{"out.weight": {Shape: []int{1, 2}, Data: []float32{1, 2}}}, map[string]string{"hidden_size": "2"}); err != nil {
		t.Fatal(err)
	}
	own := a
	own.ownEmb = true
	names, ts := own.weights(3)
	ownEmb := filepath.Join(dir, "own.pt")
	if err := torchtest.Write(ownEmb, own.file(names, ts, nil)); err != nil {
		t.Fatal(err)
	}
	return []badCase{
		{"missing file", filepath.Join(dir, "none.pt"), info, "no such file"},
		{"truncated", truncated, info, "zip"},
		{"vocabulary of the embedding table", ownEmb, engine.Info{HiddenSize: a.H, VocabSize: 32}, `embeds a vocabulary of 20 tokens (token_embeddings.weight), but model "s" has 32`},
		{"vocabulary of the metadata", withMeta, engine.Info{HiddenSize: a.H, VocabSize: a.V, VocabHash: "fedcba9876543210"}, `was trained for vocabulary 0123456789abcdef (20 tokens, hidden 8) of "other"`},
		{"old layout", oldLayout, info, "no model_type metadata"},
	}
}
