package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadEnv gates the full load test: TOKENROUTER_LOAD=1 runs 500 concurrent
// streams (or TOKENROUTER_LOAD=N runs N). TOKENROUTER_LOAD_URL points it at
// a server already running (e.g. "tokenrouter serve --engine sim" under /usr/bin/time -v)
// instead of an in-process one.
const loadEnv = "TOKENROUTER_LOAD"

// TestLoadSmall is the always-on version: 64 concurrent streams.
func TestLoadSmall(t *testing.T) {
	e := start(t, nil)
	loadRun(t, e.url, 64, 16, e.client)
	waitIdle(t, e.s)
}

// TestLoad500 sends 500 concurrent streaming chat requests on loopback to
// the sim default and checks that every one completes with all its tokens
// and [DONE]. It reports the wall time and the peak heap.
func TestLoad500(t *testing.T) {
	v := os.Getenv(loadEnv)
	if v == "" {
		t.Skip(loadEnv + "=1 runs the 500-stream load test")
	}
	n := 500
	if k, err := strconv.Atoi(v); err == nil && k > 1 {
		n = k
	}
	url := os.Getenv(loadEnv + "_URL")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	var e *env
	if url == "" {
		e = start(t, nil)
		url = e.url
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // sample the heap while the load runs
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse+ms.StackInuse > peak.Load() {
				peak.Store(ms.HeapInuse + ms.StackInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	d := loadRun(t, url, n, 32, client)
	close(stop)
	wg.Wait()
	where := "in-process server and client"
	if e == nil {
		where = "client only (server at " + url + ")"
	}
	t.Logf("%d concurrent streams x 32 tokens: all complete in %v; peak heap+stacks %.1f MiB (%s)", n, d, float64(peak.Load())/(1<<20), where)
	if e != nil {
		waitIdle(t, e.s)
	}
}

// loadRun starts n streaming chat requests at once and checks each.
func loadRun(t *testing.T, url string, n, tokens int, client *http.Client) time.Duration {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "r2r-random", "stream": true, "max_tokens": tokens,
		"messages": []map[string]string{{"role": "user", "content": "load"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		errMu  sync.Mutex
		first  error
	)
	fail := func(err error) {
		failed.Add(1)
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
	}
	begin := make(chan struct{})
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				fail(fmt.Errorf("request %d: %w", i, err))
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				fail(fmt.Errorf("request %d: status %d", i, resp.StatusCode))
				return
			}
			content := 0
			evs, err := readEvents(resp.Body, func(ev event) bool {
				var c chatResponse
				if json.Unmarshal([]byte(ev.data), &c) == nil && len(c.Choices) == 1 && c.Choices[0].Delta != nil &&
					c.Choices[0].Delta.Role == "" && c.Choices[0].Delta.Content != nil && *c.Choices[0].Delta.Content != "" {
					content++
				}
				return true
			})
			if err != nil || len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" || content != tokens {
				fail(fmt.Errorf("request %d: %d content chunks of %d, err %v", i, content, tokens, err))
			}
		}()
	}
	t0 = time.Now()
	close(begin)
	wg.Wait()
	d := time.Since(t0)
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d streams failed; first: %v", f, n, first)
	}
	return d
}
