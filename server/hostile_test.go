package server

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// hostileScaleEnv sets the hostile run's size: unset, a run sized for CI;
// "full", the acceptance run (1,000 hostile schemas):
//
//	TOKENROUTER_HOSTILE=full go test ./server/ -run TestHostileRequestsKeepServing -v -timeout 20m
const hostileScaleEnv = "TOKENROUTER_HOSTILE"

// hostileSchema returns the i-th hostile response_format schema of a
// seeded generator: reference cycles, deep nesting, huge enums, keyword
// soup and malformed JSON.
func hostileSchema(rng *rand.Rand) string {
	nest := func(depth int, open, close string) string {
		return strings.Repeat(open, depth) + `{"type":"string"}` + strings.Repeat(close, depth)
	}
	switch rng.IntN(10) {
	case 0:
		return `{"$ref":"#"}`
	case 1:
		return `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`
	case 2: // a tree: recursion with a base case
		return `{"type":"object","properties":{"name":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["name","kids"]}`
	case 3:
		return nest(1+rng.IntN(20000), `{"type":"array","items":`, `}`)
	case 4:
		return nest(1+rng.IntN(20000), `{"type":"object","properties":{"a":`, `},"required":["a"]}`)
	case 5:
		n := 1 + rng.IntN(50000)
		vals := make([]string, n)
		for i := range vals {
			vals[i] = strconv.Quote(strconv.Itoa(i * 7919))
		}
		return `{"enum":[` + strings.Join(vals, ",") + `]}`
	case 6: // anyOf fan-out of references
		n := 1 + rng.IntN(2000)
		alts := make([]string, n)
		for i := range alts {
			alts[i] = `{"$ref":"#/definitions/d"}`
		}
		return `{"definitions":{"d":{"anyOf":[{"type":"integer"},{"$ref":"#/definitions/d"}]}},"anyOf":[` + strings.Join(alts, ",") + `]}`
	case 7: // keyword soup
		kw := []string{`"type":"number"`, `"minimum":-1e308`, `"maxLength":-5`, `"pattern":"(a+)+$"`, `"$ref":"#/nope"`,
			`"$ref":"http://example.com/s.json"`, `"items":{"$ref":"#/items"}`, `"minItems":1e9`, `"required":[1,2]`,
			`"properties":{"":{"$ref":"#/properties/"}}`, `"format":"uuid"`, `"additionalProperties":{"$ref":"#"}`}
		rng.Shuffle(len(kw), func(i, j int) { kw[i], kw[j] = kw[j], kw[i] })
		return "{" + strings.Join(kw[:1+rng.IntN(len(kw))], ",") + "}"
	case 8: // malformed or truncated JSON
		s := nest(1+rng.IntN(200), `{"type":"array","items":`, `}`)
		return s[:rng.IntN(len(s))]
	default: // mutual recursion through objects and arrays
		return `{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/n"}]}},"required":["v","next"]}},"$ref":"#/$defs/n"}`
	}
}

// prober sends a normal chat request to a preset every interval, each
// with a deadline, and keeps their latencies and failures.
type prober struct {
	mu    sync.Mutex
	lat   []time.Duration
	fails []string
}

