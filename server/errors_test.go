package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
)

// wantError checks an OpenAI-style error answer.
func wantError(t *testing.T, name string, code int, body []byte, status int, typ, param, errCode string) {
	t.Helper()
	if code != status {
		t.Errorf("%s: status %d, want %d (%s)", name, code, status, body)
		return
	}
	var eb struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Errorf("%s: body %s: %v", name, body, err)
		return
	}
	e := eb.Error
	gotParam := ""
	if e.Param != nil {
		gotParam = *e.Param
	}
	if e.Message == "" || e.Type != typ || gotParam != param || e.Code == nil || *e.Code != errCode {
		t.Errorf("%s: error %s, want type %s param %q code %s", name, body, typ, param, errCode)
	}
	// Every field is present, null or not.
	for _, k := range []string{`"message"`, `"type"`, `"param"`, `"code"`} {
		if !strings.Contains(string(body), k) {
			t.Errorf("%s: body %s lacks %s", name, body, k)
		}
	}
}

// stillServes checks that a good request works after a bad one.
func stillServes(t *testing.T, e *env, name string, hdr ...string) {
	t.Helper()
	code, b := e.do(http.MethodPost, "/v1/chat/completions", map[string]any{"max_tokens": 2,
		"messages": []map[string]string{{"role": "user", "content": "ok?"}}}, hdr...)
	if code != 200 {
		t.Fatalf("after %s: %d %s", name, code, b)
	}
}

