//go:build unix

package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// probe is one sample of a GET: when, and its status code (0: no answer).
type probe struct {
	at   time.Time
	code int
	body string
}

// status GETs path and returns the status code and body (0 on error).
func (f *front) status(ctx context.Context, path string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sampler records the status of a path every interval until stopped.
type sampler struct {
	mu      sync.Mutex
	samples []probe
	stop    context.CancelFunc
	done    chan struct{}
}

func (f *front) sample(path string, every time.Duration) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			code, body := f.status(ctx, path)
			if ctx.Err() != nil {
				return // a probe cut short by finish is not a sample
			}
			s.mu.Lock()
			s.samples = append(s.samples, probe{at: time.Now(), code: code, body: body})
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns its samples.
func (s *sampler) finish() []probe {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// TestServeProcessesSIGSTOP freezes the large model's child with SIGSTOP
// under a live stream: the stream ends with a clear error, /ready turns
// false while /health stays up and says degraded, the supervisor kills
// the frozen child and starts a replacement, which serves requests; then
// /ready is true again and /metrics counts one restart.
func TestServeProcessesSIGSTOP(t *testing.T) {
	f := startFront(t, clusterDeploy{processes: true})
	defer f.shutdown(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testkit.Eventually(t, 20*time.Second, func() bool { c, _ := f.status(ctx, "/ready"); return c == http.StatusOK }, "/ready")

	first := make(chan struct{}, 1)
	type outcome struct {
		res chatResult
		err error
		at  time.Time
	}
	streamDone := make(chan outcome, 1)
	go func() {
		var once sync.Once
		res, err := f.chat(ctx, true, 20000, func() { once.Do(func() { first <- struct{}{} }) })
		streamDone <- outcome{res, err, time.Now()}
	}()
	testkit.Receive(t, first, 20*time.Second)
	before, _ := f.log.pids()
	victim := before["llm"]
	ready := f.sample("/ready", 20*time.Millisecond)
	health := f.sample("/health", 100*time.Millisecond)
	stopped := time.Now()
	if err := syscall.Kill(victim, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(victim, syscall.SIGCONT) }() // in case the test fails before the kill

	o := testkit.Receive(t, streamDone, 20*time.Second)
	if o.err != nil || !strings.HasPrefix(o.res.errEvent, "service_unavailable: ") || !strings.Contains(o.res.errEvent, "missed") || !o.res.done {
		t.Fatalf("the stream on the frozen child: want an error event saying it missed its heartbeats, got %+v, %v", o.res, o.err)
	}
	var served time.Time
	testkit.Eventually(t, 20*time.Second, func() bool {
		res, err := f.chat(ctx, false, 16, nil)
		served = time.Now()
		return err == nil && res.status == http.StatusOK && res.byModel["llm"] > 0
	}, "a replacement llm child to serve")
	testkit.Eventually(t, 5*time.Second, func() bool { c, _ := f.status(ctx, "/ready"); return c == http.StatusOK }, "/ready after the restart")
	samples, hs := ready.finish(), health.finish()

	// /ready: 200 until the miss was seen, 503 until the replacement
	// joined, 200 from then on.
	var notReady, readyAgain time.Time
	for _, p := range samples {
		switch {
		case p.code == http.StatusServiceUnavailable && notReady.IsZero():
			notReady = p.at
		case p.code == http.StatusOK && !notReady.IsZero() && readyAgain.IsZero():
			readyAgain = p.at
		case p.code == http.StatusServiceUnavailable && !readyAgain.IsZero():
			t.Errorf("/ready false again at %v after the restart", p.at.Sub(stopped))
		case p.code != http.StatusOK && p.code != http.StatusServiceUnavailable:
			t.Errorf("/ready: %d %s", p.code, p.body)
		}
	}
	if notReady.IsZero() || readyAgain.IsZero() {
		t.Fatalf("/ready never went false and back: %d samples", len(samples))
	}
	degraded := false
	for _, p := range hs {
		if p.code != http.StatusOK {
			t.Errorf("/health answered %d %s while a child was replaced", p.code, p.body)
		}
		degraded = degraded || strings.Contains(p.body, `"degraded"`)
	}
	if !degraded {
		t.Error("/health never said degraded while the child was down")
	}
	after, _ := f.log.pids()
	if after["llm"] == victim || alive(victim) || !alive(after["llm"]) || after["slm"] != before["slm"] {
		t.Fatalf("children before %v, after %v (the frozen one alive: %v)", before, after, alive(victim))
	}
	body := f.get(t, "/metrics")
	if metricValue(body, "tokenrouter_model_restarts_total", "llm") != 1 || metricValue(body, "tokenrouter_model_restarts_total", "slm") != 0 ||
		metricValue(body, "tokenrouter_model_up", "llm") != 1 {
		t.Errorf("metrics: restarts llm %v slm %v, up llm %v", metricValue(body, "tokenrouter_model_restarts_total", "llm"),
			metricValue(body, "tokenrouter_model_restarts_total", "slm"), metricValue(body, "tokenrouter_model_up", "llm"))
	}
	t.Logf("SIGSTOP: stream failed after %v; /ready false after %v, true again after %v; replacement served a request %v after the SIGSTOP",
		o.at.Sub(stopped).Round(time.Millisecond), notReady.Sub(stopped).Round(time.Millisecond),
		readyAgain.Sub(stopped).Round(time.Millisecond), served.Sub(stopped).Round(time.Millisecond))
}
