package server

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
)

// TestReplicasMetrics: a preset that runs two replicas of its small model
// serves as one of each does (same seeds, same output), and /metrics says
// how many replicas are up and how requests were placed on them.
func TestReplicasMetrics(t *testing.T) {
	const n = 6
	gen := func(e *env) [][]int32 { // one after the other: request i has the same id in both runs
		out := make([][]int32, n)
		for i := range n {
			var r NativeResponse
			e.post("/generate", map[string]any{"text": "story " + strconv.Itoa(i),
				"sampling_params": map[string]any{"max_new_tokens": 24, "seed": i, "ignore_eos": true}}, &r)
			out[i] = r.OutputIDs
		}
		return out
	}
	want := gen(start(t, nil))
	e := start(t, func(c *config.Config) { c.Presets[0].Replicas = map[string]int{"slm": 2} })
	got := gen(e)
	for i := range want {
		if len(want[i]) != 24 || !slices.Equal(got[i], want[i]) {
			t.Fatalf("request %d: %v with replicas, %v without", i, got[i], want[i])
		}
	}
	if subs := e.s.deps[0].r.SubServers(); len(subs) != 3 {
		t.Fatalf("%d sub-servers, want 3 (two replicas of slm, one llm)", len(subs))
	}
	code, b := e.do(http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	body := string(b)
	for _, want := range []string{
		`tokenrouter_model_replicas_up{model="slm",preset="r2r-random"} 2`,
		`tokenrouter_model_replicas_up{model="llm",preset="r2r-random"} 1`,
		`tokenrouter_model_placements_total{model="slm",outcome="placed",preset="r2r-random"} ` + strconv.Itoa(n),
		`tokenrouter_model_placements_total{model="slm",outcome="none",preset="r2r-random"} 0`,
		`tokenrouter_model_placements_total{model="llm",outcome="placed",preset="r2r-random"} 0`,
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(body) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	m := regexp.MustCompile(`(?m)^tokenrouter_model_placements_total\{model="slm",outcome="affine",preset="r2r-random"\} (\d+)$`).FindStringSubmatch(body)
	if m == nil || m[1] == "0" {
		t.Errorf("no KV-affine hand-offs to slm in /metrics: %v", m)
	}
	// The model's figures are its replicas' together.
	var steps uint64
	for _, s := range e.s.deps[0].r.Replicas(0) {
		steps += s.Stats().Steps
	}
	if steps == 0 || !regexp.MustCompile(`(?m)^tokenrouter_model_steps_total\{model="slm",preset="r2r-random"\} \d+$`).MatchString(body) {
		t.Errorf("slm steps: %d by its replicas; /metrics lacks the model's total", steps)
	}
}
