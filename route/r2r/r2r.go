// Package r2r is R2R, Roads to Rome (Fu et al., "R2R: Efficiently
// Navigating Divergent Reasoning Paths with Small-Large Model Token
// Routing", 2025, arXiv:2505.21600): a neural router on the small model's
// step decides which tokens the large model must regenerate. The router
// is R2R's own network, read from the files R2R's save_model writes.
//
// Per-token rule, for R2R's HiddenStatesTokenLMHeadLogitsClassifier: the
// features are h, the small model's last hidden state (width H); e(t), the
// input embedding of the token t it sampled (the file's
// token_embeddings.weight when it has one, else the small model's own,
// Step.Embed; zeros when the engine has none); and z, its K largest
// logits in descending order (tokens a structured-output mask rules out
// are left out; zeros pad). With normalize_input, h and e(t) each go
// through a LayerNorm and z through a softmax. Then
//
//	x = combined_projection([h ‖ e(t) ‖ logits_projection(z)])
//	x = backbone.input_projection(x)
//	x = dim_change_i(x) + mlp_i(layer_norm_i(x))   for each block i
//	p = sigmoid(output_layer(x))                    (a LayerNorm, then one logit)
//
// where block i maps hidden_dims[i] to hidden_dims[i+1] (the last block
// keeps the last width), mlp_i is Linear, exact GELU, Linear through
// hidden_dims[i]×expansion_factor values, and dim_change_i is a Linear
// where the width changes and the identity elsewhere. p ≥ threshold drops
// t: the large model (model 1) generates that position, and control
// returns after one token. HiddenStatesTokenLMHeadClassifier (no logits)
// and HiddenStatesLogitsClassifier (no token) are the same network with
// one feature fewer. The step is evaluated as one batch, without
// allocating once its buffers have grown. A position whose features
// cannot be read (no hidden state of width H, no logits, a token outside
// the file's embedding table) routes to the large model.
//
// Weights (parameter weights): a torch.save file as R2R's save_model
// writes it, or the same converted to safetensors (tokenrouter
// convert-router), told apart by content. Its metadata model_type names
// the classifier, init_args (JSON) its shapes — hidden_states_size,
// logits_size, hidden_dims, expansion_factor, normalize_input (R2R's
// defaults where absent; use_position_embedding must be false) — and
// common_args its threshold. The tensors carry R2R's state-dict names and
// PyTorch layouts (nn.Linear weight [out, in], bias [out]; LayerNorm
// weight and bias, eps 1e-5), each checked against init_args:
// logits_projection [H, K], combined_projection [D0, H+E+H],
// backbone.input_projection [D0, D0], backbone.blocks.i.{layer_norm,
// mlp.0, mlp.3, dim_change}, backbone.output_layer.0 (LayerNorm) and .1
// [1, D_last], with normalize_input layer_norm_hidden_states and
// layer_norm_token [H], and optionally token_embeddings.weight [V, E]; no
// other tensor, and none holding NaN or ±Inf. A file that also carries
// tokenrouter.router metadata (nn.RouterMeta) must have been trained for
// the small model it serves (vocabulary and hidden width); the small
// model's hidden width must be H in any case.
//
// Parameter threshold: the routing threshold (default: the file's
// common_args threshold, else 0.5).
package r2r

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// Name is the registry name.
const Name = "r2r"

// The classifiers (R2R's model_type) this package runs.
const (
	// TypeTokenLogits takes the hidden state, the token and the top logits.
	TypeTokenLogits = "HiddenStatesTokenLMHeadLogitsClassifier"
	// TypeToken takes the hidden state and the token.
	TypeToken = "HiddenStatesTokenLMHeadClassifier"
	// TypeLogits takes the hidden state and the top logits.
	TypeLogits = "HiddenStatesLogitsClassifier"
)

// Bounds on init_args.
const (
	maxWidth  = 1 << 16 // H, K, every hidden dim
	maxBlocks = 64
	maxExpand = 64
)

// Block is one of the backbone's residual blocks:
// Change(x) + Down(GELU(Up(Norm(x)))).
type Block struct {
	// Norm is layer_norm; Up and Down are mlp.0 and mlp.3.
	Norm     nn.LayerNorm
	Up, Down nn.Linear
	// Change is dim_change; nil is the identity (equal widths).
	Change *nn.Linear
}

