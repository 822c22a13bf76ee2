package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
)

func TestChoices(t *testing.T) {
	e := start(t, nil)
	msgs := []map[string]string{{"role": "user", "content": "Hi"}}
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "n": 3, "temperature": 1, "seed": 5}, &r)
	if len(r.Choices) != 3 || r.Usage.CompletionTokens != 18 {
		t.Fatalf("n = 3: %d choices, usage %+v", len(r.Choices), r.Usage)
	}
	texts := map[string]bool{}
	for i, c := range r.Choices {
		if c.Index != i || *c.FinishReason != "length" {
			t.Fatalf("choice %d: %+v", i, c)
		}
		texts[*c.Message.Content] = true
	}
	if len(texts) != 3 {
		t.Fatalf("three choices with seeds 5, 6, 7 gave %d different texts", len(texts))
	}
	checkRouting(t, r.Routing, r.Usage, 18)
	// Choice 0 is the request with n = 1.
	var one chatResponse
	e.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 1, "seed": 5}, &one)
	if *one.Choices[0].Message.Content != *r.Choices[0].Message.Content {
		t.Fatalf("choice 0 %q, n = 1 %q", *r.Choices[0].Message.Content, *one.Choices[0].Message.Content)
	}

	// Streaming: every choice's chunks carry its index.
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4, "n": 2,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	content, finished := [2]int{}, [2]int{}
	var usage *Usage
	for _, ev := range evs[:len(evs)-1] {
		var c chatResponse
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta != nil && ch.Delta.Content != nil && *ch.Delta.Content != "" {
				content[ch.Index]++
			}
			if ch.FinishReason != nil {
				finished[ch.Index]++
			}
		}
	}
	if content != [2]int{4, 4} || finished != [2]int{1, 1} || usage == nil || usage.CompletionTokens != 8 {
		t.Fatalf("stream of 2 choices: content %v finished %v usage %+v", content, finished, usage)
	}

	// Native: a list of responses.
	code, b := e.do("POST", "/generate", map[string]any{"text": "x", "sampling_params": map[string]any{"max_new_tokens": 3, "n": 2}})
	var list []NativeResponse
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list) != 2 || list[1].Index != 1 || len(list[1].OutputIDs) != 3 {
		t.Fatalf("native n = 2: %d %s", code, b)
	}
	waitIdle(t, e.s)
}

func TestLogitBiasAndStopTokens(t *testing.T) {
	e := start(t, deterministic)
	gen := func(sp map[string]any) NativeResponse {
		sp["max_new_tokens"] = 20
		var r NativeResponse
		e.post("/generate", map[string]any{"text": "x", "sampling_params": sp}, &r)
		return r
	}
	free := gen(map[string]any{})
	banned := free.OutputIDs[2]
	r := gen(map[string]any{"logit_bias": map[string]any{strconv.Itoa(int(banned)): -100}})
	if slices.Contains(r.OutputIDs, banned) || !slices.Equal(r.OutputIDs[:2], free.OutputIDs[:2]) {
		t.Fatalf("logit_bias -100 on %d: %v (without: %v)", banned, r.OutputIDs, free.OutputIDs)
	}
	stop := free.OutputIDs[5]
	r = gen(map[string]any{"stop_token_ids": []int32{stop}})
	if at := slices.Index(free.OutputIDs, stop); !slices.Equal(r.OutputIDs, free.OutputIDs[:at]) || *r.FinishReason != "stop" {
		t.Fatalf("stop_token_ids [%d]: %v (%s), want %v", stop, r.OutputIDs, *r.FinishReason, free.OutputIDs[:at])
	}
	waitIdle(t, e.s)
}

// TestPenaltiesRouted: penalties apply alike whichever model produces a
// token. Routed at random between two copies of one real model, a
// penalised request writes exactly what the model alone writes; and the
// penalty changes the output.
func TestPenaltiesRouted(t *testing.T) {
	path := filepath.Join(testmodels.Dir(t), "stories260K.gguf")
	e := start(t, func(c *config.Config) {
		c.Models = []config.Model{{Name: "a", Engine: loader.KindCPU, Path: path, Threads: 1}, {Name: "b", Engine: loader.KindCPU, Path: path, Threads: 1}}
		c.Presets = []config.Preset{
			{Name: "alone", Algorithm: "single", Models: []string{"a"}},
			{Name: "routed", Algorithm: "r2r-random", Models: []string{"a", "b"}, Params: map[string]string{"p": "0.5"}},
		}
	})
	gen := func(model string, sp map[string]any) NativeResponse {
		sp["max_new_tokens"] = 48
		var r NativeResponse
		e.post("/generate", map[string]any{"model": model, "text": "Once upon a time", "sampling_params": sp}, &r)
		return r
	}
	pen := func() map[string]any {
		return map[string]any{"frequency_penalty": 1.5, "presence_penalty": 0.5, "repetition_penalty": 1.3, "seed": 9}
	}
	plain, alone, routed := gen("alone", map[string]any{}), gen("alone", pen()), gen("routed", pen())
	if slices.Equal(plain.OutputIDs, alone.OutputIDs) {
		t.Fatalf("penalties changed nothing: %q", plain.Text)
	}
	if routed.Routing.TokensByModel["b"] == 0 || !slices.Equal(routed.OutputIDs, alone.OutputIDs) {
		t.Fatalf("routed %q (%v), alone %q", routed.Text, routed.Routing.TokensByModel, alone.Text)
	}
	if repeats(alone.OutputIDs) >= repeats(plain.OutputIDs) {
		t.Fatalf("penalised output repeats %d tokens, plain %d", repeats(alone.OutputIDs), repeats(plain.OutputIDs))
	}
	t.Logf("plain %q\npenalised %q", plain.Text, alone.Text)
}

// repeats counts the tokens of ids that occurred before.
func repeats(ids []int32) int {
	seen := map[int32]bool{}
	n := 0
	for _, id := range ids {
		if seen[id] {
			n++
		}
		seen[id] = true
	}
	return n
}