func (p *prober) run(ctx context.Context, url, preset string, every, deadline time.Duration) {
	c := &http.Client{Timeout: deadline, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	body := `{"model":"` + preset + `","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t0 := time.Now()
		resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		d := time.Since(t0)
		fail := ""
		if err != nil {
			fail = err.Error()
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail = resp.Status
			}
		}
		p.mu.Lock()
		p.lat = append(p.lat, d)
		if fail != "" {
			p.fails = append(p.fails, fail)
		}
		p.mu.Unlock()
	}
}

func (p *prober) report(t *testing.T) (max time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lat) == 0 {
		t.Fatal("the prober sent nothing")
	}
	ds := slices.Sorted(slices.Values(p.lat))
	t.Logf("normal requests: %d, median %v, p99 %v, max %v, failed %d %v", len(ds), ds[len(ds)/2], ds[len(ds)*99/100],
		ds[len(ds)-1], len(p.fails), p.fails)
	if len(p.fails) > 0 {
		t.Errorf("%d normal requests failed: %v", len(p.fails), p.fails)
	}
	return ds[len(ds)-1]
}

// heapPeak samples the Go heap in use until ctx ends.
func heapPeak(ctx context.Context, peak *atomic.Uint64) {
	var ms runtime.MemStats
	for {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestHostileRequestsKeepServing: while one preset takes hostile schemas
// (cycles, 20,000-deep nesting, 50,000-entry enums, keyword soup, broken
// JSON), a routing decision and an engine step that panic, and an engine
// step that never returns, a normal chat request to another preset is
// answered every 100 ms throughout, and the hostile ones each get an
// answer: a completion, or 400 naming the problem (413 past the body
// limit); the panics 500; the
// hung step 503 once the watchdog finds it, after which its preset serves
// again. Peak memory is logged.
func TestHostileRequestsKeepServing(t *testing.T) {
	schemas, deadline := 120, 10*time.Second
	if os.Getenv(hostileScaleEnv) == "full" {
		schemas, deadline = 1000, time.Second
	}
	inject, _ := faults.Parse("route-panic=666,step-panic=667,step-hang=668,entry-panic=669")
	t.Cleanup(inject.Release)
	e := startWith(t, func(c *config.Config) {
		c.StallTimeout = 2 * time.Second
		c.Presets[0].Thresholds = "1"
		alt := c.Presets[0]
		alt.Name = "alt"
		c.Presets = append(c.Presets, alt)
	}, Options{Faults: inject})
	ctx, cancel := context.WithCancel(context.Background())
	var pr prober
	var peak atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pr.run(ctx, e.url, "alt", 100*time.Millisecond, deadline) }()
	go func() { defer wg.Done(); heapPeak(ctx, &peak) }()

	codes := hostileSchemas(t, e, schemas)
	t.Logf("%d hostile schemas: %v", schemas, codes)
	for _, c := range []struct {
		seed int
		want int
		text string
	}{{666, http.StatusInternalServerError, "panic in route"}, {667, http.StatusInternalServerError, "panic in engine"},
		{669, http.StatusInternalServerError, "panic in the request's handler"},
		{668, http.StatusServiceUnavailable, "stalled"}} {
		t0 := time.Now()
		code, body := e.do(http.MethodPost, "/v1/chat/completions", map[string]any{"seed": c.seed, "max_tokens": 8,
			"messages": []map[string]string{{"role": "user", "content": "hi"}}})
		if code != c.want || !bytes.Contains(body, []byte(c.text)) {
			t.Errorf("seed %d: %d %s, want %d naming %q", c.seed, code, body, c.want, c.text)
		}
		t.Logf("seed %d answered %d after %v", c.seed, code, time.Since(t0).Round(time.Millisecond))
	}
	e.waitServing(t, config.DefaultAlgorithm, 20*time.Second)
	if _, m := e.do(http.MethodGet, "/metrics", nil); !bytes.Contains(m, []byte("tokenrouter_http_panics_total 1\n")) ||
		!bytes.Contains(m, []byte(`tokenrouter_model_engine_restarts_total{model=`)) {
		t.Errorf("the panics are not on /metrics:\n%s", m)
	}
	cancel()
	wg.Wait()
	max := pr.report(t)
	hwm := testkit.PeakRSS(0)
	t.Logf("peak Go heap in use %.1f MiB; process peak RSS %.1f MiB", float64(peak.Load())/(1<<20), float64(hwm)/(1<<20))
	if max > deadline {
		t.Errorf("a normal request took %v (bound %v)", max, deadline)
	}
}

// hostileSchemas sends n hostile schemas, 8 at a time, and returns the
// count of each status; anything but 200, 400 or 413 (a body past
// --max-body-bytes) fails the test.
func hostileSchemas(t *testing.T, e *env, n int) map[int]int {
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rng := rand.New(rand.NewPCG(uint64(i), 42))
				schema := hostileSchema(rng)
				body := `{"max_tokens":16,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema",` +
					`"json_schema":{"name":"x","schema":` + schema + `}}}`
				code, resp := e.do(http.MethodPost, "/v1/chat/completions", body)
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if code != http.StatusOK && code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
					t.Errorf("schema %d (%.80s...): %d %.300s", i, schema, code, resp)
				}
				if code != http.StatusOK && !bytes.Contains(resp, []byte(`"message"`)) {
					t.Errorf("schema %d: %d without a message: %s", i, code, resp)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return codes
}

// waitServing waits until preset answers a normal chat request with 200.
func (e *env) waitServing(t *testing.T, preset string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		code, body := e.do(http.MethodPost, "/v1/chat/completions", map[string]any{"model": preset, "max_tokens": 4,
			"messages": []map[string]string{{"role": "user", "content": "hi"}}})
		if code == http.StatusOK {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("preset %s does not serve again: %d %s", preset, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
