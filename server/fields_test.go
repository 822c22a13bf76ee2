package server

import (
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/api-fields.md from the field tables")

const (
	fieldDocs  = "../docs/api-fields.md"
	tableBegin = "<!-- tables: rendered from server/fields_tables.go by `go test ./server -run TestFieldDocs -update` -->\n"
	tableEnd   = "<!-- end of tables -->\n"
)

// TestFieldDocs: the documented tables are the ones the server checks.
func TestFieldDocs(t *testing.T) {
	b, err := os.ReadFile(fieldDocs)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the table markers", fieldDocs)
	}
	want := markdown(chatFields, completionFields, embeddingFields, generateFields, tokenizeFields, detokenizeFields)
	got := doc[i+len(tableBegin) : j]
	if got == want {
		return
	}
	if !*updateDocs {
		t.Fatalf("%s is out of date with the field tables: run go test ./server -run TestFieldDocs -update", fieldDocs)
	}
	if err := os.WriteFile(fieldDocs, []byte(doc[:i+len(tableBegin)]+want+doc[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFieldRefusals: every field in no table, and every refused field set
// to something other than its default, is a 400 naming it; defaults and
// no-op fields are accepted.
func TestFieldRefusals(t *testing.T) {
	e := start(t, fastSim)
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	chat := func(kv ...any) map[string]any { return with(map[string]any{"messages": msgs, "max_tokens": 2}, kv...) }
	comp := func(kv ...any) map[string]any { return with(map[string]any{"prompt": "a", "max_tokens": 2}, kv...) }
	gen := func(sp map[string]any, kv ...any) map[string]any {
		return with(map[string]any{"text": "a", "sampling_params": sp}, kv...)
	}
	for _, c := range []struct {
		name, path string
		body       any
		param      string
		code       string
	}{
		{"unknown chat field", "/v1/chat/completions", chat("frobnicate", 1), "frobnicate", "unknown_parameter"},
		{"unknown completion field", "/v1/completions", comp("temprature", 0.5), "temprature", "unknown_parameter"},
		{"unknown native field", "/generate", gen(nil, "foo", true), "foo", "unknown_parameter"},
		{"unknown sampling param", "/generate", gen(map[string]any{"tempreature": 1}), "sampling_params.tempreature", "unknown_parameter"},
		{"unknown stream option", "/v1/chat/completions", chat("stream_options", map[string]any{"usage": true}), "stream_options.usage", "unknown_parameter"},
		{"unknown message field", "/v1/chat/completions", chat("messages", []map[string]any{{"role": "user", "content": "x", "mood": "calm"}}), "messages[0].mood", "unknown_parameter"},
		{"functions", "/v1/chat/completions", chat("functions", []map[string]any{{"name": "f"}}), "functions", "unsupported_parameter"},
		{"unknown tool field", "/v1/chat/completions", chat("tools", []map[string]any{{"type": "function", "function": map[string]any{"name": "f", "returns": 1}}}), "tools[0].function.returns", "unknown_parameter"},
		{"response_format field", "/v1/chat/completions", chat("response_format", map[string]any{"type": "json_object", "grammar": "x"}), "response_format.grammar", "unknown_parameter"},
		{"message function_call", "/v1/chat/completions", chat("messages", []map[string]any{{"role": "assistant", "function_call": map[string]any{"name": "f"}}}), "messages[0].function_call", "unsupported_parameter"},
		{"store", "/v1/chat/completions", chat("store", true), "store", "unsupported_parameter"},
		{"suffix", "/v1/completions", comp("suffix", "end"), "suffix", "unsupported_parameter"},
		{"best_of", "/v1/completions", comp("best_of", 3), "best_of", "unsupported_parameter"},
	} {
		code, b := e.do(http.MethodPost, c.path, c.body)
		wantError(t, c.name, code, b, http.StatusBadRequest, typeInvalidRequest, c.param, c.code)
	}
	for _, c := range []struct {
		name, path string
		body       any
	}{
		{"defaults and no-ops", "/v1/chat/completions", chat("tools", []any{}, "tool_choice", "none", "response_format", map[string]any{"type": "text"},
			"store", false, "user", "u-1", "metadata", map[string]any{"k": "v"}, "parallel_tool_calls", true, "service_tier", "auto",
			"modalities", []string{"text"}, "stream_options", nil, "n", 1, "messages", []map[string]any{{"role": "user", "content": "x", "name": "ann"}})},
		{"completion defaults", "/v1/completions", comp("best_of", 1, "suffix", nil, "user", "u")},
		{"native defaults", "/generate", gen(map[string]any{"max_new_tokens": 2})},
	} {
		if code, b := e.do(http.MethodPost, c.path, c.body); code != http.StatusOK {
			t.Errorf("%s: %d %s", c.name, code, b)
		}
	}
}
