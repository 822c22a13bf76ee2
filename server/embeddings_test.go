package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
)

// embedPresets adds to the default configuration (the routed preset
// r2r-random over two simulated models) a preset "embed" of one real
// model (stories260K, 64 wide, context 2048) and a preset "sim-one" of one
// simulated model.
func embedPresets(t *testing.T) (config.Model, func(*config.Config)) {
	m := config.Model{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(testmodels.Dir(t), "stories260K.gguf"), Threads: 1}
	return m, func(c *config.Config) {
		fastSim(c)
		one := c.Models[0]
		one.Name = "sim"
		c.Models = append(c.Models, m, one)
		c.Presets = append(c.Presets,
			config.Preset{Name: "embed", Algorithm: "single", Models: []string{"stories"}, Thresholds: "1"},
			config.Preset{Name: "sim-one", Algorithm: "single", Models: []string{"sim"}, Thresholds: "1"})
	}
}

// embeddingAnswer is the JSON of an embeddings answer, as a client reads
// it.
type embeddingAnswer struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage embeddingUsage `json:"usage"`
}

// norm is v's Euclidean length.
func norm[T float32 | float64](v []T) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// TestEmbeddingsGoSDK drives /v1/embeddings with the openai-go SDK:
// several strings as floats and as base64 (the same vectors, each of unit
// length, in input order, one per input), token ids and lists of them
// (the same vectors as the strings they encode), and usage counting the
// tokens /tokenize gives.
func TestEmbeddingsGoSDK(t *testing.T) {
	_, edit := embedPresets(t)
	e := start(t, edit)
	client := goSDK(e, "any")
	ctx := context.Background()
	texts := []string{"Once upon a time", "there was a little dog", "The sun"}
	var ids [][]int64
	want := 0
	for _, s := range texts {
		var tok TokenizeResponse
		e.post("/tokenize", map[string]any{"model": "embed", "prompt": s}, &tok)
		seq := make([]int64, len(tok.Tokens))
		for i, id := range tok.Tokens {
			seq[i] = int64(id)
		}
		ids, want = append(ids, seq), want+tok.Count
	}
	params := openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}}
	floats, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if floats.Object != "list" || floats.Model != "embed" || len(floats.Data) != 3 || floats.Usage.PromptTokens != int64(want) || floats.Usage.TotalTokens != int64(want) {
		t.Fatalf("answer %s (want %d tokens)", floats.RawJSON(), want)
	}
	for i, d := range floats.Data {
		if d.Index != int64(i) || d.Object != "embedding" || len(d.Embedding) != 64 || math.Abs(norm(d.Embedding)-1) > 1e-6 {
			t.Fatalf("item %d: index %d, %d values, length %v", i, d.Index, len(d.Embedding), norm(d.Embedding))
		}
		if i > 0 && slices.Equal(d.Embedding, floats.Data[0].Embedding) {
			t.Fatalf("inputs 0 and %d have the same vector", i)
		}
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b64.Data[0].JSON.Embedding.Raw(), `"`) {
		t.Fatalf("base64 answer holds %.40s", b64.Data[0].JSON.Embedding.Raw())
	}
	for i := range texts {
		// The SDK reads both as float64: the float32 values of base64
		// exactly, the shortest decimal of each float32 of JSON not.
		for k, v := range b64.Data[i].Embedding {
			if float32(v) != float32(floats.Data[i].Embedding[k]) {
				t.Fatalf("item %d, value %d: base64 %v, float %v", i, k, v, floats.Data[i].Embedding[k])
			}
		}
	}
	arrays, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: ids}})
	if err != nil {
		t.Fatal(err)
	}
	one, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: ids[1]},
		User: openai.String("u-1"), Dimensions: openai.Int(64)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if !slices.Equal(arrays.Data[i].Embedding, floats.Data[i].Embedding) {
			t.Fatalf("token ids of input %d embed differently from its text", i)
		}
	}
	if len(one.Data) != 1 || !slices.Equal(one.Data[0].Embedding, floats.Data[1].Embedding) || one.Usage.PromptTokens != int64(len(ids[1])) {
		t.Fatalf("one list of token ids: %s", one.RawJSON())
	}
	waitIdle(t, e.s)
}