func TestBadRequests(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Models[0].ContextLength, c.Models[1].ContextLength = 4096, 4096 })
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	chat := func(kv ...any) map[string]any {
		return with(map[string]any{"model": "r2r-random", "messages": msgs}, kv...)
	}
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		typ, param string
		code       string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, typeInvalidRequest, "", "invalid_json"},
		{"two JSON values", "/v1/completions", `{"prompt":"a"} {"prompt":"b"}`, 400, typeInvalidRequest, "", "invalid_json"},
		{"wrong type", "/v1/chat/completions", `{"messages": [], "temperature": "hot"}`, 400, typeInvalidRequest, "temperature", "invalid_type"},
		{"missing messages", "/v1/chat/completions", map[string]any{"model": "r2r-random"}, 400, typeInvalidRequest, "messages", "missing_required_parameter"},
		{"empty messages", "/v1/chat/completions", map[string]any{"messages": []any{}}, 400, typeInvalidRequest, "messages", "missing_required_parameter"},
		{"bad role", "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "wizard", "content": "x"}}}, 400, typeInvalidRequest, "messages", "invalid_value"},
		{"max_tokens 0", "/v1/chat/completions", chat("max_tokens", 0), 400, typeInvalidRequest, "max_tokens", "invalid_value"},
		{"max_tokens negative", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": -5}, 400, typeInvalidRequest, "max_tokens", "invalid_value"},
		{"max_tokens above context", "/v1/chat/completions", chat("max_tokens", 5000), 400, typeInvalidRequest, "max_tokens", "context_length_exceeded"},
		{"max_completion_tokens above context", "/v1/chat/completions", chat("max_completion_tokens", 4096), 400, typeInvalidRequest, "max_tokens", "context_length_exceeded"},
		{"negative temperature", "/v1/chat/completions", chat("temperature", -0.5), 400, typeInvalidRequest, "temperature", "invalid_value"},
		{"top_p 0", "/v1/completions", map[string]any{"prompt": "a", "top_p": 0}, 400, typeInvalidRequest, "top_p", "invalid_value"},
		{"n 17", "/v1/chat/completions", chat("n", 17), 400, typeInvalidRequest, "n", "invalid_value"},
		{"n 0", "/v1/completions", map[string]any{"prompt": "a", "n": 0}, 400, typeInvalidRequest, "n", "invalid_value"},
		{"frequency_penalty 3", "/v1/chat/completions", chat("frequency_penalty", 3), 400, typeInvalidRequest, "frequency_penalty", "invalid_value"},
		{"repetition_penalty 0", "/v1/completions", map[string]any{"prompt": "a", "repetition_penalty": 0}, 400, typeInvalidRequest, "repetition_penalty", "invalid_value"},
		{"min_p 2", "/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"min_p": 2}}, 400, typeInvalidRequest, "sampling_params.min_p", "invalid_value"},
		{"logit_bias key", "/v1/chat/completions", chat("logit_bias", map[string]any{"x": 1}), 400, typeInvalidRequest, "logit_bias", "invalid_value"},
		{"logit_bias value", "/v1/chat/completions", chat("logit_bias", map[string]any{"5": 101}), 400, typeInvalidRequest, "logit_bias", "invalid_value"},
		{"logit_bias type", "/v1/chat/completions", chat("logit_bias", map[string]any{"5": "x"}), 400, typeInvalidRequest, "logit_bias", "invalid_type"},
		{"stop_token_ids outside", "/v1/completions", map[string]any{"prompt": "a", "stop_token_ids": []int{1 << 30}}, 400, typeInvalidRequest, "stop_token_ids", "invalid_value"},
		{"frequency_penalty type", "/v1/completions", map[string]any{"prompt": "a", "frequency_penalty": "x"}, 400, typeInvalidRequest, "frequency_penalty", "invalid_type"},
		{"native presence type", "/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"presence_penalty": "x"}}, 400, typeInvalidRequest, "sampling_params.presence_penalty", "invalid_type"},
		{"missing prompt", "/v1/completions", map[string]any{"max_tokens": 3}, 400, typeInvalidRequest, "prompt", "missing_required_parameter"},
		{"two prompts", "/v1/completions", map[string]any{"prompt": []string{"a", "b"}}, 400, typeInvalidRequest, "prompt", "unsupported_value"},
		{"token outside vocabulary", "/v1/completions", map[string]any{"prompt": []int{1, 40000}}, 400, typeInvalidRequest, "prompt", "invalid_value"},
		{"bad stop", "/v1/completions", map[string]any{"prompt": "a", "stop": 3}, 400, typeInvalidRequest, "stop", "invalid_type"},
		{"native without prompt", "/generate", map[string]any{"sampling_params": map[string]any{}}, 400, typeInvalidRequest, "text", "missing_required_parameter"},
		{"native max_new_tokens 0", "/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"max_new_tokens": 0}}, 400, typeInvalidRequest, "sampling_params.max_new_tokens", "invalid_value"},
		{"unknown model chat", "/v1/chat/completions", map[string]any{"model": "gpt-4", "messages": msgs}, 404, typeInvalidRequest, "model", "model_not_found"},
		{"unknown model completion", "/v1/completions", map[string]any{"model": "nope", "prompt": "a"}, 404, typeInvalidRequest, "model", "model_not_found"},
		{"unknown model native", "/generate", map[string]any{"model": "nope", "text": "a"}, 404, typeInvalidRequest, "model", "model_not_found"},
		{"unknown path", "/v2/anything", map[string]any{}, 404, typeInvalidRequest, "", "not_found"},
	} {
		code, b := e.do(http.MethodPost, c.path, c.body)
		wantError(t, c.name, code, b, c.status, c.typ, c.param, c.code)
		stillServes(t, e, c.name)
	}
	code, b := e.do(http.MethodGet, "/v1/chat/completions", nil)
	wantError(t, "GET on a POST endpoint", code, b, 405, typeInvalidRequest, "", "method_not_allowed")
	stillServes(t, e, "405")
}

func TestOversizedBody(t *testing.T) {
	e := start(t, func(c *config.Config) { c.MaxBodyBytes = 4096 })
	big := `{"prompt":"` + strings.Repeat("a", 10000) + `"}`
	code, b := e.do(http.MethodPost, "/v1/completions", big)
	wantError(t, "oversized", code, b, 413, typeInvalidRequest, "", "request_too_large")
	stillServes(t, e, "413")
	// Without Content-Length (chunked), the limit holds while reading.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/completions", strings.NewReader(big))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	wantError(t, "oversized chunked", resp.StatusCode, rb, 413, typeInvalidRequest, "", "request_too_large")
	stillServes(t, e, "413 chunked")
}

func TestAPIKey(t *testing.T) {
	e := start(t, func(c *config.Config) { c.APIKey = "sekret" })
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2}
	code, b := e.do(http.MethodPost, "/v1/chat/completions", body)
	wantError(t, "missing key", code, b, 401, typeInvalidRequest, "", "invalid_api_key")
	code, b = e.do(http.MethodPost, "/v1/chat/completions", body, "Authorization", "Bearer wrong")
	wantError(t, "wrong key", code, b, 401, typeInvalidRequest, "", "invalid_api_key")
	code, b = e.do(http.MethodGet, "/v1/models", nil, "Authorization", "Bearer sekre")
	wantError(t, "wrong key on models", code, b, 401, typeInvalidRequest, "", "invalid_api_key")
	stillServes(t, e, "401", "Authorization", "Bearer sekret")
	for _, probe := range []string{"/health", "/ready"} {
		if code, _ := e.do(http.MethodGet, probe, nil); code != 200 {
			t.Fatalf("%s needs no key, got %d", probe, code)
		}
	}
}

func TestAdmissionLimit(t *testing.T) {
	e := start(t, func(c *config.Config) { c.MaxInFlight = 2 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := map[string]any{"stream": true, "max_tokens": 30000, "messages": []map[string]string{{"role": "user", "content": "long"}}}
	for range 2 {
		resp := e.openStream(ctx, "/v1/chat/completions", long)
		defer resp.Body.Close()
	}
	code, b := e.do(http.MethodPost, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 1})
	wantError(t, "over the in-flight limit", code, b, 429, typeRateLimit, "", "rate_limit_exceeded")
	code, b = e.do(http.MethodPost, "/generate", map[string]any{"text": "a"})
	wantError(t, "over the in-flight limit (native)", code, b, 429, typeRateLimit, "", "rate_limit_exceeded")
	cancel()
	waitIdle(t, e.s)
	stillServes(t, e, "429")
}

func TestUnavailableWhileDraining(t *testing.T) {
	e := start(t, nil)
	e.s.draining.Store(true)
	code, b := e.do(http.MethodPost, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 1})
	wantError(t, "draining", code, b, 503, typeServer, "", "service_unavailable")
	if code, _ := e.do(http.MethodGet, "/health", nil); code != 503 {
		t.Fatalf("/health while draining: %d", code)
	}
	if code, b := e.do(http.MethodGet, "/ready", nil); code != 503 || !strings.Contains(string(b), `"not_ready"`) {
		t.Fatalf("/ready while draining: %d %s", code, b)
	}
	e.s.draining.Store(false)
	stillServes(t, e, "503")
}
