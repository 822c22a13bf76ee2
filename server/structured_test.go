package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenrouter/tokenrouter/internal/testkit"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
)

// personSchema is the structured-output test schema: every kind the
// automaton has, bounded so that small models finish within the budget.
const personSchema = `{"type":"object","properties":{
	"name":{"type":"string","minLength":1,"maxLength":16},
	"age":{"type":"integer"},
	"mood":{"enum":["happy","sad","calm"]},
	"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3},
	"pet":{"type":["object","null"],"properties":{"kind":{"type":"string","maxLength":10},"legs":{"type":"number"}},"required":["kind"]},
	"ok":{"type":"boolean"}},
	"required":["name","age","mood","ok"],"additionalProperties":false}`

// tinyPresets are the real tiny pair under each algorithm the
// structured-output acceptance names.
func tinyPresets(t *testing.T) func(*config.Config) {
	models := testmodels.Dir(t)
	tok := filepath.Join(models, "tok512.bin")
	return func(c *config.Config) {
		c.Models = []config.Model{
			{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(models, "stories260K.bin"), Tokenizer: tok},
			{Name: "llama2xs", Engine: loader.KindCPU, Path: filepath.Join(models, "llama2xs-model.bin"), Tokenizer: tok},
		}
		c.Presets = []config.Preset{
			{Name: "r2r-random", Algorithm: "r2r-random", Models: []string{"stories", "llama2xs"}, Params: map[string]string{"p": "0.35"}, Thresholds: "1"},
			{Name: "r-stitch", Algorithm: "r-stitch", Models: []string{"stories", "llama2xs"}, Params: map[string]string{"tau": "0.1"}, Thresholds: "1"},
			{Name: "speculative", Algorithm: "speculative", Models: []string{"stories", "llama2xs"}, Params: map[string]string{"k": "4"}, Thresholds: "1"},
		}
	}
}

// TestStructuredOutputTinyPair: seeded generations of the real tiny pair
// under r2r-random, r-stitch and speculative with a json_schema response
// format all parse and validate against the schema, both models wrote
// some of the tokens, and under r2r-random speculating past routed
// positions (depth 4) writes the same text as not speculating.
func TestStructuredOutputTinyPair(t *testing.T) {
	e := start(t, tinyPresets(t))
	v := testkit.JSONSchema(t, personSchema)
	n := 12 // per algorithm; TOKENROUTER_STRUCTURED_RUNS=100 for the full check
	if v, err := strconv.Atoi(os.Getenv("TOKENROUTER_STRUCTURED_RUNS")); err == nil && v > 0 {
		n = v
	} else if testing.Short() {
		n = 3
	}
	for _, preset := range []string{"r2r-random", "r-stitch", "speculative"} {
		byModel := map[string]int{}
		for i := range n {
			ask := func(speculate int) chatResponse {
				var r chatResponse
				e.post("/v1/chat/completions", map[string]any{"model": preset, "max_tokens": 200, "seed": i + 1, "temperature": 0.9,
					"messages":  []map[string]string{{"role": "user", "content": "Once upon a time"}},
					"speculate": speculate,
					"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "strict": true,
						"schema": jsonRaw(personSchema)}}}, &r)
				return r
			}
			r := ask(0)
			text := *r.Choices[0].Message.Content
			if preset == "r2r-random" {
				// Speculating past routed positions (depth 4, whatever the
				// measured agreement) leaves the constrained output as it is.
				if on := *ask(4).Choices[0].Message.Content; on != text {
					t.Fatalf("%s seed %d: speculating wrote %q, without %q", preset, i, on, text)
				}
			}
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s seed %d: %q is not JSON: %v", preset, i, text, err)
			}
			if err := v.Validate(doc); err != nil {
				t.Fatalf("%s seed %d: %q does not validate: %v", preset, i, text, err)
			}
			if fr := r.Choices[0].FinishReason; fr == nil || *fr != "stop" {
				t.Fatalf("%s seed %d: finish reason %v, want stop", preset, i, fr)
			}
			for m, k := range r.Routing.TokensByModel {
				byModel[m] += k
			}
			if i == 0 {
				t.Logf("%s: %s", preset, text)
			}
		}
		if byModel["stories"] == 0 || byModel["llama2xs"] == 0 {
			t.Fatalf("%s: tokens by model %v, want both models", preset, byModel)
		}
	}
}

// jsonRaw embeds a JSON text in a request body as it is.
type jsonRaw string

// MarshalJSON returns the text.
func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// TestStructuredOutputRequests: json_object and a schema on the native
// endpoint give JSON on the simulated default; bad schemas and formats are
// refused naming the parameter.
func TestStructuredOutputRequests(t *testing.T) {
	e := start(t, nil)
	var nr NativeResponse
	e.post("/generate", map[string]any{"text": "hi", "sampling_params": map[string]any{"max_new_tokens": 300,
		"json_schema": jsonRaw(`{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":5}`)}}, &nr)
	v := testkit.JSONSchema(t, `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":5}`)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(nr.Text))
	if err != nil || v.Validate(doc) != nil {
		t.Fatalf("sim /generate with a schema wrote %q (%v)", nr.Text, err)
	}
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"max_tokens": 300, "response_format": map[string]any{"type": "json_object"},
		"messages": []map[string]string{{"role": "user", "content": "hi"}}}, &r)
	text := *r.Choices[0].Message.Content
	if doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text)); err != nil || fmt.Sprintf("%T", doc) != "map[string]interface {}" {
		t.Fatalf("json_object wrote %q (%v)", text, err)
	}
	for _, c := range []struct {
		body  map[string]any
		param string
	}{
		{map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x",
			"schema": map[string]any{"type": "string", "pattern": "a+"}}}}, "response_format"},
		{map[string]any{"response_format": map[string]any{"type": "yaml"}}, "response_format.type"},
		{map[string]any{"response_format": map[string]any{"type": "json_schema"}}, "response_format.json_schema.schema"},
		{map[string]any{"response_format": map[string]any{"type": "json_object"}, "ignore_eos": true}, "response_format"},
	} {
		c.body["messages"] = []map[string]string{{"role": "user", "content": "hi"}}
		code, b := e.do(http.MethodPost, "/v1/chat/completions", c.body)
		var er errorBody
		_ = json.Unmarshal(b, &er)
		if code != http.StatusBadRequest || er.Error.Param == nil || *er.Error.Param != c.param {
			t.Errorf("%v: HTTP %d %s, want 400 naming %q", c.body["response_format"], code, b, c.param)
		}
	}
}