// TestEmbeddingsArePooledHiddenStates: an answer equals, bit for bit, the
// mean of the model's final hidden states over the input's tokens,
// computed here from an engine of the same model stepped one token at a
// time (WantHidden), then scaled to unit length.
func TestEmbeddingsArePooledHiddenStates(t *testing.T) {
	m, edit := embedPresets(t)
	e := start(t, edit)
	text := "Once upon a time there was a little girl named Lily. She loved to play outside."
	var a embeddingAnswer
	e.post("/v1/embeddings", map[string]any{"model": "embed", "input": text}, &a)
	var got []float32
	if len(a.Data) != 1 || json.Unmarshal(a.Data[0].Embedding, &got) != nil {
		t.Fatalf("answer %+v", a)
	}
	var tok TokenizeResponse
	e.post("/tokenize", map[string]any{"model": "embed", "prompt": text}, &tok)
	eng, err := loader.Builtin().OpenEngine(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sum := make([]float64, 64)
	out := make([]engine.Output, 1)
	for _, id := range tok.Tokens {
		if err := eng.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{id}, Want: engine.WantHidden}}, out); err != nil {
			t.Fatal(err)
		}
		for k, v := range out[0].Hidden {
			sum[k] += float64(v)
		}
	}
	mean := make([]float32, 64)
	for k := range sum {
		mean[k] = float32(sum[k] / float64(len(tok.Tokens)))
	}
	inv := 1 / norm(mean)
	want := make([]float32, 64)
	for k, v := range mean {
		want[k] = float32(float64(v) * inv)
	}
	if !slices.Equal(got, want) || a.Usage.PromptTokens != tok.Count {
		t.Fatalf("answer %v\npooled hidden states %v\nusage %+v for %d tokens", got[:4], want[:4], a.Usage, tok.Count)
	}
	waitIdle(t, e.s)
}

// TestEmbeddingsRefusals: a routed preset, the bounds on inputs and
// tokens, malformed inputs, other formats and widths are 400s naming the
// parameter (an unknown preset a 404).
func TestEmbeddingsRefusals(t *testing.T) {
	_, edit := embedPresets(t)
	e := start(t, func(c *config.Config) {
		edit(c)
		c.MaxBodyBytes = 4 << 20
	})
	body := func(kv ...any) map[string]any { return with(map[string]any{"model": "embed", "input": "a"}, kv...) }
	long := make([]int32, 2049)
	many := make([]string, 2049)
	for i := range many {
		many[i] = "x"
	}
	full := make([][]int32, 147) // 147 × 2048 tokens: past 300,000
	for i := range full {
		full[i] = make([]int32, 2048)
	}
	for _, c := range []struct {
		name  string
		body  any
		param string
		code  string
	}{
		{"routed preset", body("model", "r2r-random"), "model", "unsupported_value"},
		{"no input", map[string]any{"model": "embed"}, "input", "missing_required_parameter"},
		{"empty string", body("input", ""), "input", "invalid_value"},
		{"empty string in a list", body("input", []string{"a", ""}), "input[1]", "invalid_value"},
		{"empty list", body("input", []string{}), "input", "invalid_value"},
		{"a number", body("input", 5), "input", "invalid_type"},
		{"mixed list", body("input", []any{"a", 3}), "input[1]", "invalid_type"},
		{"mixed ids", body("input", []any{3, "a"}), "input", "invalid_type"},
		{"fractional id", body("input", []any{3, 1.5}), "input", "invalid_type"},
		{"id outside the vocabulary", body("input", [][]int32{{1, 2}, {1, 512}}), "input[1]", "invalid_value"},
		{"negative id", body("input", []int32{1, -1}), "input", "invalid_value"},
		{"empty id list", body("input", [][]int32{{1}, {}}), "input[1]", "invalid_value"},
		{"beyond the context", body("input", [][]int32{{1}, long}), "input[1]", "context_length_exceeded"},
		{"one input beyond the context", body("input", long), "input", "context_length_exceeded"},
		{"too many inputs", body("input", many), "input", "invalid_value"},
		{"too many tokens", body("input", full), "input", "invalid_value"},
		{"encoding_format", body("encoding_format", "hex"), "encoding_format", "invalid_value"},
		{"dimensions", body("dimensions", 32), "dimensions", "invalid_value"},
		{"dimensions type", body("dimensions", "64"), "dimensions", "invalid_type"},
		{"unknown field", body("truncate", true), "truncate", "unknown_parameter"},
	} {
		code, b := e.do(http.MethodPost, "/v1/embeddings", c.body)
		wantError(t, c.name, code, b, http.StatusBadRequest, typeInvalidRequest, c.param, c.code)
	}
	code, b := e.do(http.MethodPost, "/v1/embeddings", body("model", "nope"))
	wantError(t, "unknown preset", code, b, http.StatusNotFound, typeInvalidRequest, "model", "model_not_found")
	code, b = e.do(http.MethodPost, "/v1/embeddings", body("model", "r2r-random"))
	if !bytes.Contains(b, []byte("routes between 2 models")) {
		t.Errorf("the routed preset's refusal does not say why: %d %s", code, b)
	}
	waitIdle(t, e.s)
}

