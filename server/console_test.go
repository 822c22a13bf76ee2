package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/console"
)

// TestGenerateMessages: /generate renders messages with the chat template
// as /v1/chat/completions does (same seed, same output), and refuses them
// beside a prompt.
func TestGenerateMessages(t *testing.T) {
	e := start(t, nil)
	msgs := []map[string]string{{"role": "user", "content": "Hi there"}}
	var nr NativeResponse
	e.post("/generate", map[string]any{"messages": msgs, "sampling_params": map[string]any{"max_new_tokens": 12, "seed": 7}}, &nr)
	var cr chatResponse
	e.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 12, "seed": 7}, &cr)
	if nr.Text == "" || nr.Text != *cr.Choices[0].Message.Content || nr.Usage.PromptTokens != cr.Usage.PromptTokens {
		t.Fatalf("generate %q (%+v), chat %q (%+v)", nr.Text, nr.Usage, *cr.Choices[0].Message.Content, cr.Usage)
	}
	code, b := e.do(http.MethodPost, "/generate", map[string]any{"messages": msgs, "text": "x"})
	if code != http.StatusBadRequest || !strings.Contains(string(b), "messages") {
		t.Fatalf("messages and text: %d %s", code, b)
	}
	code, b = e.do(http.MethodPost, "/generate", map[string]any{"messages": []any{}})
	if code != http.StatusBadRequest {
		t.Fatalf("empty messages: %d %s", code, b)
	}
}

// TestConsoleRoutes: the page and its files are served with the policy
// headers; other paths stay JSON 404s; the events stream needs the key.
func TestConsoleRoutes(t *testing.T) {
	e := start(t, func(c *config.Config) { c.APIKey = "sekret" })
	resp, err := e.client.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != console.CSP ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %v", resp.StatusCode, resp.Header)
	}
	for _, p := range []string{"/console/app.js", "/console/console.css"} {
		if code, b := e.do(http.MethodGet, p, nil); code != http.StatusOK || len(b) == 0 {
			t.Fatalf("GET %s: %d", p, code)
		}
	}
	for _, p := range []string{"/console/", "/console/nope.js", "/console/x/app.js", "/nope"} {
		if code, _ := e.do(http.MethodGet, p, nil); code != http.StatusNotFound {
			t.Fatalf("GET %s: %d, want 404", p, code)
		}
	}
	if code, _ := e.do(http.MethodPost, "/", nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /: %d", code)
	}
	if code, _ := e.do(http.MethodGet, "/console/events", nil); code != http.StatusUnauthorized {
		t.Fatalf("events without the key: %d", code)
	}
	if code, _ := e.do(http.MethodGet, "/console/events?interval=1ms", nil, "Authorization", "Bearer sekret"); code != http.StatusBadRequest {
		t.Fatalf("events at 1ms: %d", code)
	}
}

// TestConsoleEvents: the stream reports a request's tokens and steps, the
// thresholds in force, and ends when the server drains.
func TestConsoleEvents(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Presets[0].Thresholds = "1,2" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/console/events?interval=100ms", nil)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var nr NativeResponse
	e.post("/generate", map[string]any{"text": "Hi", "sampling_params": map[string]any{"max_new_tokens": 40, "seed": 3}}, &nr)
	var tokens, steps float64
	var last console.Frame
	_, err = readEvents(resp.Body, func(ev event) bool {
		prev := last.T
		if err := json.Unmarshal([]byte(ev.data), &last); err != nil {
			t.Fatalf("%v in %s", err, ev.data)
		}
		for _, m := range last.Presets[0].Models {
			dt := float64(last.T-prev) / 1000
			tokens += m.TokS * dt
			steps += m.StepsS * dt
		}
		return last.Presets[0].TTFT.N == 0 // until the request shows
	})
	if err != nil {
		t.Fatal(err)
	}
	p := last.Presets[0]
	if p.Name != "r2r-random" || len(p.Models) != 2 || p.TTFT.P50 <= 0 || p.TTFT.P99 < p.TTFT.P50 {
		t.Fatalf("frame %+v", last)
	}
	if m := p.Models[1]; !m.Up || !m.Simulated || len(m.B) != 1 || m.B[0] != 2 || m.BSince == 0 || m.MaxWaitMS <= 0 {
		t.Fatalf("llm %+v", m)
	}
	if n := float64(len(nr.OutputIDs)); tokens < 0.9*n || tokens > 1.1*n || steps < n {
		t.Fatalf("the stream saw %.0f tokens and %.0f steps, the request produced %d tokens", tokens, steps, len(nr.OutputIDs))
	}
	done := make(chan error, 1)
	go func() { _, err := readEvents(resp.Body, nil); done <- err }()
	e.shutdown()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the events stream outlived the shutdown")
	}
}

// BenchmarkConsoleSnapshot is what one open dashboard costs the server
// per frame (one a second) before the console turns it into JSON: the
// default deployment's counters, policies and latency histograms.
func BenchmarkConsoleSnapshot(b *testing.B) {
	s, err := New(context.Background(), config.Default(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	src := consoleSource{s}
	b.ReportAllocs()
	for b.Loop() {
		src.Snapshot()
	}
}
