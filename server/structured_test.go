package server

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/mail"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
			"schema": map[string]any{"type": "string", "pattern": "(?=a)"}}}}, "response_format"},
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

// askSchema sends a chat request whose response_format carries schema as
// it is: the body is built around the text, since encoding/json refuses
// to write JSON over 10,000 levels deep (a schema in a JSON string, which
// it does not look into, gets in either way).
func askSchema(t *testing.T, e *env, schema string, seed int) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"max_tokens": 400, "seed": seed, "temperature": 0.9,
		"messages":        []map[string]string{{"role": "user", "content": "hi"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": "SCHEMA"}}})
	if err != nil {
		t.Fatal(err)
	}
	return e.do(http.MethodPost, "/v1/chat/completions", strings.Replace(string(body), `"SCHEMA"`, schema, 1))
}

// TestStructuredOutputTraps: schemas no value satisfies ($ref cycles, a
// required self-reference) and schemas beyond a limit get a 400 naming
// the problem, and the server still serves afterwards.
func TestStructuredOutputTraps(t *testing.T) {
	e := start(t, nil)
	deep := func(n int) string {
		return strings.Repeat(`{"type":"array","items":`, n) + `{}` + strings.Repeat(`}`, n)
	}
	quoted, _ := json.Marshal(deep(10000))
	for _, c := range []struct{ schema, code, word string }{
		{`{"$ref":"#"}`, "invalid_value", "cycle of references"},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "invalid_value", "cycle of references"},
		{`{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`, "invalid_value", "no finite value"},
		{`{"$ref":"#/$defs/missing"}`, "invalid_value", "no $defs"},
		{`{"$ref":"http://example.com/s.json"}`, "invalid_value", "only references within the schema"},
		{deep(9000), "schema_too_large", "nesting depth exceeds the limit of 128"},
		{string(quoted), "schema_too_large", "nesting depth exceeds the limit of 128"},
	} {
		code, b := askSchema(t, e, c.schema, 1)
		var er errorBody
		_ = json.Unmarshal(b, &er)
		if code != http.StatusBadRequest || er.Error.Type != typeInvalidRequest || er.Error.Code == nil || *er.Error.Code != c.code ||
			!strings.Contains(er.Error.Message, c.word) {
			t.Errorf("%.80s: HTTP %d %.300s, want 400 %s naming %q", c.schema, code, b, c.code, c.word)
		}
	}
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"max_tokens": 8, "messages": []map[string]string{{"role": "user", "content": "hi"}}}, &r)
	if len(r.Choices) != 1 || r.Choices[0].Message.Content == nil {
		t.Fatalf("a plain request after the schemas: %+v", r)
	}
}

// TestStructuredOutputRecursive: recursive schemas ($ref to the root, a
// cycle through $defs) give output that is valid against the schema and
// nests.
func TestStructuredOutputRecursive(t *testing.T) {
	e := start(t, nil)
	tree := `{"type":"object","properties":{"name":{"type":"string","maxLength":6},
		"children":{"type":"array","items":{"$ref":"#"},"maxItems":2}},"required":["name","children"],"additionalProperties":false}`
	thread := `{"$defs":{"post":{"type":"object","properties":{"text":{"type":"string","maxLength":6},"replies":{"$ref":"#/$defs/replies"}},"required":["text"]},
		"replies":{"type":"array","items":{"$ref":"#/$defs/post"},"maxItems":2}},"$ref":"#/$defs/post"}`
	for _, schema := range []string{tree, thread} {
		v := testkit.JSONSchema(t, schema)
		finished, nested := 0, 0
		for seed := 1; seed <= 6; seed++ {
			code, b := askSchema(t, e, schema, seed)
			var r chatResponse
			if code != http.StatusOK || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 || r.Choices[0].Message.Content == nil {
				t.Fatalf("%.40s seed %d: HTTP %d %.300s", schema, seed, code, b)
			}
			if fr := r.Choices[0].FinishReason; fr == nil || *fr != "stop" {
				continue // cut off by max_tokens: not a whole value
			}
			finished++
			text := *r.Choices[0].Message.Content
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%.40s seed %d: %q is not JSON: %v", schema, seed, text, err)
			}
			if err := v.Validate(doc); err != nil {
				t.Fatalf("%.40s seed %d: %q does not validate: %v", schema, seed, text, err)
			}
			if strings.Contains(text, "[{") {
				nested++
			}
		}
		if finished == 0 || nested == 0 {
			t.Fatalf("%.40s: %d generations finished, %d of them nested", schema, finished, nested)
		}
	}
}

