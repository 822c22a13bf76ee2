package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// TestCancelOnDisconnect disconnects clients mid-stream: each request must
// be cancelled in every sub-server, wherever it is (running, waiting, or
// pending on the peer), and its KV freed — the counts return to zero.
func TestCancelOnDisconnect(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Presets[0].Params = map[string]string{"p": "0.5"} })
	const clients = 8
	var wg sync.WaitGroup
	ready := make(chan struct{}, clients)
	ctxs := make([]context.CancelFunc, clients)
	for i := range clients {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		resp := e.openStream(ctx, "/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 30000,
			"messages": []map[string]string{{"role": "user", "content": "go on " + strconv.Itoa(i)}}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			n := 0
			_, _ = readEvents(resp.Body, func(event) bool {
				if n++; n == 4+i {
					ready <- struct{}{}
				}
				return true
			})
		}()
	}
	for range clients {
		<-ready
	}
	// Mid-stream: requests hold KV on both models.
	kv := 0
	for _, sub := range e.s.deps[0].r.SubServers() {
		kv += sub.Stats().KVSequences
	}
	if kv < clients {
		t.Fatalf("only %d KV sequences for %d streaming requests", kv, clients)
	}
	for i, cancel := range ctxs {
		cancel()
		if i%2 == 0 {
			time.Sleep(7 * time.Millisecond) // deliberate: disconnect at different steps
		}
	}
	wg.Wait()
	waitIdle(t, e.s)
	if got := e.s.deps[0].r.Active(); got != 0 {
		t.Fatalf("%d requests still active", got)
	}
	// Each disconnect is counted as an aborted request.
	testkit.Until(t, 5*time.Second, func() error {
		_, b := e.do(http.MethodGet, "/metrics", nil)
		want := fmt.Sprintf(`tokenrouter_requests_aborted_total{preset="r2r-random",reason="client_disconnected"} %d`, clients)
		if !strings.Contains(string(b), want+"\n") {
			return fmt.Errorf("metrics lack %s", want)
		}
		return nil
	})
	stillServes(t, e, "disconnects")
}

// TestGracefulShutdown stops the server while a stream is in flight: the
// stream completes, new connections are refused, Serve returns.
func TestGracefulShutdown(t *testing.T) {
	e := start(t, nil)
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 40,
		"messages": []map[string]string{{"role": "user", "content": "finish me"}}})
	defer resp.Body.Close()
	var content int
	stopped := false
	evs, err := readEvents(resp.Body, func(ev event) bool {
		var c chatResponse
		if json.Unmarshal([]byte(ev.data), &c) == nil && len(c.Choices) == 1 && c.Choices[0].Delta.Content != nil && *c.Choices[0].Delta.Content != "" {
			content++
		}
		if content == 2 && !stopped {
			stopped = true
			e.stop() // SIGTERM in the command
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !stopped || content != 40 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream after shutdown began: %d content chunks, last %q", content, evs[len(evs)-1].data)
	}
	e.shutdown()
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.url, "http://"), time.Second); err == nil {
		c.Close()
		t.Fatal("still accepting connections after shutdown")
	}
	waitIdle(t, e.s)
}

// TestShutdownTimeout: requests that outlive the shutdown timeout are
// cancelled everywhere, a stream ends with a server_shutdown error event
// and [DONE], and Serve returns.
func TestShutdownTimeout(t *testing.T) {
	e := start(t, func(c *config.Config) { c.ShutdownTimeout = 200 * time.Millisecond })
	resp := e.openStream(context.Background(), "/generate", map[string]any{"text": "forever", "stream": true,
		"sampling_params": map[string]any{"max_new_tokens": 30000}})
	defer resp.Body.Close()
	done := make(chan []event, 1)
	streaming := make(chan struct{}, 1)
	go func() {
		evs, _ := readEvents(resp.Body, func(event) bool {
			select {
			case streaming <- struct{}{}:
			default:
			}
			return true
		})
		done <- evs
	}()
	testkit.Receive(t, streaming, 10*time.Second) // the request runs
	t0 := time.Now()
	e.shutdown()
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("shutdown took %v with a 200ms timeout", d)
	}
	wantShutdownTail(t, "/generate", testkit.Receive(t, done, 10*time.Second))
	waitIdle(t, e.s)
}

// wantShutdownTail checks that a stream the shutdown cut off ended with an
// error event of type and code server_shutdown, then [DONE].
func wantShutdownTail(t *testing.T, name string, evs []event) {
	t.Helper()
	if len(evs) < 3 || evs[len(evs)-1].data != "[DONE]" {
		last := ""
		if len(evs) > 0 {
			last = evs[len(evs)-1].data
		}
		t.Errorf("%s: %d events, the last %q: want an error event and [DONE]", name, len(evs), last)
		return
	}
	var eb errorBody
	if err := json.Unmarshal([]byte(evs[len(evs)-2].data), &eb); err != nil || eb.Error.Type != typeShutdown ||
		eb.Error.Code == nil || *eb.Error.Code != typeShutdown || eb.Error.Message == "" {
		t.Errorf("%s: before [DONE]: %s (%v), want a server_shutdown error", name, evs[len(evs)-2].data, err)
	}
}

