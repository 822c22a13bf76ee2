package server

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// TestPlacement serves the real tiny pair under each placement: auto
// measures and says what it chose, and time-shared serves.
func TestPlacement(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "config", "testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.Buffer
	e := startWith(t, func(c *config.Config) {
		c.Models, c.Presets = cfg.Models, cfg.Presets[2:]
		shared := c.Presets[0]
		shared.Name, shared.Placement = "tiny-shared", config.TimeShared
		c.Presets = append(c.Presets, shared)
	}, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if !strings.Contains(log.String(), "msg=placement preset=tiny-r2r chose=") ||
		!strings.Contains(log.String(), "one decode step of each model") || strings.Contains(log.String(), "preset=tiny-shared") {
		t.Fatalf("log:\n%s", log.String())
	}
	for _, model := range []string{"tiny-r2r", "tiny-shared"} {
		var r completionResponse
		e.post("/v1/completions", map[string]any{"model": model, "max_tokens": 20, "prompt": "Once upon a time", "ignore_eos": true}, &r)
		if r.Usage.CompletionTokens != 20 {
			t.Fatalf("%s: %+v", model, r.Usage)
		}
	}
	// A gated engine still reports its KV blocks.
	if body := lintMetrics(t, e); !strings.Contains(body, `tokenrouter_model_kv_blocks{model="stories",preset="tiny-shared"}`) {
		t.Errorf("metrics lack the KV blocks of the time-shared engines")
	}
	waitIdle(t, e.s)
}