// Algorithm is the neural router.
type Algorithm struct {
	// Type is the classifier (R2R's model_type).
	Type string
	// H, E and K are the widths of the hidden state, the token embedding
	// (0 without the token) and the top logits (0 without logits).
	H, E, K int
	// Normalize is init_args normalize_input: NormH and NormTok normalise
	// the hidden state and the embedding, a softmax the top logits.
	Normalize      bool
	NormH, NormTok nn.LayerNorm
	// Embedding is token_embeddings.weight, V rows of E values; nil: the
	// small model's own input embedding.
	Embedding []float32
	V         int
	// LogitsProj is logits_projection, Combined combined_projection, In
	// the backbone's input_projection, Blocks its blocks, OutNorm and Out
	// its output_layer.
	LogitsProj, Combined, In nn.Linear
	Blocks                   []Block
	OutNorm                  nn.LayerNorm
	Out                      nn.Linear
	// Threshold is the routing probability threshold.
	Threshold float64

	x, z, p, a, b, t, u, r, o []float32
	prob                      []float64
	bad                       []bool
}

// New builds an instance: parameters weights (path) and threshold.
func New(s route.Spec) (route.Algorithm, error) {
	if len(s.Models) != 2 {
		return nil, fmt.Errorf("%w: needs exactly 2 models (small, large), got %d", route.ErrModels, len(s.Models))
	}
	a := &Algorithm{}
	_, hasThr := s.Params["threshold"]
	var err error
	if a.Threshold, err = s.Float("threshold", 0.5); err != nil || s.Model != 0 {
		return a, err // only the small model evaluates the router
	}
	path := s.Params["weights"]
	w, err := nn.LoadRouter(path)
	if err != nil {
		return nil, fmt.Errorf("r2r: %w", err)
	}
	if err := a.load(w); err != nil {
		return nil, fmt.Errorf("r2r: router %s: %w", path, err)
	}
	if err := nn.CheckRouter(w, path, Name, a.H, s.Infos, s.Models); err != nil {
		return nil, fmt.Errorf("r2r: %w", err)
	}
	if err := a.checkModel(w, path, s); err != nil {
		return nil, fmt.Errorf("r2r: %w", err)
	}
	if !hasThr {
		t, ok, err := w.CommonThreshold()
		if err != nil {
			return nil, fmt.Errorf("r2r: router %s: %w", path, err)
		}
		if ok {
			a.Threshold = t
		}
	}
	return a, nil
}

// checkModel checks the router's embedding against the small model:
// without its own table the model's embedding (of the hidden width) is
// used, so E must be H; with one, its rows must be the model's
// vocabulary. Metadata embed_size and topk, when given, must match.
func (a *Algorithm) checkModel(w *nn.Weights, path string, s route.Spec) error {
	if m, ok, err := nn.ReadMeta(w); err == nil && ok {
		if m.EmbedSize != 0 && a.E != 0 && m.EmbedSize != a.E || m.TopK != 0 && a.K != 0 && m.TopK != a.K {
			return fmt.Errorf("router %s: its metadata says embedding %d and top-k %d but its weights take %d and %d", path, m.EmbedSize, m.TopK, a.E, a.K)
		}
	}
	if len(s.Infos) == 0 || a.Embedding == nil {
		return nil
	}
	if v := s.Infos[0].VocabSize; v != 0 && v != a.V {
		return fmt.Errorf("router %s embeds a vocabulary of %d tokens (token_embeddings.weight), but model %q has %d", path, a.V, s.Models[0], v)
	}
	return nil
}

// initArgs are the init_args r2r reads, with R2R's defaults.
type initArgs struct {
	HiddenStatesSize     int   `json:"hidden_states_size"`
	LogitsSize           int   `json:"logits_size"`
	HiddenDims           []int `json:"hidden_dims"`
	ExpansionFactor      int   `json:"expansion_factor"`
	NormalizeInput       bool  `json:"normalize_input"`
	UsePositionEmbedding bool  `json:"use_position_embedding"`
}

