package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/buildinfo"
	"github.com/tokenrouter/tokenrouter/tokenizer/simtok"
)

// checkRouting checks the routing extension against the output.
func checkRouting(t *testing.T, rt *Routing, u *Usage, n int) {
	t.Helper()
	if rt == nil || u == nil {
		t.Fatalf("routing %v usage %v", rt, u)
	}
	sum := 0
	for _, c := range rt.TokensByModel {
		sum += c
	}
	if sum != n || u.CompletionTokens != n || u.TotalTokens != u.PromptTokens+n || u.PromptTokens == 0 {
		t.Fatalf("routing %+v usage %+v for %d tokens", rt, u, n)
	}
	if want := float64(rt.TokensByModel["llm"]) / float64(n); rt.LargeModelRatio != want {
		t.Fatalf("large_model_ratio %v, want %v", rt.LargeModelRatio, want)
	}
	if rt.Algorithm != "r2r-random" {
		t.Fatalf("algorithm %q", rt.Algorithm)
	}
}

func TestNativeGenerate(t *testing.T) {
	e := start(t, nil)
	var r NativeResponse
	e.post("/generate", map[string]any{"text": "Hello", "sampling_params": map[string]any{"max_new_tokens": 40, "seed": 7}}, &r)
	if len(r.OutputIDs) != 40 || len(r.ProducedBy) != 40 || *r.FinishReason != "length" {
		t.Fatalf("got %d ids, %d producers, reason %v", len(r.OutputIDs), len(r.ProducedBy), *r.FinishReason)
	}
	if r.Text != (simtok.Tokenizer{}).Decode(r.OutputIDs) {
		t.Fatalf("text %q does not decode the ids", r.Text)
	}
	if strings.Join(r.Models, ",") != "slm,llm" {
		t.Fatalf("models %v", r.Models)
	}
	counts := [2]int{}
	for _, b := range r.ProducedBy {
		counts[b]++
	}
	if counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("p=0.35 over 40 tokens used one model only: %v", counts)
	}
	if r.Routing.TokensByModel["slm"] != counts[0] || r.Routing.TokensByModel["llm"] != counts[1] {
		t.Fatalf("tokens_by_model %v, produced_by counts %v", r.Routing.TokensByModel, counts)
	}
	checkRouting(t, r.Routing, r.Usage, 40)
	if r.Usage.PromptTokens != len("Hello")+1 { // BOS + bytes
		t.Fatalf("prompt tokens %d", r.Usage.PromptTokens)
	}

	// input_ids equal to the encoded text count the same prompt.
	var r2 NativeResponse
	ids := append([]int32{simtok.BOS}, (simtok.Tokenizer{}).Encode("Hello")...)
	e.post("/generate", map[string]any{"input_ids": ids, "sampling_params": map[string]any{"max_new_tokens": 5}}, &r2)
	if r2.Usage.PromptTokens != len(ids) || len(r2.OutputIDs) != 5 {
		t.Fatalf("input_ids: %+v", r2)
	}
}

// deterministic makes the default preset route nothing (p = 0), so equal
// prompts give equal outputs.
func deterministic(c *config.Config) { c.Presets[0].Params = map[string]string{"p": "0"} }

func TestNativeStreamAndStop(t *testing.T) {
	e := start(t, deterministic)
	var full NativeResponse
	e.post("/generate", map[string]any{"text": "x", "sampling_params": map[string]any{"max_new_tokens": 30, "seed": 3}}, &full)
	words := strings.Fields(full.Text)
	stop := " " + words[10]
	want := full.Text[:strings.Index(full.Text, stop)]

	resp := e.openStream(context.Background(), "/generate", map[string]any{"text": "x", "stream": true,
		"sampling_params": map[string]any{"max_new_tokens": 30, "seed": 3, "stop": []string{stop}}})
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var last NativeResponse
	for _, ev := range evs[:len(evs)-1] {
		last = NativeResponse{}
		if err := json.Unmarshal([]byte(ev.data), &last); err != nil {
			t.Fatal(err)
		}
		text.WriteString(last.Text)
	}
	if evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1].data)
	}
	if text.String() != want || last.FinishReason == nil || *last.FinishReason != "stop" {
		t.Fatalf("streamed %q (reason %v), want %q stop", text.String(), last.FinishReason, want)
	}
	waitIdle(t, e.s) // the stop cancelled the rest of the request
}

func TestChatCompletion(t *testing.T) {
	e := start(t, nil)
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"model": "r2r-random", "max_tokens": 12,
		"messages": []map[string]any{{"role": "system", "content": "Be brief."},
			{"role": "user", "content": []map[string]string{{"type": "text", "text": "Hi"}}}}}, &r)
	if r.Object != "chat.completion" || r.Model != "r2r-random" || !strings.HasPrefix(r.ID, "chatcmpl-") || len(r.Choices) != 1 {
		t.Fatalf("%+v", r)
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || len(strings.Fields(*c.Message.Content)) != 12 || *c.FinishReason != "length" {
		t.Fatalf("choice %+v content %q", c, *c.Message.Content)
	}
	checkRouting(t, r.Routing, r.Usage, 12)
	// Plain template: "system: Be brief.\nuser: Hi\nassistant:" plus BOS.
	if want := len("system: Be brief.\nuser: Hi\nassistant:") + 1; r.Usage.PromptTokens != want {
		t.Fatalf("prompt tokens %d, want %d", r.Usage.PromptTokens, want)
	}
}

