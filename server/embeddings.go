package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// POST /v1/embeddings: one vector per input from a preset of one model,
// the model's final hidden states pooled as its file says (engine.Pooler:
// mean unless the GGUF's pooling_type says cls or last) and scaled to unit
// length (L2), as llama.cpp's server answers /v1/embeddings. The engine
// computes them beside the sub-server's steps (DESIGN §5); a routed preset
// has no one model to ask and is refused.

// Bounds of one embeddings request: OpenAI's input count and token total,
// and the floats of the response (inputs × the model's width).
const (
	maxEmbeddingInputs = 2048
	maxEmbeddingTokens = 300_000
	maxEmbeddingValues = 2048 * 4096
)

// EmbeddingRequest is the body of POST /v1/embeddings.
type EmbeddingRequest struct {
	// Model names a preset of one model ("" is the first preset).
	Model string `json:"model"`
	// Input is a string, a list of strings, a list of token ids, or a list
	// of lists of token ids.
	Input json.RawMessage `json:"input"`
	// EncodingFormat is "float" (the default) or "base64" (little-endian
	// float32 values).
	EncodingFormat *string `json:"encoding_format"`
	// Dimensions, when given, must be the model's width.
	Dimensions *int `json:"dimensions"`
	// User is accepted and not recorded.
	User *string `json:"user"`
}

// embeddingFields is the body of /v1/embeddings.
var embeddingFields = fieldTable{what: "POST /v1/embeddings", fields: []field{
	{name: "model", use: honoured, note: "a preset of one model; a routed preset (several models) is refused"},
	{name: "input", use: honoured, note: "a string, a list of strings, token ids, or a list of lists of token ids: " +
		"at most 2048 inputs and 300,000 tokens in all, each within the context length; strings get BOS when the model asks"},
	{name: "encoding_format", use: honoured, note: "float (default) or base64 (little-endian float32)"},
	{name: "dimensions", use: honoured, note: "only the model's width (hidden size): vectors are never shortened"},
	{name: "user", use: noOp, note: "not recorded"},
}}

// embeddingItem is one vector of the answer.
type embeddingItem struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

// embeddingUsage counts the inputs' tokens.
type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// embedJob is a validated embeddings request.
type embedJob struct {
	dep    *deployment
	pooler engine.Pooler
	inputs [][]int32
	names  []string // each input's parameter name: input, or input[i]
	tokens int
	width  int
	base64 bool
}

// readEmbeddings decodes and validates a /v1/embeddings body.
func (s *Server) readEmbeddings(w http.ResponseWriter, r *http.Request) (*embedJob, *apiError) {
	var req EmbeddingRequest
	d, aerr := s.decodeFor(w, r, embeddingFields, &req, &req.Model)
	if aerr != nil {
		return nil, aerr
	}
	return d.embedJob(&req)
}

// handleEmbeddings answers POST /v1/embeddings.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	job, aerr := s.readEmbeddings(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	release, aerr := s.admit()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	defer release()
	vecs, err := job.run(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_ = job.write(w, vecs) // a failed write is a client gone
}

// embedJob validates req for d.
func (d *deployment) embedJob(req *EmbeddingRequest) (*embedJob, *apiError) {
	p, aerr := d.pooler()
	if aerr != nil {
		return nil, aerr
	}
	j := &embedJob{dep: d, pooler: p, width: d.models[0].info.HiddenSize}
	if req.EncodingFormat != nil {
		switch *req.EncodingFormat {
		case "float":
		case "base64":
			j.base64 = true
		default:
			return nil, badRequest("encoding_format", "invalid_value", "encoding_format %s: want float or base64", clip(*req.EncodingFormat))
		}
	}
	if req.Dimensions != nil && *req.Dimensions != j.width {
		return nil, badRequest("dimensions", "invalid_value",
			"dimensions %d: this model's embeddings have %d (its hidden size) and are not shortened", *req.Dimensions, j.width)
	}
	if aerr := j.setInputs(req.Input); aerr != nil {
		return nil, aerr
	}
	return j, nil
}

// pooler returns the engine of d's one model, which must compute
// embeddings.
func (d *deployment) pooler() (engine.Pooler, *apiError) {
	if len(d.models) != 1 {
		return nil, badRequest("model", "unsupported_value",
			"The preset %s routes between %d models (%v): embeddings come from one model's hidden states, so only a preset of one model serves them",
			d.name, len(d.models), d.names())
	}
	m := d.models[0]
	subs := slices.DeleteFunc(d.r.Replicas(0), func(s *subserver.Server) bool { return s == nil }) // any replica's engine computes them
	if len(subs) == 0 {
		return nil, badRequest("model", "unsupported_value",
			"The model %s of preset %s runs in another process; embeddings are computed only by models this process runs", m.name, d.name)
	}
	p, ok := engine.Capability[engine.Pooler](subs[0].Engine())
	if !ok {
		return nil, badRequest("model", "unsupported_value", "The %s engine of model %s has no embeddings", m.engine, m.name)
	}
	if how := p.Pooling(); !how.Embeds() {
		return nil, badRequest("model", "unsupported_value",
			"The model %s declares pooling_type %s, which gives no embedding (a reranker's score)", m.name, how)
	}
	return p, nil
}

