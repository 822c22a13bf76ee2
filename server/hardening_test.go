package server

import (
	"bufio"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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

// holdStreams opens n long streams (busy connections, never closed to make
// room) and returns what ends them.
func holdStreams(t *testing.T, e *env, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	for i := range n {
		resp := e.openStream(ctx, "/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 30000,
			"messages": []map[string]string{{"role": "user", "content": "held " + strconv.Itoa(i)}}})
		t.Cleanup(func() { resp.Body.Close() })
	}
	return cancel
}

// TestConnectionCap: past the connection cap, with every connection busy,
// /health still answers, other requests get 503, and the cap's connections
// are counted in /metrics.
func TestConnectionCap(t *testing.T) {
	e := start(t, func(c *config.Config) { c.MaxConnections = 3 })
	defer holdStreams(t, e, 3)()
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
	defer holdStreams(t, e, 1)()
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

// TestUnsentBodyIsBounded: a request that declares a body and never sends
// it is answered (at once, unless the answer needs the body) and its
// connection closed within the body timeout, whatever answers it: a
// routed POST (408), a refusal for the key (401), no route (404), the
// wrong method (405), the wrong body type (415), the CORS preflight, and
// handlers that read no body.
func TestUnsentBodyIsBounded(t *testing.T) {
	const bodyTimeout = 500 * time.Millisecond
	e := start(t, func(c *config.Config) {
		c.BodyTimeout = bodyTimeout
		c.APIKey = "sekret"
		c.CORSOrigins = []string{"https://app.example"}
	})
	const key, js = "Authorization: Bearer sekret\r\n", "Content-Type: application/json\r\n"
	for _, c := range []struct {
		name, head string
		status     int
		prompt     bool // answered before the body timeout
	}{
		{"routed POST", "POST /v1/chat/completions HTTP/1.1\r\n" + key + js, http.StatusRequestTimeout, false},
		{"401", "POST /v1/chat/completions HTTP/1.1\r\n" + js, http.StatusUnauthorized, true},
		{"404", "POST /nowhere HTTP/1.1\r\n" + key + js, http.StatusNotFound, true},
		{"405", "GET /v1/chat/completions HTTP/1.1\r\n" + key, http.StatusMethodNotAllowed, true},
		{"415", "POST /v1/completions HTTP/1.1\r\n" + key + "Content-Type: text/plain\r\n", http.StatusUnsupportedMediaType, true},
		{"OPTIONS", "OPTIONS /v1/chat/completions HTTP/1.1\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n", http.StatusNoContent, true},
		{"GET with a body", "GET /v1/models HTTP/1.1\r\n" + key, http.StatusOK, true},
		{"health with a body", "GET /health HTTP/1.1\r\n", http.StatusOK, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t0 := time.Now()
			conn := rawRequest(t, e, c.head+"Host: x\r\nContent-Length: 100\r\n\r\n")
			_ = conn.SetReadDeadline(t0.Add(bodyTimeout + 5*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered := time.Since(t0)
			if resp.StatusCode != c.status || (c.prompt && answered > bodyTimeout*4/5) {
				t.Fatalf("%d after %v, want %d (at once: %v)", resp.StatusCode, answered, c.status, c.prompt)
			}
			if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("connection still open: %v", err)
			}
			// A second's allowance for a loaded machine; without the
			// deadline the connection stays open for good.
			if d := time.Since(t0); d > bodyTimeout+time.Second {
				t.Fatalf("closed after %v, body timeout %v", d, bodyTimeout)
			}
		})
	}
}

// TestBodyDeadlineSparesStreams: the body deadline ends with the body: a
// stream that outlasts it by far runs to its end, and the connection's
// next request is served.
func TestBodyDeadlineSparesStreams(t *testing.T) {
	const bodyTimeout = 150 * time.Millisecond
	e := start(t, func(c *config.Config) { c.BodyTimeout = bodyTimeout })
	t0 := time.Now()
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 60,
		"messages": []map[string]string{{"role": "user", "content": "take your time"}}})
	evs, err := readEvents(resp.Body, nil)
	resp.Body.Close()
	if err != nil || len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream: %d events, %v", len(evs), err)
	}
	if d := time.Since(t0); d < 3*bodyTimeout {
		t.Fatalf("the stream took %v: too short to outlast the body deadline", d)
	}
	time.Sleep(2 * bodyTimeout) // the kept-alive connection idles past it
	stillServes(t, e, "a stream longer than the body timeout")
}