// TestEmbeddingsSimulatedModel: a preset of one simulated model embeds:
// the same input the same vector, another input another, each of unit
// length, as base64 of the model's width.
func TestEmbeddingsSimulatedModel(t *testing.T) {
	_, edit := embedPresets(t)
	e := start(t, edit)
	var a, again embeddingAnswer
	e.post("/v1/embeddings", map[string]any{"model": "sim-one", "input": []string{"a b", "c"}, "encoding_format": "base64", "user": "u"}, &a)
	e.post("/v1/embeddings", map[string]any{"model": "sim-one", "input": []string{"a b", "c"}, "encoding_format": "base64"}, &again)
	if len(a.Data) != 2 || !bytes.Equal(a.Data[0].Embedding, again.Data[0].Embedding) || bytes.Equal(a.Data[0].Embedding, a.Data[1].Embedding) {
		t.Fatalf("simulated embeddings: %+v", a)
	}
	var s string
	if json.Unmarshal(a.Data[1].Embedding, &s) != nil {
		t.Fatalf("base64 item %s", a.Data[1].Embedding)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 4*e.s.byName["sim-one"].models[0].info.HiddenSize {
		t.Fatalf("base64 item: %d bytes, %v", len(raw), err)
	}
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if math.Abs(norm(v)-1) > 1e-6 {
		t.Fatalf("simulated vector of length %v", norm(v))
	}
	waitIdle(t, e.s)
}

// TestEmbeddingsBesideGeneration: a long embeddings request runs beside
// the model's own steps (a completion on the same preset finishes while it
// runs), and a client that goes away stops it.
func TestEmbeddingsBesideGeneration(t *testing.T) {
	_, edit := embedPresets(t)
	e := start(t, func(c *config.Config) {
		edit(c)
		c.MaxBodyBytes = 4 << 20
	})
	inputs := make([][]int32, 140) // 280,000 tokens: minutes of work
	for i := range inputs {
		inputs[i] = make([]int32, 2000)
		for j := range inputs[i] {
			inputs[i][j] = int32(3 + (i*7+j)%500)
		}
	}
	j, _ := json.Marshal(map[string]any{"model": "embed", "input": inputs})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/embeddings", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
			err = errors.New("the request finished: " + resp.Status)
		}
		done <- err
	}()
	testkit.Until(t, 30*time.Second, func() error {
		if e.s.inFlight.Load() == 0 {
			return errors.New("the embeddings request is not in flight yet")
		}
		return nil
	})
	var r completionResponse
	e.post("/v1/completions", map[string]any{"model": "embed", "prompt": "Once upon a time", "max_tokens": 8}, &r)
	if r.Usage.CompletionTokens != 8 || e.s.inFlight.Load() != 1 {
		t.Fatalf("completion beside the embeddings: %+v, %d in flight", r.Usage, e.s.inFlight.Load())
	}
	cancel()
	if err := testkit.Receive(t, done, 30*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	waitIdle(t, e.s) // the server stopped the embeddings within its bound
}

// TestEmbeddingsNodeSDK drives /v1/embeddings with the official openai npm
// package (server/testdata/openai_embeddings.mjs): its default base64
// transfer and floats agree, inputs of every shape, usage, and the routed
// preset's refusal as a BadRequestError naming model.
func TestEmbeddingsNodeSDK(t *testing.T) {
	node, dir := openaiNPM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := nodeScript(t, dir, "openai_embeddings.mjs")
	_, edit := embedPresets(t)
	e := start(t, func(c *config.Config) {
		edit(c)
		c.APIKey = "sk-embeddings"
	})
	run := exec.CommandContext(ctx, node, path)
	run.Env = append(os.Environ(), "TR_BASE_URL="+e.url+"/v1", "TR_API_KEY=sk-embeddings")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("node openai_embeddings.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var summary struct {
		Width  int `json:"width"`
		Inputs int `json:"inputs"`
		Tokens int `json:"tokens"`
		Error  struct {
			Status int    `json:"status"`
			Param  string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &summary); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	if summary.Width != 64 || summary.Inputs != 3 || summary.Tokens == 0 || summary.Error.Status != 400 || summary.Error.Param != "model" {
		t.Fatalf("summary %s", stdout.String())
	}
	t.Logf("openai SDK: %s", stdout.String())
	waitIdle(t, e.s)
}