func TestChatStreaming(t *testing.T) {
	e := start(t, nil)
	resp := e.openStream(context.Background(), "/v1/chat/completions", map[string]any{"max_tokens": 15, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "messages": []map[string]any{{"role": "user", "content": "Hi"}}})
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 15+3 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("%d events, last %q", len(evs), evs[len(evs)-1].data)
	}
	var chunks []chatResponse
	for _, ev := range evs[:len(evs)-1] {
		var c chatResponse
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatal(err)
		}
		if c.Object != "chat.completion.chunk" || c.ID != chunks0ID(chunks, c.ID) {
			t.Fatalf("chunk %s", ev.data)
		}
		chunks = append(chunks, c)
	}
	if d := chunks[0].Choices[0].Delta; d.Role != "assistant" {
		t.Fatalf("first chunk %+v", d)
	}
	content := 0
	for _, c := range chunks[1 : len(chunks)-2] {
		if c.Choices[0].FinishReason != nil || c.Choices[0].Delta.Content == nil {
			t.Fatalf("content chunk %+v", c.Choices[0])
		}
		content++
	}
	fin := chunks[len(chunks)-2]
	if *fin.Choices[0].FinishReason != "length" || fin.Routing == nil {
		t.Fatalf("finish chunk %+v", fin)
	}
	u := chunks[len(chunks)-1]
	if len(u.Choices) != 0 {
		t.Fatalf("usage chunk has choices")
	}
	checkRouting(t, u.Routing, u.Usage, 15)
	if content != 15 {
		t.Fatalf("%d content chunks for 15 tokens", content)
	}
}

func chunks0ID(cs []chatResponse, id string) string {
	if len(cs) == 0 {
		return id
	}
	return cs[0].ID
}

func TestCompletions(t *testing.T) {
	e := start(t, nil)
	for _, prompt := range []any{"Once upon a time", []string{"Once upon a time"}, []int{1, 80, 81}, [][]int{{1, 80}}} {
		var r completionResponse
		e.post("/v1/completions", map[string]any{"model": "r2r-random", "prompt": prompt, "max_tokens": 9, "stop": nil}, &r)
		if r.Object != "text_completion" || len(r.Choices) != 1 || len(strings.Fields(r.Choices[0].Text)) != 9 {
			t.Fatalf("prompt %v: %+v", prompt, r)
		}
		checkRouting(t, r.Routing, r.Usage, 9)
	}
	resp := e.openStream(context.Background(), "/v1/completions", map[string]any{"prompt": "Once", "max_tokens": 6, "stream": true})
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var fin completionResponse
	for _, ev := range evs[:len(evs)-1] {
		var c completionResponse
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatal(err)
		}
		text.WriteString(c.Choices[0].Text)
		fin = c
	}
	if len(strings.Fields(text.String())) != 6 || *fin.Choices[0].FinishReason != "length" || fin.Routing == nil || fin.Usage != nil {
		t.Fatalf("streamed %q, final %+v", text.String(), fin)
	}
}

func TestModelsAndHealth(t *testing.T) {
	e := start(t, nil)
	code, b := e.do(http.MethodGet, "/v1/models", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var list struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 1 {
		t.Fatalf("%s", b)
	}
	m := list.Data[0]
	if m.ID != "r2r-random" || !m.Simulated || !strings.Contains(m.Description, "SIMULATED") || len(m.Models) != 2 ||
		!m.Models[0].Simulated || m.Models[0].Name != "slm" || m.Models[1].Name != "llm" || m.Algorithm != "r2r-random" {
		t.Fatalf("%+v", m)
	}
	code, b = e.do(http.MethodGet, "/health", nil)
	if code != 200 || !strings.Contains(string(b), `"status":"ok"`) {
		t.Fatalf("%d %s", code, b)
	}
	code, b = e.do(http.MethodGet, "/ready", nil)
	if code != 200 || !strings.Contains(string(b), `"status":"ready"`) {
		t.Fatalf("/ready: %d %s", code, b)
	}
}

func TestMetrics(t *testing.T) {
	e := start(t, nil)
	for range 3 {
		var r NativeResponse
		e.post("/generate", map[string]any{"text": "m", "sampling_params": map[string]any{"max_new_tokens": 20}}, &r)
	}
	code, b := e.do(http.MethodGet, "/metrics", nil)
	if code != 200 {
		t.Fatalf("%d", code)
	}
	body := string(b)
	bi := buildinfo.Read()
	for _, want := range []string{
		`tokenrouter_model_queue_length{model="slm",preset="r2r-random"} 0`,
		`tokenrouter_model_requests{model="llm",preset="r2r-random",state="pending"} 0`,
		`tokenrouter_model_simulated{model="llm",preset="r2r-random"} 1`,
		`tokenrouter_model_up{model="slm",preset="r2r-random"} 1`,
		`tokenrouter_model_step_latency_seconds_bucket{model="llm",preset="r2r-random",le=`,
		`tokenrouter_model_batch_size_count{model="slm",preset="r2r-random"}`,
		`tokenrouter_model_tokens_committed_total{model="slm",preset="r2r-random"}`,
		`tokenrouter_routed_fraction{algorithm="r2r-random",preset="r2r-random"} 0.`,
		`tokenrouter_route_decisions_total{algorithm="r2r-random",from="slm",preset="r2r-random",to="llm"}`,
		`tokenrouter_time_to_first_token_seconds_count{preset="r2r-random"} 3`,
		`tokenrouter_time_per_output_token_seconds_count{preset="r2r-random"} 3`,
		`tokenrouter_requests_total{finish_reason="length",preset="r2r-random"} 3`,
		`tokenrouter_http_requests_total{code="200",path="/generate"} 3`,
		`go_goroutines`,
		fmt.Sprintf(`tokenrouter_build_info{goversion=%q,revision=%q,version=%q} 1`, bi.GoVersion, bi.Revision, bi.Version),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