// keywordProps are properties with every keyword of OpenAI's strict mode
// beyond types: pattern, each format, numeric bounds (inclusive and
// exclusive), multipleOf (integer and decimal), minItems and maxItems.
// The free-length fields are bounded so that small models finish within
// the budget.
var keywordProps = [][2]string{
	{"code", `{"type":"string","pattern":"^[A-Z]{3}-\\d{3}$"}`},
	{"when", `{"type":"string","format":"date-time","maxLength":29}`},
	{"day", `{"type":"string","format":"date"}`},
	{"at", `{"type":"string","format":"time","maxLength":20}`},
	{"wait", `{"type":"string","format":"duration","maxLength":12}`},
	{"mail", `{"type":"string","format":"email","maxLength":24}`},
	{"host", `{"type":"string","format":"hostname","maxLength":20}`},
	{"ip4", `{"type":"string","format":"ipv4"}`},
	{"ip6", `{"type":"string","format":"ipv6"}`},
	{"id", `{"type":"string","format":"uuid"}`},
	{"n", `{"type":"integer","minimum":-50,"maximum":50,"multipleOf":5}`},
	{"price", `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":100,"multipleOf":0.01}`},
	{"count", `{"type":"integer"}`},
	{"tags", `{"type":"array","items":{"type":"string","pattern":"^[a-z]{1,6}$"},"minItems":1,"maxItems":2}`},
}

