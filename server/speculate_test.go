package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
)

// TestSpeculation: a preset that speculates answers as one that does not
// (per request, speculate -1 turns it off), reports its speculation in
// lint-clean metrics, and refuses a depth out of range naming the field.
func TestSpeculation(t *testing.T) {
	e := start(t, func(c *config.Config) {
		c.Models[0].Agree, c.Models[0].AgreeSeed = 0.6, c.Models[1].Seed
		c.Presets[0].Speculate, c.Presets[0].SpeculateDepth = "on", 4
	})
	gen := func(spec int) NativeResponse {
		var r NativeResponse
		e.post("/generate", map[string]any{"input_ids": []int32{1, 5, 9}, "sampling_params": map[string]any{
			"max_new_tokens": 48, "seed": 7, "ignore_eos": true, "speculate": spec}}, &r)
		return r
	}
	off, on, deep := gen(-1), gen(0), gen(9)
	for _, r := range []NativeResponse{on, deep} {
		if !slices.Equal(r.OutputIDs, off.OutputIDs) || !slices.Equal(r.ProducedBy, off.ProducedBy) {
			t.Fatalf("speculating changed the output:\n%v %v\nwithout:\n%v %v", r.OutputIDs, r.ProducedBy, off.OutputIDs, off.ProducedBy)
		}
	}
	body := lintMetrics(t, e)
	for _, want := range []string{
		`tokenrouter_speculated_tokens_total{large="llm",preset="r2r-random",small="slm"} `,
		`tokenrouter_speculated_tokens_kept_total{large="llm",preset="r2r-random",small="slm"} `,
		`tokenrouter_speculation_agreement_ratio{large="llm",preset="r2r-random",small="slm"} `,
		`tokenrouter_speculation_depth{large="llm",preset="r2r-random",small="slm"} 4` + "\n", // the preset's bound
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, `tokenrouter_speculated_tokens_total{large="llm",preset="r2r-random",small="slm"} 0`+"\n") {
		t.Errorf("no token was speculated")
	}
	// The small model commits the large model's tokens, which still count
	// as the large model's.
	if ratio := `tokenrouter_large_model_token_ratio{algorithm="r2r-random",preset="r2r-random"} `; !strings.Contains(body, ratio+"0.") {
		t.Errorf("metrics lack %s between 0 and 1", ratio)
	}
	code, b := e.do(http.MethodPost, "/v1/completions", map[string]any{"prompt": []int32{1, 5}, "max_tokens": 4, "speculate": 65})
	if code != http.StatusBadRequest || !strings.Contains(string(b), `"param":"speculate"`) {
		t.Errorf("speculate 65: %d %s", code, b)
	}
	var c struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	e.post("/v1/completions", map[string]any{"prompt": []int32{1, 5}, "max_tokens": 4, "speculate": 2}, &c)
	if len(c.Choices) != 1 {
		t.Errorf("completion with speculate 2: %+v", c)
	}
}

// TestBusDelay: with Options.BusDelay every hand-off between the
// sub-servers waits the delay each way, so a request whose large model
// wrote k tokens without speculating takes at least 2·k delays.
func TestBusDelay(t *testing.T) {
	const delay = 60 * time.Millisecond
	e := startWith(t, nil, Options{BusDelay: delay})
	var r NativeResponse
	t0 := time.Now()
	e.post("/generate", map[string]any{"input_ids": []int32{1, 5, 9}, "sampling_params": map[string]any{
		"max_new_tokens": 24, "seed": 5, "ignore_eos": true, "speculate": -1}}, &r)
	took := time.Since(t0)
	k := 0
	for _, m := range r.ProducedBy {
		if m == 1 {
			k++
		}
	}
	if len(r.OutputIDs) != 24 || k == 0 {
		t.Fatalf("%d tokens, %d by the large model: want 24, some routed", len(r.OutputIDs), k)
	}
	if took < time.Duration(2*k)*delay {
		t.Fatalf("%d hand-offs over a %v bus took %v, less than %v", k, delay, took, time.Duration(2*k)*delay)
	}
}
