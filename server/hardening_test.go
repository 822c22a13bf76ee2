package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// fastSim makes both default models step in 20 µs with a long context, so
// a stream outruns the socket buffers of a client that does not read.
func fastSim(c *config.Config) {
	for i := range c.Models {
		c.Models[i].Profile = ""
		c.Models[i].Latency = &config.Latency{Base: 20 * time.Microsecond}
		c.Models[i].ContextLength = 1 << 20
	}
}

// rawRequest opens a connection that sends head (and body, if any) and
// then reads nothing; its receive buffer is small.
func rawRequest(t *testing.T, e *env, head string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	if err := tc.SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	if _, err := io.WriteString(tc, head); err != nil {
		t.Fatal(err)
	}
	return tc
}

// postHead is a POST request's head for a JSON body of n bytes.
func postHead(path string, n int) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
}

// TestStalledReaderIsDisconnected: streaming clients that stop reading
// hold their admission slots only until the write timeout; then their
// requests are cancelled everywhere and others are served again.
func TestStalledReaderIsDisconnected(t *testing.T) {
	e := start(t, func(c *config.Config) {
		fastSim(c)
		c.MaxInFlight = 2
		c.WriteTimeout = 300 * time.Millisecond
	})
	body := `{"stream":true,"max_tokens":500000,"messages":[{"role":"user","content":"never read"}]}`
	for range 2 {
		rawRequest(t, e, postHead("/v1/chat/completions", len(body))+body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return e.s.inFlight.Load() == 2 }, "both stalled streams admitted")
	code, b := e.do(http.MethodPost, "/v1/chat/completions", map[string]any{"max_tokens": 2,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	if code != http.StatusTooManyRequests {
		t.Fatalf("while both slots are held: %d %s, want 429", code, b)
	}
	waitIdle(t, e.s) // the write deadline freed the slots and cancelled the requests
	stillServes(t, e, "stalled readers")
}

// TestSlowBodyTimesOut: a body that trickles in past the body timeout is
// answered 408 and the connection closed.
func TestSlowBodyTimesOut(t *testing.T) {
	e := start(t, func(c *config.Config) { c.BodyTimeout = 300 * time.Millisecond })
	c := rawRequest(t, e, postHead("/generate", 100)+"{")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, "slow body", resp.StatusCode, b, http.StatusRequestTimeout, typeInvalidRequest, "", "request_timeout")
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("connection still open after 408: %v", err)
	}
	stillServes(t, e, "slow body")
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// TestConnectionCap: past the connection cap /health still answers, other
// requests get 503, and the cap's connections are counted in /metrics.
func TestConnectionCap(t *testing.T) {
	e := start(t, func(c *config.Config) { c.MaxConnections = 3 })
	const held = `{"prompt":"held"`
	for range 3 { // bodies that never finish hold the three places
		rawRequest(t, e, postHead("/v1/completions", 1000)+held)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		l := e.s.conns.Load()
		return l != nil && l.open.Load() == 3
	}, "three connections held")
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string) {
		resp, err := fresh.Get(e.url + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := get("/health"); code != http.StatusOK || !strings.Contains(b, `"ok"`) {
		t.Fatalf("/health at the cap: %d %s", code, b)
	}
	code, b := get("/v1/models")
	wantError(t, "past the cap", code, []byte(b), http.StatusServiceUnavailable, typeServer, "", "service_unavailable")
	if !strings.Contains(b, "limit of 3 connections") {
		t.Fatalf("503 does not say why: %s", b)
	}
	if got := e.s.conns.Load().open.Load(); got != 3 {
		t.Fatalf("%d connections on the main lane, want 3", got)
	}
}

// TestReserveLaneNewestWins: connections that fill the reserved lane and
// send nothing do not keep a probe out: the oldest make room, and /health
// answers.
func TestReserveLaneNewestWins(t *testing.T) {
	e := start(t, func(c *config.Config) { c.MaxConnections = 1 })
	rawRequest(t, e, postHead("/v1/completions", 1000)+`{"prompt":"held"`)
	testkit.Eventually(t, 10*time.Second, func() bool {
		l := e.s.conns.Load()
		return l != nil && l.open.Load() == 1
	}, "the main lane's one connection held")
	for range reserveConns + 8 {
		rawRequest(t, e, "") // silent: no request at all
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := fresh.Get(e.url + "/health")
	if err != nil {
		t.Fatalf("/health with the reserved lane full of silent connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	if d := e.s.conns.Load().dropped.Load(); d < 1 {
		t.Fatalf("no lane connection made room (dropped %d)", d)
	}
}

// TestDrainAnswers503: after the shutdown signal a stream in flight
// completes while new API requests get 503 and /health says shutting
// down; then Serve returns.
func TestDrainAnswers503(t *testing.T) {
	e := start(t, nil)
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 60,
		"messages": []map[string]string{{"role": "user", "content": "finish me"}}})
	defer resp.Body.Close()
	content, checked := 0, false
	evs, err := readEvents(resp.Body, func(ev event) bool {
		if strings.Contains(ev.data, `"content":"`) && !strings.Contains(ev.data, `"content":""`) {
			content++
		}
		if content == 2 && !checked {
			checked = true
			e.stop() // SIGTERM in the command
			testkit.Eventually(t, 10*time.Second, e.s.draining.Load, "draining")
			code, b := e.do(http.MethodPost, "/v1/chat/completions", map[string]any{"max_tokens": 2,
				"messages": []map[string]string{{"role": "user", "content": "late"}}})
			wantError(t, "during drain", code, b, http.StatusServiceUnavailable, typeServer, "", "service_unavailable")
			if code, b := e.do(http.MethodGet, "/health", nil); code != http.StatusServiceUnavailable || !strings.Contains(string(b), "shutting_down") {
				t.Errorf("/health during drain: %d %s", code, b)
			}
		}
		return true
	})
	if err != nil || content != 60 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream across the drain: %d content chunks, err %v", content, err)
	}
	e.shutdown()
	waitIdle(t, e.s)
}