// TestIdleAndHeaderReadsBounded: a connection that sends nothing, one that
// never finishes its headers and one idle after a request are all closed
// within their timeouts.
func TestIdleAndHeaderReadsBounded(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := start(t, func(c *config.Config) { c.ReadHeaderTimeout, c.IdleTimeout = timeout, timeout })
	closedWithin := func(name string, c net.Conn, r io.Reader, t0 time.Time) {
		t.Helper()
		_ = c.SetReadDeadline(t0.Add(timeout + 5*time.Second))
		if _, err := io.Copy(io.Discard, r); err != nil && !isReset(err) {
			t.Errorf("%s: %v", name, err)
		}
		if d := time.Since(t0); d > timeout+time.Second {
			t.Errorf("%s: closed after %v, timeout %v", name, d, timeout)
		}
	}
	t0 := time.Now()
	silent := rawRequest(t, e, "")
	partial := rawRequest(t, e, "GET /health HTTP/1.1\r\nHost: x\r\n")
	closedWithin("silent", silent, silent, t0)
	closedWithin("headers never finished", partial, partial, t0)
	idle := rawRequest(t, e, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(idle)
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	closedWithin("idle after a request", idle, br, time.Now())
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

// fakeConn is a connection the limit listener can track and close.
type fakeConn struct {
	net.Conn
	addr   *net.TCPAddr
	closed atomic.Bool
}

// RemoteAddr is the client's address.
func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }

// Close notes that the connection was closed.
func (c *fakeConn) Close() error { c.closed.Store(true); return nil }

// newFake is a connection from ip.
func newFake(ip string) *fakeConn {
	return &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
}

// TestEvictionPolicy follows the listener through its rules: per client,
// the oldest waiting connection makes room; at the cap, the oldest waiting
// connection of all; busy connections never; with every connection busy,
// none is admitted (the reserved lane takes it).
func TestEvictionPolicy(t *testing.T) {
	l := &limitListener{max: 4, perClient: 2, clients: map[netip.Addr]*list.List{}}
	admit := func(c *fakeConn) *trackedConn {
		t.Helper()
		tc := l.admit(c)
		if tc == nil {
			t.Fatalf("%v not admitted", c.addr)
		}
		return tc
	}
	a1, a2, a3 := newFake("10.0.0.1"), newFake("10.0.0.1"), newFake("::ffff:10.0.0.1")
	admit(a1)
	ta2 := admit(a2)
	ta3 := admit(a3) // a third waiting from 10.0.0.1: a1 makes room
	if !a1.closed.Load() || a2.closed.Load() {
		t.Fatalf("per client: closed a1 %v a2 %v, want a1 only", a1.closed.Load(), a2.closed.Load())
	}
	b1, b2, c1 := newFake("10.0.0.2"), newFake("10.0.0.2"), newFake("10.0.0.3")
	tb1, tb2 := admit(b1), admit(b2)
	ta2.setBusy()
	tc1 := admit(c1) // at the cap: the oldest waiting (a3, a2 being busy) makes room
	if !a3.closed.Load() || a2.closed.Load() || l.open.Load() != 4 {
		t.Fatalf("at the cap: closed a2 %v a3 %v, %d open", a2.closed.Load(), a3.closed.Load(), l.open.Load())
	}
	for _, tc := range []*trackedConn{tb1, tb2, tc1} {
		tc.setBusy()
	}
	if l.admit(newFake("10.0.0.4")) != nil {
		t.Fatal("admitted with every connection busy")
	}
	l.connState(ta2, http.StateIdle) // a2 waits again, the only one
	d1 := newFake("10.0.0.4")
	admit(d1)
	if !a2.closed.Load() || l.evictions() != 3 {
		t.Fatalf("a2 idle: closed %v, %d evictions", a2.closed.Load(), l.evictions())
	}
	// Turning idle past the bound closes the address's oldest waiting one.
	l.connState(tb1, http.StateIdle)
	b3 := newFake("10.0.0.2")
	admit(b3) // closes d1 (the oldest waiting) at the cap
	l.connState(tb2, http.StateIdle)
	if !d1.closed.Load() || !b1.closed.Load() || b3.closed.Load() || b2.closed.Load() {
		t.Fatalf("idle past the bound: closed d1 %v b1 %v b2 %v b3 %v, want d1 and b1", d1.closed.Load(), b1.closed.Load(), b2.closed.Load(), b3.closed.Load())
	}
	_ = ta3.Close() // closed already: no double count
	tc1.Close()
	if n, _ := l.waitingConns(); l.open.Load() != 2 || n != 2 {
		t.Fatalf("%d open, %d waiting; want b2 and b3 waiting", l.open.Load(), n)
	}
}

// flood opens n connections to e that each hold a request half-sent, in
// turn: nothing at all, headers cut short, headers declaring a body that
// never comes (a routed POST, and a GET).
func flood(t *testing.T, e *env, n int) {
	t.Helper()
	heads := []string{"", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
		postHead("/v1/chat/completions", 100), "GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"}
	for i := range n {
		rawRequest(t, e, heads[i%len(heads)])
	}
}

// TestHalfOpenFloodStillServes: a few hundred half-sent connections from
// the client's own address, past the per-client bound and the cap, keep
// neither a normal request from being served promptly nor a stream in
// progress from finishing.
func TestHalfOpenFloodStillServes(t *testing.T) {
	const capConns, perClient, n = 64, 16, 400
	e := start(t, func(c *config.Config) { c.MaxConnections, c.MaxConnsPerClient = capConns, perClient })
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 100,
		"messages": []map[string]string{{"role": "user", "content": "through the flood"}}})
	streamed := make(chan []event, 1)
	go func() {
		defer resp.Body.Close()
		evs, _ := readEvents(resp.Body, nil)
		streamed <- evs
	}()
	flood(t, e, n)
	fresh := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions",
			strings.NewReader(`{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		r, err := fresh.Do(req)
		if err != nil {
			t.Fatalf("request %d after %d half-sent connections: %v", i, n, err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
		t.Logf("request %d served in %v", i, time.Since(t0))
		flood(t, e, perClient) // and newer ones keep arriving
	}
	l := e.s.conns.Load()
	waiting, _ := l.waitingConns()
	if open := l.open.Load(); open > capConns || waiting > perClient || l.evictions() < n-capConns {
		t.Fatalf("%d open, %d waiting, %d evicted", open, waiting, l.evictions())
	}
	wantDone(t, "the stream across the flood", testkit.Receive(t, streamed, 20*time.Second))
}

// wantDone checks that a stream ended normally.
func wantDone(t *testing.T, name string, evs []event) {
	t.Helper()
	if len(evs) < 2 || evs[len(evs)-1].data != "[DONE]" || strings.Contains(evs[len(evs)-2].data, `"error"`) {
		t.Fatalf("%s: %d events, did not end normally", name, len(evs))
	}
}

// BenchmarkAdmitAtCap admits connections to a main lane full of waiting
// ones, each admission closing one: the cost does not grow with the number
// of connections, whether they come from many addresses or one.
func BenchmarkAdmitAtCap(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		for _, addrs := range []int{1, 1000} {
			b.Run(fmt.Sprintf("conns=%d/addrs=%d", n, addrs), func(b *testing.B) {
				l := &limitListener{max: int64(n), perClient: n / 4, clients: map[netip.Addr]*list.List{}}
				fake := func(i int) *fakeConn {
					a := i % addrs
					return &fakeConn{addr: &net.TCPAddr{IP: net.IPv4(10, 1, byte(a>>8), byte(a)), Port: 1024 + i%60000}}
				}
				for i := range n {
					l.admit(fake(i))
				}
				b.ReportAllocs()
				i := n
				for b.Loop() {
					if l.admit(fake(i)) == nil {
						b.Fatal("not admitted")
					}
					i++
				}
			})
		}
	}
}

// floodEnv names the environment of TestFloodScale and its children.
const (
	floodConnsEnv = "TOKENROUTER_FLOOD_CONNS"
	floodAddrEnv  = "TOKENROUTER_FLOOD_ADDR"
	floodPerChild = 10000
)

// TestFloodScale is the flood at scale, a measurement to run by hand: with
// TOKENROUTER_FLOOD_CONNS=20000 it opens that many half-sent connections
// from loopback against a server with the default limits (in child
// processes of this test binary, at most 10,000 each, within their
// descriptor limits), and checks that normal chat requests, from loopback
// too and one connection each, are served within 1 s all along, during
// the flood and after it:
//
//	TOKENROUTER_FLOOD_CONNS=20000 go test ./server/ -run TestFloodScale -v -timeout 5m
func TestFloodScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(floodConnsEnv))
	if n <= 0 {
		t.Skip("a measurement: set " + floodConnsEnv + " to run it")
	}
	e := start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lat := make(chan []time.Duration, 1)
	go func() { lat <- probeUntil(ctx, e.url) }()
	t0 := time.Now()
	children := 0
	opened := make(chan string, n/floodPerChild+1)
	for left := n; left > 0; left -= floodPerChild {
		floodChild(t, e, min(left, floodPerChild), opened)
		children++
	}
	for range children {
		t.Log(testkit.Receive(t, opened, 5*time.Minute))
	}
	t.Logf("%d connections opened in %v", n, time.Since(t0))
	time.Sleep(3 * time.Second) // served after the flood, too
	l := e.s.conns.Load()
	waiting, clients := l.waitingConns()
	t.Logf("main lane: %d open (cap %d), %d waiting from %d addresses (bound %d), %d evicted; reserved lane dropped %d",
		l.open.Load(), l.max, waiting, clients, l.perClient, l.evictions(), l.dropped.Load())
	cancel()
	ds := testkit.Receive(t, lat, 10*time.Second)
	if len(ds) == 0 {
		t.Fatal("no request measured")
	}
	slices.Sort(ds)
	t.Logf("%d normal requests: median %v, p99 %v, max %v; the server process's peak RSS %d MiB (the flood's clients are other processes)",
		len(ds), ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1], testkit.PeakRSS(0)>>20)
	if ds[len(ds)-1] > time.Second {
		t.Fatalf("a normal request took %v", ds[len(ds)-1])
	}
}

// probeUntil sends a small chat request on a fresh connection every 50 ms
// until ctx ends and returns how long each took (a failure, or a status
// other than 200, counts as a minute).
func probeUntil(ctx context.Context, url string) []time.Duration {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var ds []time.Duration
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ds
		case <-tick.C:
		}
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		d := time.Minute
		if r, err := c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				d = time.Since(t0)
			}
		}
		ds = append(ds, d)
	}
}

// floodChild starts a child process that opens n half-sent connections to
// e, reports on opened, and holds them until the test ends.
func floodChild(t *testing.T, e *env, n int, opened chan<- string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodChild$")
	cmd.Env = append(os.Environ(), floodConnsEnv+"="+strconv.Itoa(n), floodAddrEnv+"="+strings.TrimPrefix(e.url, "http://"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "flood: "); ok {
				opened <- line
			}
		}
	}()
}

// TestFloodChild is TestFloodScale's child: it opens the connections and
// holds them until its standard input closes.
func TestFloodChild(t *testing.T) {
	addr := os.Getenv(floodAddrEnv)
	n, _ := strconv.Atoi(os.Getenv(floodConnsEnv))
	if addr == "" || n <= 0 {
		t.Skip("TestFloodScale's child process")
	}
	heads := []string{"", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
		postHead("/v1/chat/completions", 100), "GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	t0 := time.Now()
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, heads[i%len(heads)]) // may fail once the server closed it
	}
	fmt.Printf("flood: %d connections opened in %v\n", n, time.Since(t0))
	_, _ = io.Copy(io.Discard, os.Stdin)
}