// setInputs reads the input field into token sequences and checks them
// against the bounds and the model's vocabulary and context.
func (j *embedJob) setInputs(raw json.RawMessage) *apiError {
	texts, ids, single, aerr := parseEmbeddingInput(raw)
	if aerr != nil {
		return aerr
	}
	d := j.dep
	for i, t := range texts {
		if t == "" {
			return badRequest(inputName(i, single), "invalid_value", "%s is an empty string", inputName(i, single))
		}
		ids = append(ids, d.text.encodeText(t))
	}
	if len(ids)*j.width > maxEmbeddingValues {
		return badRequest("input", "invalid_value", "%d inputs of %d values each exceed this server's %d values per answer: send fewer inputs per request",
			len(ids), j.width, maxEmbeddingValues)
	}
	for i, seq := range ids {
		name := inputName(i, single)
		switch {
		case len(seq) == 0:
			return badRequest(name, "invalid_value", "%s has no tokens", name)
		case len(seq) > d.ctxLen:
			return badRequest(name, "context_length_exceeded", "%s has %d tokens; the model's context length is %d", name, len(seq), d.ctxLen)
		}
		if aerr := d.checkIDs(seq, name); aerr != nil {
			return aerr
		}
		j.tokens += len(seq)
		j.names = append(j.names, name)
	}
	if j.tokens > maxEmbeddingTokens {
		return badRequest("input", "invalid_value", "The inputs have %d tokens in all; at most %d per request", j.tokens, maxEmbeddingTokens)
	}
	j.inputs = ids
	return nil
}

// inputName is the parameter name of input i: input[i], or input when the
// request gave one input alone.
func inputName(i int, single bool) string {
	if single {
		return "input"
	}
	return "input[" + strconv.Itoa(i) + "]"
}

// parseEmbeddingInput reads input: texts, or token sequences, and whether
// it was one input alone (a string or one list of ids).
func parseEmbeddingInput(raw json.RawMessage) (texts []string, ids [][]int32, single bool, _ *apiError) {
	raw = bytes.TrimSpace(raw)
	const want = "input must be a string, a list of strings, a list of token ids or a list of lists of token ids"
	switch {
	case isNull(raw):
		return nil, nil, false, badRequest("input", "missing_required_parameter", "Missing required parameter: input")
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, nil, false, badRequest("input", "invalid_type", want)
		}
		return []string{s}, nil, true, nil
	case raw[0] != '[':
		return nil, nil, false, badRequest("input", "invalid_type", want)
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, nil, false, badRequest("input", "invalid_type", want)
	}
	if len(elems) == 0 {
		return nil, nil, false, badRequest("input", "invalid_value", "input is an empty list")
	}
	if first := bytes.TrimSpace(elems[0]); len(first) > 0 && (first[0] == '-' || first[0] >= '0' && first[0] <= '9') {
		var one []int32
		if json.Unmarshal(raw, &one) != nil {
			return nil, nil, false, badRequest("input", "invalid_type", "input is a list of token ids, each an integer id")
		}
		return nil, [][]int32{one}, true, nil
	}
	if len(elems) > maxEmbeddingInputs {
		return nil, nil, false, badRequest("input", "invalid_value", "input has %d inputs; at most %d per request", len(elems), maxEmbeddingInputs)
	}
	return parseEmbeddingList(elems)
}

// parseEmbeddingList reads a list of inputs, all strings or all lists of
// token ids.
func parseEmbeddingList(elems []json.RawMessage) (texts []string, ids [][]int32, single bool, _ *apiError) {
	strs := bytes.HasPrefix(bytes.TrimSpace(elems[0]), []byte(`"`))
	for i, e := range elems {
		name := inputName(i, false)
		if strs {
			var s string
			if json.Unmarshal(e, &s) != nil {
				return nil, nil, false, badRequest(name, "invalid_type", "%s is not a string like input[0]: give a list of strings or a list of lists of token ids", name)
			}
			texts = append(texts, s)
			continue
		}
		var seq []int32
		if json.Unmarshal(e, &seq) != nil || seq == nil {
			return nil, nil, false, badRequest(name, "invalid_type", "%s is not a list of token ids: give a list of strings or a list of lists of token ids", name)
		}
		ids = append(ids, seq)
	}
	return texts, ids, false, nil
}

// run computes the inputs' vectors, one after another, each scaled to
// unit length.
func (j *embedJob) run(ctx context.Context) ([][]float32, error) {
	out := make([][]float32, len(j.inputs))
	for i, seq := range j.inputs {
		v := make([]float32, j.width)
		if err := j.pooler.Pool(ctx, seq, v); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("embeddings: model %s, %s: %w", j.dep.models[0].name, j.names[i], err)
		}
		normalize(v)
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("embeddings: model %s, %s: the hidden state holds %v", j.dep.models[0].name, j.names[i], x)
			}
		}
		out[i] = v
	}
	return out, nil
}

// normalize scales v to unit Euclidean length (a zero vector stays zero),
// as llama.cpp's common_embd_normalize does with its default norm (2).
func normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}

// write answers the vectors as OpenAI's list, one item at a time (an
// answer may hold tens of megabytes).
func (j *embedJob) write(w http.ResponseWriter, vecs [][]float32) error {
	head, err := json.Marshal(map[string]any{"object": "list", "model": j.dep.name,
		"usage": embeddingUsage{PromptTokens: j.tokens, TotalTokens: j.tokens}})
	if err != nil {
		return fmt.Errorf("embeddings: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	buf := append(head[:len(head)-1], `,"data":[`...)
	for i, v := range vecs {
		it := embeddingItem{Object: "embedding", Index: i, Embedding: v}
		if j.base64 {
			it.Embedding = float32Base64(v)
		}
		b, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("embeddings: %w", err)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		if _, err := w.Write(append(buf, b...)); err != nil {
			return fmt.Errorf("embeddings: %w", err)
		}
		buf = buf[:0]
	}
	_, err = w.Write(append(buf, "]}\n"...))
	return err
}

// float32Base64 is v as little-endian float32 values in base64, the
// encoding OpenAI's base64 format and its SDKs use.
func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
