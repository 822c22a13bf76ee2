package server

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
)

// realPair is a preset "pair" routing between two different real models
// by algorithm with params.
func realPair(t *testing.T, algorithm string, params map[string]string) (config.Model, config.Model, func(*config.Config)) {
	dir := testmodels.Dir(t)
	tok := filepath.Join(dir, "tok512.bin")
	a := config.Model{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.bin"), Tokenizer: tok, Threads: 1}
	b := config.Model{Name: "xs", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: tok, Threads: 1}
	return a, b, func(c *config.Config) {
		c.Models = []config.Model{a, b}
		c.Presets = []config.Preset{{Name: "pair", Algorithm: algorithm, Models: []string{"stories", "xs"}, Params: params}}
	}
}

// TestLogprobsEqualEngine: each reported log-probability is the log-softmax
// of the logits of the model that produced the token, at that step, as a
// direct engine call computes them; the top tokens too. Under r2r-random
// (tokens dropped and regenerated) and speculative decoding (drafts
// verified and rolled back).
func TestLogprobsEqualEngine(t *testing.T) {
	for _, c := range []struct {
		algorithm string
		params    map[string]string
	}{{"r2r-random", map[string]string{"p": "0.4"}}, {"speculative", map[string]string{"k": "3"}}} {
		t.Run(c.algorithm, func(t *testing.T) { testLogprobsEqualEngine(t, c.algorithm, c.params) })
	}
}

func testLogprobsEqualEngine(t *testing.T, algorithm string, params map[string]string) {
	a, b, edit := realPair(t, algorithm, params)
	e := start(t, edit)
	var r NativeResponse
	e.post("/generate", map[string]any{"text": "Once upon a time", "return_logprob": true, "top_logprobs_num": 3,
		"sampling_params": map[string]any{"max_new_tokens": 24, "temperature": 0.8, "seed": 2, "presence_penalty": 0.3}}, &r)
	lps := r.OutputTokenLogprobs
	if len(lps) != len(r.OutputIDs) || r.Routing.TokensByModel["xs"] == 0 {
		t.Fatalf("%d logprobs for %d tokens, routing %v", len(lps), len(r.OutputIDs), r.Routing.TokensByModel)
	}
	var tok TokenizeResponse
	e.post("/tokenize", map[string]any{"prompt": "Once upon a time"}, &tok)
	ctx := context.Background()
	var engines [2]engine.Engine
	for i, m := range []config.Model{a, b} {
		eng, err := loader.Builtin().OpenEngine(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		engines[i] = eng
	}
	seq := tok.Tokens
	for i, id := range r.OutputIDs {
		by := r.ProducedBy[i]
		if lps[i].ID != id || lps[i].Model != r.Models[by] || len(lps[i].Top) != 3 {
			t.Fatalf("token %d: entry %+v for id %d by %s", i, lps[i], id, r.Models[by])
		}
		out := make([]engine.Output, 1)
		if err := engines[by].Step(ctx, []engine.Input{{Seq: engine.SeqID(i + 1), Tokens: seq, Want: engine.WantLogits}}, out); err != nil {
			t.Fatal(err)
		}
		ls := logSoftmax(out[0].Logits)
		if d := math.Abs(lps[i].Logprob - ls[id]); d > 1e-4 {
			t.Fatalf("token %d (%d by %s): logprob %v, the engine's log-softmax %v", i, id, r.Models[by], lps[i].Logprob, ls[id])
		}
		for _, x := range lps[i].Top {
			if math.Abs(x.Logprob-ls[x.ID]) > 1e-4 || x.Logprob > lps[i].Top[0].Logprob {
				t.Fatalf("token %d: top %+v, log-softmax %v", i, lps[i].Top, ls[x.ID])
			}
		}
		seq = append(seq, id)
	}
}

func logSoftmax(l []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = math.Max(mx, float64(v))
	}
	sum := 0.0
	for _, v := range l {
		sum += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(l))
	for i, v := range l {
		out[i] = float64(v) - mx - math.Log(sum)
	}
	return out
}

// TestLogprobsOpenAIShapes: chat and completions logprobs, streamed and
// not, carry one entry per token and name the model.
func TestLogprobsOpenAIShapes(t *testing.T) {
	e := start(t, nil)
	msgs := []map[string]string{{"role": "user", "content": "Hi"}}
	var c chatResponse
	e.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "logprobs": true, "top_logprobs": 2}, &c)
	var lp chatLogprobs
	remarshal(t, c.Choices[0].Logprobs, &lp)
	if len(lp.Content) != 6 || len(lp.Content[0].TopLogprobs) != 2 || lp.Content[0].Model == "" || lp.Content[0].Logprob > 0 {
		t.Fatalf("chat logprobs %+v", lp)
	}
	var cp completionResponse
	e.post("/v1/completions", map[string]any{"prompt": "Hi", "max_tokens": 5, "logprobs": 1}, &cp)
	var clp completionLogprobs
	remarshal(t, cp.Choices[0].Logprobs, &clp)
	if len(clp.Tokens) != 5 || len(clp.TokenLogprobs) != 5 || len(clp.TopLogprobs[0]) != 1 || len(clp.Models) != 5 {
		t.Fatalf("completion logprobs %+v", clp)
	}
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 5, "logprobs": true, "stream": true})
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs[:len(evs)-1] {
		var ch chatResponse
		if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, x := range ch.Choices {
			var l chatLogprobs
			remarshal(t, x.Logprobs, &l)
			n += len(l.Content)
		}
	}
	if n != 5 {
		t.Fatalf("%d streamed logprob entries for 5 tokens", n)
	}
	code, body := e.do("POST", "/v1/chat/completions", map[string]any{"messages": msgs, "top_logprobs": 2})
	wantError(t, "top_logprobs without logprobs", code, body, 400, typeInvalidRequest, "top_logprobs", "invalid_value")
}

// remarshal converts a decoded JSON value into out.
func remarshal(t *testing.T, v any, out any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