// keywordsSchema is a strict-mode object schema of the named properties
// of keywordProps (all of them with no names).
func keywordsSchema(names ...string) string {
	var props, req []string
	for _, p := range keywordProps {
		if len(names) == 0 || slices.Contains(names, p[0]) {
			props = append(props, fmt.Sprintf("%q:%s", p[0], p[1]))
			req = append(req, fmt.Sprintf("%q", p[0]))
		}
	}
	return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s],"additionalProperties":false}`,
		strings.Join(props, ","), strings.Join(req, ","))
}

// formatValidator compiles a schema with format assertions on.
func formatValidator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkKeywords checks an output of a keywordsSchema: against the schema
// with formats asserted, and field by field with the standard library.
func checkKeywords(t *testing.T, v *jsonschema.Schema, text string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: not JSON: %v", text, err)
	}
	if err := v.Validate(doc); err != nil {
		t.Fatalf("%s: not valid against the schema: %v", text, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil {
		t.Fatal(err)
	}
	for name, raw := range fields {
		if err := checkField(name, string(raw)); err != nil {
			t.Fatalf("%s: %s: %v", text, name, err)
		}
	}
}

// checkField checks one field of keywordProps independently: regexp,
// time, net/netip, net/mail, exact integers and rationals, numbers
// written canonically (no -0, no leading zeros).
func checkField(name, raw string) error {
	var s string
	_ = json.Unmarshal([]byte(raw), &s)
	var err error
	switch name {
	case "code":
		if !regexp.MustCompile(`^[A-Z]{3}-\d{3}$`).MatchString(s) {
			err = fmt.Errorf("%q does not match", s)
		}
	case "when":
		_, err = time.Parse(time.RFC3339, s)
	case "day":
		_, err = time.Parse(time.DateOnly, s)
	case "at":
		_, err = time.Parse(time.RFC3339, "2000-01-01T"+s)
	case "mail":
		var m *mail.Address
		if m, err = mail.ParseAddress(s); err == nil && m.Address != s {
			err = fmt.Errorf("read as %q", m.Address)
		}
	case "ip4", "ip6":
		var a netip.Addr
		if a, err = netip.ParseAddr(s); err == nil && (a.Is4() != (name == "ip4") || a.Zone() != "") {
			err = fmt.Errorf("%q is not an %s address", s, name)
		}
	case "n":
		n, perr := strconv.ParseInt(raw, 10, 64)
		if perr != nil || n < -50 || n > 50 || n%5 != 0 || strconv.FormatInt(n, 10) != raw {
			err = fmt.Errorf("%s (%v)", raw, perr)
		}
	case "price":
		x, ok := new(big.Rat).SetString(raw)
		if !ok || x.Sign() <= 0 || x.Cmp(big.NewRat(100, 1)) >= 0 || !new(big.Rat).Mul(x, big.NewRat(100, 1)).IsInt() ||
			strings.HasPrefix(raw, "00") {
			err = fmt.Errorf("%s", raw)
		}
	case "count":
		if x, ok := new(big.Int).SetString(raw, 10); !ok || x.String() != raw {
			err = fmt.Errorf("%s is not a canonical integer", raw)
		}
	}
	return err
}

// askKeywords asks for an output of schema within maxTokens and returns
// its text, failing unless the generation finished.
func askKeywords(t *testing.T, e *env, model, schema string, maxTokens, seed int) string {
	t.Helper()
	var r chatResponse
	body := map[string]any{"max_tokens": maxTokens, "seed": seed, "temperature": 0.9,
		"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "keywords", "strict": true,
			"schema": jsonRaw(schema)}}}
	if model != "" {
		body["model"] = model
	}
	e.post("/v1/chat/completions", body, &r)
	if fr := r.Choices[0].FinishReason; fr == nil || *fr != "stop" {
		t.Fatalf("%s seed %d: finish reason %v after %q", model, seed, fr, *r.Choices[0].Message.Content)
	}
	return *r.Choices[0].Message.Content
}

// TestStructuredOutputKeywords: on the simulated default (one schema with
// every keyword) and on the real tiny pair (the same properties in three
// schemas that fit its 256-token context), outputs all finish and satisfy
// every keyword, checked independently.
func TestStructuredOutputKeywords(t *testing.T) {
	runs := 3
	if testing.Short() {
		runs = 1
	}
	sim := start(t, nil)
	v := formatValidator(t, keywordsSchema())
	for seed := 1; seed <= runs; seed++ {
		checkKeywords(t, v, askKeywords(t, sim, "", keywordsSchema(), 700, seed))
	}
	tiny := start(t, tinyPresets(t))
	for _, names := range [][]string{{"code", "when", "ip4", "n", "price"}, {"day", "at", "wait", "mail", "count"}, {"host", "ip6", "id", "tags"}} {
		schema := keywordsSchema(names...)
		v := formatValidator(t, schema)
		for _, preset := range []string{"r2r-random", "speculative"} {
			for seed := 1; seed <= runs; seed++ {
				text := askKeywords(t, tiny, preset, schema, 230, seed)
				checkKeywords(t, v, text)
				if seed == 1 {
					t.Logf("%s: %s", preset, text)
				}
			}
		}
	}
}

// TestStructuredOutputKeywordRefusals: a pattern the automaton cannot
// compile, an unsupported format and keyword values beyond a limit are
// refused with a 400 that names the parameter and the keyword's place in
// the schema, on the chat and the native endpoints.
func TestStructuredOutputKeywordRefusals(t *testing.T) {
	e := start(t, nil)
	for _, c := range []struct{ schema, code, word string }{
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"(?=x)y"}}}`, "invalid_value", "#/properties/a/pattern"},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"\\bword"}}}`, "invalid_value", "word boundary"},
		{`{"type":"object","properties":{"a":{"type":"string","format":"uri"}}}`, "invalid_value", `#/properties/a/format: "uri"`},
		{`{"type":"object","properties":{"a":{"type":"integer","multipleOf":123457}}}`, "schema_too_large", "#/properties/a/multipleOf"},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"(a|b)*a(a|b){20}"}}}`, "schema_too_large", "#/properties/a/pattern"},
		{`{"type":"object","properties":{"a":{"type":"integer","minimum":3,"maximum":2}}}`, "invalid_value", "no number"},
	} {
		for _, ep := range []struct{ path, param string }{{"/v1/chat/completions", "response_format"}, {"/generate", "sampling_params.json_schema"}} {
			body := map[string]any{"text": "hi", "sampling_params": map[string]any{"json_schema": jsonRaw(c.schema)}}
			if ep.path != "/generate" {
				body = map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}},
					"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": jsonRaw(c.schema)}}}
			}
			code, b := e.do(http.MethodPost, ep.path, body)
			var er errorBody
			_ = json.Unmarshal(b, &er)
			if code != http.StatusBadRequest || er.Error.Param == nil || *er.Error.Param != ep.param || er.Error.Code == nil ||
				*er.Error.Code != c.code || !strings.Contains(er.Error.Message, c.word) {
				t.Errorf("%s %s: HTTP %d %s, want 400 %s naming %s and %q", ep.path, c.schema, code, b, c.code, ep.param, c.word)
			}
		}
	}
}