// parseConfig reads model_type and init_args.
func parseConfig(meta map[string]string) (string, initArgs, error) {
	c := initArgs{HiddenStatesSize: 1536, LogitsSize: 100, HiddenDims: []int{256, 512, 256}, ExpansionFactor: 4}
	mt, ok := meta["model_type"]
	if !ok {
		return "", c, fmt.Errorf("no model_type metadata: r2r reads the router files R2R's save_model writes (%s, %s or %s)", TypeTokenLogits, TypeToken, TypeLogits)
	}
	typ := ""
	for _, t := range []string{TypeTokenLogits, TypeToken, TypeLogits} {
		if strings.EqualFold(mt, t) {
			typ = t
		}
	}
	if typ == "" {
		return "", c, fmt.Errorf("model_type %q is not supported; r2r runs %s, %s and %s", mt, TypeTokenLogits, TypeToken, TypeLogits)
	}
	js, ok := meta["init_args"]
	if !ok {
		return "", c, fmt.Errorf("no init_args metadata")
	}
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		return "", c, fmt.Errorf("init_args: %w", err)
	}
	switch {
	case c.UsePositionEmbedding:
		return "", c, fmt.Errorf("init_args use_position_embedding is true: position embeddings are not supported (the router sees one position at a time)")
	case c.HiddenStatesSize < 1 || c.HiddenStatesSize > maxWidth:
		return "", c, fmt.Errorf("init_args hidden_states_size %d out of range [1, %d]", c.HiddenStatesSize, maxWidth)
	case typ != TypeToken && (c.LogitsSize < 1 || c.LogitsSize > maxWidth):
		return "", c, fmt.Errorf("init_args logits_size %d out of range [1, %d]", c.LogitsSize, maxWidth)
	case len(c.HiddenDims) < 1 || len(c.HiddenDims) > maxBlocks:
		return "", c, fmt.Errorf("init_args hidden_dims %v: want 1 to %d widths", c.HiddenDims, maxBlocks)
	case c.ExpansionFactor < 1 || c.ExpansionFactor > maxExpand:
		return "", c, fmt.Errorf("init_args expansion_factor %d out of range [1, %d]", c.ExpansionFactor, maxExpand)
	}
	for _, d := range c.HiddenDims {
		if d < 1 || d > maxWidth {
			return "", c, fmt.Errorf("init_args hidden_dims %v: widths must lie in [1, %d]", c.HiddenDims, maxWidth)
		}
	}
	return typ, c, nil
}

// load builds the network from w, every tensor's shape checked against
// init_args.
func (a *Algorithm) load(w *nn.Weights) error {
	typ, c, err := parseConfig(w.Meta)
	if err != nil {
		return err
	}
	a.Type, a.H, a.Normalize = typ, c.HiddenStatesSize, c.NormalizeInput
	l := &loader{w: w, used: map[string]bool{}}
	if err := a.loadInputs(l, c); err != nil {
		return err
	}
	D := c.HiddenDims
	if a.In, err = l.linear("backbone.input_projection", D[0], D[0]); err != nil {
		return err
	}
	dims := append(slices.Clone(D), D[len(D)-1])
	for i := range D {
		b, err := l.block(fmt.Sprintf("backbone.blocks.%d.", i), dims[i], dims[i+1], c.ExpansionFactor)
		if err != nil {
			return err
		}
		a.Blocks = append(a.Blocks, b)
	}
	last := D[len(D)-1]
	if a.OutNorm, err = l.norm("backbone.output_layer.0", last); err != nil {
		return err
	}
	if a.Out, err = l.linear("backbone.output_layer.1", 1, last); err != nil {
		return err
	}
	return l.unused(typ)
}

// loadInputs loads what precedes the backbone: the normalisations, the
// embedding table, logits_projection and combined_projection.
func (a *Algorithm) loadInputs(l *loader, c initArgs) error {
	token, logits := a.Type != TypeLogits, a.Type != TypeToken
	var err error
	if token {
		a.E = a.H // the small model's input embedding is as wide as its hidden state
		if t, ok := l.w.Tensors["token_embeddings.weight"]; ok {
			if len(t.Shape) != 2 || t.Shape[0] < 1 || t.Shape[1] < 1 || t.Shape[1] > maxWidth {
				return fmt.Errorf("tensor %q has shape %v, want [vocabulary, width]", "token_embeddings.weight", t.Shape)
			}
			a.V, a.E = t.Shape[0], t.Shape[1]
			if a.Embedding, err = l.tensor("token_embeddings.weight", a.V, a.E); err != nil {
				return err
			}
		}
	}
	if a.Normalize {
		if a.NormH, err = l.norm("layer_norm_hidden_states", a.H); err != nil {
			return err
		}
		if token && a.E != a.H {
			return fmt.Errorf("normalize_input needs the token embedding as wide as the hidden state (%d), token_embeddings.weight has %d", a.H, a.E)
		}
		if token {
			if a.NormTok, err = l.norm("layer_norm_token", a.H); err != nil {
				return err
			}
		}
	}
	width := a.H + a.E
	if logits {
		a.K = c.LogitsSize
		if a.LogitsProj, err = l.linear("logits_projection", a.H, a.K); err != nil {
			return err
		}
		width += a.H
	}
	a.Combined, err = l.linear("combined_projection", c.HiddenDims[0], width)
	return err
}

