package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/faults"
)

// TestServeProcessesFailureBoundary: with sub-servers in child processes,
// a routing decision that panics and an engine step that panics fail
// their request only (500 internal_error, or an error event then [DONE]
// when streamed) and restart no process; an engine step that never
// returns is found by the stall watchdog from the heartbeats: its request
// ends with 503, the stuck child is killed and restarted, and the
// deployment serves again. Normal requests are answered throughout.
func TestServeProcessesFailureBoundary(t *testing.T) {
	t.Setenv(faults.Env, "route-panic=666,step-panic=667,step-hang=668")
	f := startFrontWith(t, clusterDeploy{processes: true}, func(c *config.Config) {
		c.StallTimeout = 1500 * time.Millisecond
		c.Presets[0].Thresholds = "1"
	})
	defer f.shutdown(t)
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the deployment to serve", func() bool {
		res, err := f.chat(ctx, false, 8, nil)
		return err == nil && res.status == http.StatusOK
	})
	before, _ := f.log.pids()
	seed := func(n int) map[string]any { return map[string]any{"seed": n} }

	res, err := f.chatWith(ctx, false, 16, seed(666), nil)
	if err != nil || res.status != http.StatusInternalServerError || !strings.Contains(res.body, "internal_error") ||
		!strings.Contains(res.body, "panic in route") {
		t.Fatalf("a request whose routing panics: %+v, %v; want 500 internal_error naming the panic", res, err)
	}
	res, err = f.chatWith(ctx, true, 16, seed(666), nil)
	if err != nil || !strings.Contains(res.errEvent, "internal_error") || !res.done {
		t.Fatalf("a streamed request whose routing panics: %+v, %v; want an error event then [DONE]", res, err)
	}
	res, err = f.chatWith(ctx, false, 16, seed(667), nil)
	if err != nil || res.status != http.StatusInternalServerError || !strings.Contains(res.body, "panic in engine") {
		t.Fatalf("a request whose engine step panics: %+v, %v; want 500 naming the engine's panic", res, err)
	}
	res, err = f.chat(ctx, false, 32, nil)
	bothModels(t, "after the panics", res, err)
	if after, _ := f.log.pids(); after["slm"] != before["slm"] || after["llm"] != before["llm"] {
		t.Fatalf("children %v became %v: a panic restarted a process", before, after)
	}
	if m := f.get(t, "/metrics"); metricValue(m, "tokenrouter_model_panics_total", "slm")+
		metricValue(m, "tokenrouter_model_panics_total", "llm") < 3 {
		t.Errorf("panics counted: slm %v, llm %v; want 3 or more in all", metricValue(m, "tokenrouter_model_panics_total", "slm"),
			metricValue(m, "tokenrouter_model_panics_total", "llm"))
	}

	start := time.Now()
	res, err = f.chatWith(ctx, false, 16, seed(668), nil)
	if err != nil || res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "stalled") {
		t.Fatalf("a request whose engine step hangs: %+v, %v; want 503 naming the stall", res, err)
	}
	t.Logf("the hung request ended after %v", time.Since(start).Round(time.Millisecond))
	waitFor(t, 30*time.Second, "the stalled child to be replaced and serve", func() bool {
		res, err := f.chat(ctx, false, 8, nil)
		return err == nil && res.status == http.StatusOK
	})
	after, _ := f.log.pids()
	if after["slm"] == before["slm"] && after["llm"] == before["llm"] {
		t.Fatalf("children %v: the stalled one was not restarted", after)
	}
	res, err = f.chat(ctx, false, 32, nil)
	bothModels(t, "after the stall", res, err)
}
