package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/sched"
)

// TestRealModels serves two real TinyStories models with their shared
// tokenizer under r2r-random, through the example configuration file.
func TestRealModels(t *testing.T) {
	models := testmodels.Dir(t)
	cfg, err := config.Load(filepath.Join("..", "config", "testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *config.Config) {
		c.Models, c.Presets = cfg.Models, cfg.Presets[2:]
		c.Models = append(c.Models, config.Model{Name: "gguf", Engine: loader.KindCPU, Path: filepath.Join(models, "stories260K.gguf")})
		c.Presets = append(c.Presets, config.Preset{Name: "gguf-only", Algorithm: "r2r-random", Models: []string{"gguf", "stories"},
			Params: map[string]string{"p": "0"}})
	})
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"model": "tiny-r2r", "max_tokens": 40, "seed": 1,
		"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}}}, &r)
	text := *r.Choices[0].Message.Content
	if r.Usage.CompletionTokens == 0 || len(strings.Fields(text)) < 3 {
		t.Fatalf("real models wrote %q (%+v)", text, r.Usage)
	}
	t.Logf("tiny-r2r: %q routing %+v", text, r.Routing)

	var nr NativeResponse
	e.post("/generate", map[string]any{"model": "gguf-only", "text": "Once upon a time", "sampling_params": map[string]any{"max_new_tokens": 30}}, &nr)
	if !strings.Contains(nr.Text, " ") || nr.Routing.TokensByModel["gguf"] != len(nr.OutputIDs) {
		t.Fatalf("gguf: %q %+v", nr.Text, nr.Routing)
	}
	t.Logf("gguf: %q", nr.Text)
	if body := lintMetrics(t, e); !strings.Contains(body, `tokenrouter_model_kv_blocks{model="gguf",preset="gguf-only"}`) {
		t.Errorf("metrics lack the KV blocks of the cpu engine")
	}
	d, _ := e.s.deployment("gguf-only")
	if d.template.Name() != "plain" || d.simulated() || d.text.sim {
		t.Fatalf("gguf deployment: template %v simulated %v", d.template.Name(), d.simulated())
	}
	waitIdle(t, e.s)
}

// TestAutoThresholds: "auto" (the default) runs the runtime's tuner, for
// any algorithm, starting every model at B = 1.
func TestAutoThresholds(t *testing.T) {
	for _, alg := range []string{"r2r-random", "single"} {
		e := start(t, func(c *config.Config) {
			c.Presets[0].Algorithm = alg
			c.Presets[0].Thresholds = "auto"
			if alg == "single" {
				c.Presets[0].Params = nil // p is r2r-random's
			}
		})
		r := e.s.deps[0].r
		if r.Tuner() == nil {
			t.Fatalf("%s: auto thresholds without a tuner", alg)
		}
		for i, sub := range r.SubServers() {
			if st := r.Tuner().Status(); st.Tables == nil && sub.Policy().B.At(4) != 1 {
				t.Fatalf("%s: model %d starts at B %v before any estimate", alg, i, sub.Policy().B)
			}
		}
		stillServes(t, e, "auto thresholds")
	}
	e := start(t, func(c *config.Config) { c.Presets[0].Thresholds = "1,3" })
	if e.s.deps[0].r.Tuner() != nil || jsonOf(e.s.deps[0].r.SubServers()[1].Policy().B) != jsonOf(sched.Static(3)) {
		t.Fatal("explicit thresholds must not run the tuner")
	}
}

func TestUnknownAlgorithm(t *testing.T) {
	cfg := config.Default()
	cfg.Presets[0].Algorithm = "nope"
	if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "unknown algorithm") {
		t.Fatalf("err %v", err)
	}
}