// loader reads tensors of exact shapes, each once, and refuses NaN and
// ±Inf.
type loader struct {
	w    *nn.Weights
	used map[string]bool
}

// tensor returns name's data, which must have shape.
func (l *loader) tensor(name string, shape ...int) ([]float32, error) {
	t, ok := l.w.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("tensor %q missing (want shape %v from init_args)", name, shape)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("tensor %q has shape %v, want %v from init_args", name, t.Shape, shape)
	}
	for i, v := range t.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("tensor %q holds %v at element %d", name, v, i)
		}
	}
	l.used[name] = true
	return t.Data, nil
}

// linear loads prefix.weight [out, in] and prefix.bias [out].
func (l *loader) linear(prefix string, out, in int) (nn.Linear, error) {
	w, err := l.tensor(prefix+".weight", out, in)
	if err != nil {
		return nn.Linear{}, err
	}
	b, err := l.tensor(prefix+".bias", out)
	if err != nil {
		return nn.Linear{}, err
	}
	return nn.Linear{In: in, Out: out, W: w, B: b}, nil
}

// norm loads the LayerNorm prefix.weight and prefix.bias, both [d].
func (l *loader) norm(prefix string, d int) (nn.LayerNorm, error) {
	g, err := l.tensor(prefix+".weight", d)
	if err != nil {
		return nn.LayerNorm{}, err
	}
	b, err := l.tensor(prefix+".bias", d)
	if err != nil {
		return nn.LayerNorm{}, err
	}
	return nn.LayerNorm{W: g, B: b, Eps: 1e-5}, nil
}

// block loads one residual block from din to dout values.
func (l *loader) block(prefix string, din, dout, expand int) (Block, error) {
	var b Block
	var err error
	if b.Norm, err = l.norm(prefix+"layer_norm", din); err != nil {
		return b, err
	}
	if b.Up, err = l.linear(prefix+"mlp.0", din*expand, din); err != nil {
		return b, err
	}
	if b.Down, err = l.linear(prefix+"mlp.3", dout, din*expand); err != nil {
		return b, err
	}
	if din != dout {
		c, err := l.linear(prefix+"dim_change", dout, din)
		if err != nil {
			return b, err
		}
		b.Change = &c
	}
	return b, nil
}

