package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
)

// lintMetrics scrapes /metrics and fails on what promtool check metrics
// reports (the same linter).
func lintMetrics(t *testing.T, e *env) string {
	t.Helper()
	code, b := e.do(http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	problems, err := promlint.New(bytes.NewReader(b)).Lint()
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	return string(b)
}

func TestRequestMetrics(t *testing.T) {
	e := start(t, nil)
	prompt := 0
	for i := range 3 {
		var r NativeResponse
		e.post("/generate", map[string]any{"text": strings.Repeat("word ", i+1), "sampling_params": map[string]any{"max_new_tokens": 5}}, &r)
		prompt += r.Usage.PromptTokens
	}
	body := lintMetrics(t, e)
	for _, want := range []string{
		fmt.Sprintf(`tokenrouter_prompt_tokens_total{preset="r2r-random"} %d`, prompt),
		`tokenrouter_request_duration_seconds_count{preset="r2r-random"} 3`,
		`tokenrouter_request_queue_seconds_count{preset="r2r-random"} 3`,
		`tokenrouter_model_handoff_wait_seconds_bucket{model="llm",preset="r2r-random",le=`,
		`tokenrouter_model_threshold{model="slm",preset="r2r-random"} 1`,
		`tokenrouter_model_threshold{model="llm",preset="r2r-random"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestRequestLog: one info line per finished request, with its id,
// preset, tokens by model, TTFT, duration and finish reason.
func TestRequestLog(t *testing.T) {
	var buf testkit.Buffer
	e := startWith(t, nil, Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 7}, &r)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d request lines in %s", len(lines), buf.String())
	}
	l := lines[0]
	by, _ := l["tokens_by_model"].(map[string]any)
	if l["level"] != "INFO" || "chatcmpl-"+l["id"].(string) != r.ID || l["preset"] != "r2r-random" || l["finish_reason"] != "length" ||
		by == nil || by["slm"].(float64)+by["llm"].(float64) != 7 || l["ttft"].(float64) <= 0 || l["duration"].(float64) < l["ttft"].(float64) {
		t.Fatalf("request line %v", l)
	}
}

// TestPrefixCacheMetrics: requests that share a long prompt on a real
// model reuse its KV (the cpu engine's prefix cache), and /metrics says
// how many prompt tokens were looked up and found; the outputs are the
// same as with the cache off.
func TestPrefixCacheMetrics(t *testing.T) {
	models := testmodels.Dir(t)
	var outs [2][]string
	for k, off := range []bool{false, true} {
		e := start(t, func(c *config.Config) {
			c.Models = []config.Model{{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(models, "stories260K.bin"),
				Tokenizer: filepath.Join(models, "tok512.bin"), NoPrefixCache: off}}
			c.Presets = []config.Preset{{Name: "one", Algorithm: "single", Models: []string{"stories"}, Thresholds: "1"}}
		})
		system := strings.Repeat("Once upon a time there was a little dog named Spot. ", 6)
		for i := range 4 {
			var r NativeResponse
			e.post("/generate", map[string]any{"text": system + fmt.Sprintf("Question %d:", i), "sampling_params": map[string]any{"max_new_tokens": 8}}, &r)
			outs[k] = append(outs[k], r.Text)
		}
		body := lintMetrics(t, e)
		hit := `tokenrouter_model_prefix_cache_hit_tokens_total{model="stories",preset="one"}`
		if off == strings.Contains(body, hit) || !off && strings.Contains(body, hit+" 0\n") {
			t.Fatalf("prefix cache off=%v: metrics %s", off, body)
		}
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Fatalf("outputs with the cache %q, without %q", outs[0], outs[1])
	}
}

// TestKernelChoiceMetric: /metrics names the kernel level each cpu model
// runs per class of operation: the forced level for every class with
// kernels set, levels this CPU runs for the measured plan.
func TestKernelChoiceMetric(t *testing.T) {
	models := testmodels.Dir(t)
	path := filepath.Join(models, "stories260K.gguf")
	e := start(t, func(c *config.Config) {
		c.Models = []config.Model{
			{Name: "forced", Engine: loader.KindCPU, Path: path, Threads: 1, Kernels: "generic"},
			{Name: "measured", Engine: loader.KindCPU, Path: path, Threads: 1},
		}
		c.Presets = []config.Preset{{Name: "two", Algorithm: "r2r-random", Models: []string{"forced", "measured"}, Thresholds: "1"}}
	})
	body := lintMetrics(t, e)
	re := regexp.MustCompile(`tokenrouter_model_kernel_choice\{class="([a-z/_0-9A-Z]+)",level="([a-z0-9]+)",model="([a-z]+)",preset="two"\} 1`)
	classes := map[string]map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		class, level, model := strings.Split(m[1], "/")[0], m[2], m[3]
		if classes[model] == nil {
			classes[model] = map[string]bool{}
		}
		classes[model][class] = true
		l, err := kernels.ParseLevel(level)
		switch {
		case err != nil || !slices.Contains(kernels.Available(), l):
			t.Errorf("%s: level %q is not one this CPU runs (%v)", m[0], level, kernels.Available())
		case model == "forced" && level != "generic":
			t.Errorf("%s: want generic, forced", m[0])
		}
	}
	for _, model := range []string{"forced", "measured"} {
		for _, class := range []string{"decode", "batch", "prompt", "attention"} {
			if !classes[model][class] {
				t.Errorf("model %s: no kernel choice for class %s in\n%s", model, class, body)
			}
		}
	}
}
