package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/buildinfo"
)

func TestModelRetrieve(t *testing.T) {
	e := start(t, nil)
	var card modelCard
	code, b := e.do(http.MethodGet, "/v1/models/r2r-random", nil)
	if code != http.StatusOK || json.Unmarshal(b, &card) != nil || card.ID != "r2r-random" || card.Object != "model" || len(card.Models) != 2 {
		t.Fatalf("GET /v1/models/r2r-random: %d %s", code, b)
	}
	code, b = e.do(http.MethodGet, "/v1/models/gpt-4", nil)
	wantError(t, "unknown model", code, b, http.StatusNotFound, typeInvalidRequest, "model", "model_not_found")
}

func TestTokenizeDetokenize(t *testing.T) {
	e := start(t, nil)
	var tok TokenizeResponse
	e.post("/tokenize", map[string]any{"prompt": "the quick brown fox"}, &tok)
	if tok.Count != len(tok.Tokens) || tok.Count < 2 || tok.MaxModelLen <= 0 {
		t.Fatalf("tokenize: %+v", tok)
	}
	var raw TokenizeResponse
	e.post("/tokenize", map[string]any{"prompt": "the quick brown fox", "add_special_tokens": false}, &raw)
	if raw.Count != tok.Count-1 || raw.Tokens[0] != tok.Tokens[1] {
		t.Fatalf("without special tokens %v, with %v: want the same minus BOS", raw.Tokens, tok.Tokens)
	}
	var det struct{ Prompt string }
	e.post("/detokenize", map[string]any{"tokens": raw.Tokens}, &det)
	if strings.TrimSpace(det.Prompt) != "the quick brown fox" {
		t.Fatalf("detokenize(tokenize(x)) = %q", det.Prompt)
	}
	// A chat tokenizes to what a chat completion counts as its prompt.
	msgs := []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}}
	var chat TokenizeResponse
	e.post("/tokenize", map[string]any{"messages": msgs}, &chat)
	var resp chatResponse
	e.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 1}, &resp)
	if chat.Count != resp.Usage.PromptTokens {
		t.Fatalf("tokenize counts %d chat tokens, the completion %d", chat.Count, resp.Usage.PromptTokens)
	}
	code, b := e.do(http.MethodPost, "/detokenize", map[string]any{"tokens": []int{1, 1 << 30}})
	wantError(t, "token outside the vocabulary", code, b, http.StatusBadRequest, typeInvalidRequest, "tokens", "invalid_value")
	code, b = e.do(http.MethodPost, "/tokenize", map[string]any{})
	wantError(t, "nothing to tokenize", code, b, http.StatusBadRequest, typeInvalidRequest, "prompt", "missing_required_parameter")
	code, b = e.do(http.MethodPost, "/tokenize", map[string]any{"prompt": "x", "text": "y"})
	wantError(t, "unknown field", code, b, http.StatusBadRequest, typeInvalidRequest, "text", "unknown_parameter")
}

func TestVersion(t *testing.T) {
	e := start(t, nil)
	var v map[string]string
	code, b := e.do(http.MethodGet, "/version", nil)
	if code != http.StatusOK || json.Unmarshal(b, &v) != nil || v["version"] != buildinfo.Read().Version || v["go"] == "" {
		t.Fatalf("/version: %d %s", code, b)
	}
}

// corsDo sends method to path with an Origin and the extra headers, and
// returns the response (body closed).
func corsDo(t *testing.T, e *env, method, path, origin string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestCORS(t *testing.T) {
	const app = "https://app.example"
	e := start(t, func(c *config.Config) { c.CORSOrigins = []string{app} })
	pre := corsDo(t, e, http.MethodOptions, "/v1/chat/completions", app,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", pre.StatusCode, pre.Header)
	}
	get := corsDo(t, e, http.MethodGet, "/v1/models", app)
	if get.StatusCode != http.StatusOK || get.Header.Get("Access-Control-Allow-Origin") != app {
		t.Fatalf("GET from the allowed origin: %d %v", get.StatusCode, get.Header)
	}
	other := corsDo(t, e, http.MethodOptions, "/v1/chat/completions", "https://evil.example", "Access-Control-Request-Method", "POST")
	if other.StatusCode != http.StatusMethodNotAllowed || other.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", other.StatusCode, other.Header)
	}

	off := start(t, nil)
	if r := corsDo(t, off, http.MethodOptions, "/v1/chat/completions", app, "Access-Control-Request-Method", "POST"); r.StatusCode != http.StatusMethodNotAllowed ||
		r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("without --cors-origin: %d %v", r.StatusCode, r.Header)
	}
}