// unused refuses tensors the classifier has no place for.
func (l *loader) unused(typ string) error {
	var extra []string
	for n := range l.w.Tensors {
		if !l.used[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return fmt.Errorf("tensors %q have no place in %s with these init_args", extra[:min(len(extra), 5)], typ)
}

// Want asks the small model for its hidden state and, when the router
// reads them, its logits.
func (a *Algorithm) Want(model int, _ *route.Request) engine.Want {
	switch {
	case model != 0:
		return 0
	case a.Type == TypeToken:
		return engine.WantHidden
	}
	return engine.WantHidden | engine.WantLogits
}

// Speculable opts into speculative continuation: a routed position's
// token is the large model's one token, handed back at once.
func (a *Algorithm) Speculable(from, to int) bool { return from == 0 && to == 1 }

// Route evaluates the router over the step and routes tokens whose
// probability reaches Threshold (and those it cannot read); the large
// model's token returns.
func (a *Algorithm) Route(s *route.Step, d []route.Decision) {
	if s.Model == 1 {
		for i := range d {
			d[i].Next = 0
		}
		return
	}
	for i, p := range a.Probabilities(s) {
		if !(p < a.Threshold) { // NaN: unreadable features
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}

// Probabilities evaluates the router on the small model's step, all
// outputs as one batch, and returns each output's routing probability
// (NaN where its features cannot be read). The slice is reused by the
// next call.
func (a *Algorithm) Probabilities(s *route.Step) []float64 {
	n := len(s.Outputs)
	a.features(s, n)
	a.a = a.Combined.Forward(a.x, n, a.a)
	x, y := a.In.Forward(a.a, n, a.b), a.a
	for i := range a.Blocks {
		x, y = a.block(&a.Blocks[i], x, y, n), x
	}
	a.b, a.a = x, y
	a.t = a.OutNorm.Forward(x, n, a.t)
	a.o = a.Out.Forward(a.t, n, a.o)
	a.prob = slices.Grow(a.prob[:0], n)[:n]
	for i := range a.prob {
		a.prob[i] = nn.Sigmoid(a.o[i])
		if a.bad[i] {
			a.prob[i] = math.NaN()
		}
	}
	return a.prob
}

// block computes one residual block of x into y (returned).
func (a *Algorithm) block(b *Block, x, y []float32, n int) []float32 {
	a.t = b.Norm.Forward(x, n, a.t)
	a.u = b.Up.Forward(a.t, n, a.u)
	nn.GELU(a.u)
	y = b.Down.Forward(a.u, n, y)
	res := x
	if b.Change != nil {
		a.r = b.Change.Forward(x, n, a.r)
		res = a.r
	}
	for k := range y {
		y[k] += res[k]
	}
	return y
}

// features writes the combined features of n outputs into a.x and marks
// the outputs that cannot be read in a.bad.
func (a *Algorithm) features(s *route.Step, n int) {
	W := a.Combined.In
	a.x = nn.Grow(a.x, n*W)
	clear(a.x)
	a.bad = slices.Grow(a.bad[:0], n)[:n]
	a.z = nn.Grow(a.z, n*a.K)
	for i, o := range s.Outputs {
		row := a.x[i*W : (i+1)*W]
		h := row[:a.H]
		a.bad[i] = len(o.Hidden) != a.H || a.K > 0 && len(o.Logits) == 0
		if len(o.Hidden) == a.H {
			copy(h, o.Hidden)
		}
		if a.Normalize {
			a.NormH.Forward(h, 1, h) // in place: each value is read before it is written
		}
		if a.E > 0 {
			e := row[a.H : a.H+a.E]
			if !a.embed(s, o.Token, e) {
				a.bad[i] = true
			}
			if a.Normalize {
				a.NormTok.Forward(e, 1, e)
			}
		}
		if a.K > 0 {
			z := a.z[i*a.K : (i+1)*a.K]
			m := TopK(o.Logits, z)
			if a.Normalize {
				softmax(z[:m])
			}
		}
	}
	if a.K == 0 {
		return
	}
	a.p = a.LogitsProj.Forward(a.z, n, a.p)
	for i := range n {
		copy(a.x[(i+1)*W-a.H:(i+1)*W], a.p[i*a.H:(i+1)*a.H])
	}
}

// embed writes token tok's embedding to dst: the file's table, else the
// small model's (zeros without either). It reports false for a token
// outside the file's table.
func (a *Algorithm) embed(s *route.Step, tok int32, dst []float32) bool {
	switch {
	case a.Embedding != nil:
		if tok < 0 || int(tok) >= a.V {
			return false
		}
		copy(dst, a.Embedding[int(tok)*a.E:(int(tok)+1)*a.E])
	case s.Embed != nil:
		s.Embed.Embed(tok, dst)
	}
	return true
}

// softmax normalises z in place into probabilities.
func softmax(z []float32) {
	if len(z) == 0 {
		return
	}
	m := slices.Max(z)
	var sum float64
	for i, v := range z {
		e := math.Exp(float64(v - m))
		z[i] = float32(e)
		sum += e
	}
	for i := range z {
		z[i] = float32(float64(z[i]) / sum)
	}
}

// TopK writes the len(dst) largest logits in descending order and
// returns how many there were (zeros pad a vocabulary smaller than
// len(dst)). Tokens ruled out by a structured-output mask (−∞) are left
// out, as if the vocabulary lacked them.
func TopK(logits, dst []float32) int {
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
	return n
}