// TestHealthAndMetricsWithKey: with an API key, /metrics needs it, /health
// answers anyone but only says up or down; the Bearer scheme is
// case-insensitive.
func TestHealthAndMetricsWithKey(t *testing.T) {
	e := start(t, func(c *config.Config) { c.APIKey = "sekret" })
	code, b := e.do(http.MethodGet, "/metrics", nil)
	wantError(t, "metrics without key", code, b, http.StatusUnauthorized, typeInvalidRequest, "", "invalid_api_key")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		code, b := e.do(http.MethodGet, "/metrics", nil, "Authorization", scheme+" sekret")
		if code != http.StatusOK || !strings.Contains(string(b), "tokenrouter_model_up") {
			t.Fatalf("/metrics with %q: %d", scheme, code)
		}
	}
	code, b = e.do(http.MethodGet, "/health", nil)
	var h map[string]any
	if err := json.Unmarshal(b, &h); code != http.StatusOK || err != nil || len(h) != 1 || h["status"] != "ok" {
		t.Fatalf("/health without key: %d %s", code, b)
	}
	code, b = e.do(http.MethodGet, "/health", nil, "Authorization", "bearer sekret")
	if code != http.StatusOK || !strings.Contains(string(b), "in_flight") {
		t.Fatalf("/health with key: %d %s", code, b)
	}
	stillServes(t, e, "lowercase bearer", "Authorization", "bearer sekret")
}

// TestContentType: JSON endpoints want a JSON body type (parameters such
// as charset allowed) and answer 415 otherwise.
func TestContentType(t *testing.T) {
	e := start(t, nil)
	body := `{"prompt":"hi","max_tokens":2}`
	for _, c := range []struct {
		ct   string
		want int
	}{
		{"application/json; charset=utf-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"", http.StatusUnsupportedMediaType},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/completions", strings.NewReader(body))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if c.want != http.StatusOK {
			wantError(t, "Content-Type "+c.ct, resp.StatusCode, b, c.want, typeInvalidRequest, "", "unsupported_media_type")
			if !strings.Contains(string(b), "application/json") {
				t.Errorf("415 does not say what to send: %s", b)
			}
		} else if resp.StatusCode != c.want {
			t.Errorf("Content-Type %q: %d %s", c.ct, resp.StatusCode, b)
		}
	}
}

// TestLongModelNameNotEchoed: an unknown model's name is quoted shortened.
func TestLongModelNameNotEchoed(t *testing.T) {
	e := start(t, nil)
	name := strings.Repeat("m", 10000)
	code, b := e.do(http.MethodPost, "/v1/completions", map[string]any{"model": name, "prompt": "hi"})
	wantError(t, "long model name", code, b, http.StatusNotFound, typeInvalidRequest, "model", "model_not_found")
	if len(b) > 400 || !strings.Contains(string(b), "10000 bytes") {
		t.Fatalf("error of %d bytes: %s", len(b), b)
	}
}

// TestLongStopStreams: a long stop string does not hold the stream's text
// back to its end.
func TestLongStopStreams(t *testing.T) {
	e := start(t, nil)
	resp := e.openStream(context.Background(), "/v1/completions", map[string]any{"prompt": "go", "stream": true,
		"max_tokens": 64, "stop": strings.Repeat("x", 1000)})
	defer resp.Body.Close()
	texts := 0
	evs, err := readEvents(resp.Body, func(ev event) bool {
		var c completionResponse
		if json.Unmarshal([]byte(ev.data), &c) == nil && len(c.Choices) == 1 && c.Choices[0].Text != "" {
			texts++
		}
		return true
	})
	if err != nil || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream: %v", err)
	}
	if texts < 32 {
		t.Fatalf("%d text events for 64 tokens: the text was held back", texts)
	}
}