// TestShutdownTellsClients: when the shutdown timeout cuts requests off,
// every stream (chat, completions, native, n = 2) ends with a
// server_shutdown error event and [DONE], and a request not streamed gets
// 503 with Retry-After; a request arriving during the drain gets 503 with
// Retry-After too.
func TestShutdownTellsClients(t *testing.T) {
	e := start(t, func(c *config.Config) { c.ShutdownTimeout = 600 * time.Millisecond })
	msgs := []map[string]string{{"role": "user", "content": "go on"}}
	streams := []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 30000, "messages": msgs}},
		{"/v1/chat/completions", map[string]any{"stream": true, "max_tokens": 30000, "n": 2, "messages": msgs}},
		{"/v1/completions", map[string]any{"stream": true, "max_tokens": 30000, "prompt": "go on"}},
		{"/generate", map[string]any{"stream": true, "text": "go on", "sampling_params": map[string]any{"max_new_tokens": 30000}}},
	}
	tails := make(chan []event, len(streams))
	for _, st := range streams {
		resp := e.openStream(context.Background(), st.path, st.body)
		go func() {
			defer resp.Body.Close()
			evs, _ := readEvents(resp.Body, nil)
			tails <- evs
		}()
	}
	plain := postAsync(e, "/v1/chat/completions", `{"max_tokens":30000,"messages":[{"role":"user","content":"long"}]}`)
	// Five generations (n = 2 counts twice) and the plain request.
	testkit.Eventually(t, 10*time.Second, func() bool { return e.s.inFlight.Load() == 6 }, "every request in flight")
	e.stop()
	testkit.Eventually(t, 10*time.Second, e.s.draining.Load, "draining")
	late := testkit.Receive(t, postAsync(e, "/v1/completions", `{"prompt":"late","max_tokens":2}`), 10*time.Second)
	wantError(t, "during the drain", late.code, late.body, http.StatusServiceUnavailable, typeServer, "", "service_unavailable")
	if late.retry == "" {
		t.Errorf("503 during the drain without Retry-After")
	}
	e.shutdown()
	for range streams {
		wantShutdownTail(t, "stream", testkit.Receive(t, tails, 10*time.Second))
	}
	a := testkit.Receive(t, plain, 10*time.Second)
	wantError(t, "in flight, not streamed", a.code, a.body, http.StatusServiceUnavailable, typeShutdown, "", typeShutdown)
	if a.retry == "" {
		t.Errorf("503 at the shutdown without Retry-After")
	}
	waitIdle(t, e.s)
}

// answer is a response's status, Retry-After and body (or the error in
// body, status 0).
type answer struct {
	code  int
	retry string
	body  []byte
}

// postAsync posts a JSON body and delivers the answer.
func postAsync(e *env, path, body string) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			out <- answer{body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), b}
	}()
	return out
}

// TestCurlStreaming runs the real curl against a listening server: chunks
// must arrive one by one, spread over time, and end with [DONE].
func TestCurlStreaming(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: skipping the curl streaming check")
	}
	e := start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 24
	cmd := exec.CommandContext(ctx, curl, "-sS", "-N", e.url+"/v1/chat/completions",
		"-H", "Content-Type: application/json",
		"-d", `{"model":"r2r-random","messages":[{"role":"user","content":"Tell me a story"}],"stream":true,"max_tokens":`+strconv.Itoa(n)+`}`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []event
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, event{data: l, at: time.Now()})
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("curl: %v", err)
	}
	if len(lines) != n+3 || lines[len(lines)-1].data != "data: [DONE]" {
		t.Fatalf("curl printed %d lines, last %q; want %d chunks and [DONE]", len(lines), lines[len(lines)-1].data, n+3)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l.data, "data: ") {
			t.Fatalf("line %q", l.data)
		}
	}
	// One token per content chunk, 6 ms or more apart (27.9 ms when the large
	// model produced it): arrival times must spread over the whole output.
	content := lines[1 : n+1]
	span := content[len(content)-1].at.Sub(content[0].at)
	distinct := 1
	for i := 1; i < len(content); i++ {
		if content[i].at.Sub(content[i-1].at) >= 2*time.Millisecond {
			distinct++
		}
	}
	t.Logf("curl: %d content chunks over %v, %d of them ≥2ms after the previous", len(content), span, distinct)
	if span < time.Duration(n-1)*5*time.Millisecond || distinct < n*3/4 {
		t.Fatalf("chunks did not arrive one by one: span %v, %d of %d spread", span, distinct, n)
	}
}
