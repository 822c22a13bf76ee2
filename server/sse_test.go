package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
)

// streamChunks posts a streaming request and returns its chunks (before
// [DONE]) as raw JSON objects.
func streamChunks(t *testing.T, e *env, path string, body map[string]any) []map[string]json.RawMessage {
	t.Helper()
	resp := e.openStream(context.Background(), path, body)
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("%s: the stream does not end with [DONE]", path)
	}
	var out []map[string]json.RawMessage
	for _, ev := range evs[:len(evs)-1] {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatalf("%s: chunk %s: %v", path, ev.data, err)
		}
		out = append(out, m)
	}
	return out
}

// TestStreamUsageChunk: with stream_options.include_usage, chat and
// completion streams (one choice and two) end with a chunk of their own
// that has no choices and the usage of the whole request, just before
// [DONE], and every other chunk has "usage": null; without it no chunk
// has a usage field.
func TestStreamUsageChunk(t *testing.T) {
	e := start(t, fastSim)
	msgs := []map[string]any{{"role": "user", "content": "Hi"}}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"messages": msgs}},
		{"/v1/completions", map[string]any{"prompt": "Once"}},
	} {
		for _, n := range []int{1, 2} {
			body := with(c.body, "max_tokens", 5, "n", n, "stream", true, "stream_options", map[string]any{"include_usage": true})
			chunks := streamChunks(t, e, c.path, body)
			last := chunks[len(chunks)-1]
			var u Usage
			if string(last["choices"]) != "[]" || json.Unmarshal(last["usage"], &u) != nil || u.CompletionTokens != 5*n || u.PromptTokens == 0 {
				t.Fatalf("%s n=%d: last chunk choices %s usage %s", c.path, n, last["choices"], last["usage"])
			}
			finished := 0
			for i, ch := range chunks[:len(chunks)-1] {
				if v, ok := ch["usage"]; !ok || string(v) != "null" {
					t.Fatalf("%s n=%d: chunk %d has usage %q (present %v), want null", c.path, n, i, v, ok)
				}
				var choices []struct {
					FinishReason *string `json:"finish_reason"`
				}
				if json.Unmarshal(ch["choices"], &choices) != nil || len(choices) != 1 {
					t.Fatalf("%s n=%d: chunk %d has choices %s", c.path, n, i, ch["choices"])
				}
				if choices[0].FinishReason != nil {
					finished++
				}
			}
			if finished != n {
				t.Fatalf("%s n=%d: %d finish chunks", c.path, n, finished)
			}
			for i, ch := range streamChunks(t, e, c.path, with(c.body, "max_tokens", 3, "n", n, "stream", true)) {
				if _, ok := ch["usage"]; ok {
					t.Fatalf("%s n=%d without include_usage: chunk %d has usage %s", c.path, n, i, ch["usage"])
				}
			}
		}
	}
	waitIdle(t, e.s)
}

// TestStreamOptionsNeedStream: stream_options without stream true is a
// 400 naming stream_options, on both endpoints; null is accepted.
func TestStreamOptionsNeedStream(t *testing.T) {
	e := start(t, fastSim)
	opts := map[string]any{"include_usage": true}
	msgs := []map[string]any{{"role": "user", "content": "Hi"}}
	for _, c := range []struct {
		name, path string
		body       map[string]any
	}{
		{"chat", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 2}},
		{"completions", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 2}},
	} {
		code, b := e.do(http.MethodPost, c.path, with(c.body, "stream_options", opts))
		wantError(t, c.name+" without stream", code, b, http.StatusBadRequest, typeInvalidRequest, "stream_options", "invalid_value")
		code, b = e.do(http.MethodPost, c.path, with(c.body, "stream", false, "stream_options", map[string]any{}))
		wantError(t, c.name+" with stream false", code, b, http.StatusBadRequest, typeInvalidRequest, "stream_options", "invalid_value")
		if code, b := e.do(http.MethodPost, c.path, with(c.body, "stream_options", nil)); code != http.StatusOK {
			t.Errorf("%s: stream_options null without stream: %d %s", c.name, code, b)
		}
	}
}

// TestStreamUsageGoSDK: the openai-go SDK's chat accumulator gets the
// usage from the last chunk, which has no choices, while the earlier
// chunks carry usage null; its completion stream ends the same way; and
// stream_options on a request that does not stream is the SDK's error
// naming stream_options.
func TestStreamUsageGoSDK(t *testing.T) {
	e := start(t, fastSim)
	client := goSDK(e, "any")
	ctx := context.Background()
	usage := openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	chat := openai.ChatCompletionNewParams{Model: "r2r-random", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		MaxTokens: openai.Int(6), N: openai.Int(2), StreamOptions: usage}
	stream := client.Chat.Completions.NewStreaming(ctx, chat)
	var acc openai.ChatCompletionAccumulator
	var chunks []openai.ChatCompletionChunk
	for stream.Next() {
		c := stream.Current()
		if !acc.AddChunk(c) {
			t.Fatalf("the accumulator refused chunk %s", c.RawJSON())
		}
		chunks = append(chunks, c)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	last := chunks[len(chunks)-1]
	if acc.Usage.CompletionTokens != 12 || len(acc.Choices) != 2 || acc.Choices[1].FinishReason != "length" ||
		len(last.Choices) != 0 || last.Usage.CompletionTokens != 12 {
		t.Fatalf("accumulated usage %+v, %d choices; last chunk %s", acc.Usage, len(acc.Choices), last.RawJSON())
	}
	for _, c := range chunks[:len(chunks)-1] {
		if c.JSON.Usage.Raw() != "null" || len(c.Choices) != 1 {
			t.Fatalf("chunk before the last: %s", c.RawJSON())
		}
	}

	comp := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "r2r-random",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(4),
		StreamOptions: usage})
	var cchunks []openai.Completion
	for comp.Next() {
		cchunks = append(cchunks, comp.Current())
	}
	if err := comp.Err(); err != nil {
		t.Fatal(err)
	}
	cl := cchunks[len(cchunks)-1]
	if len(cl.Choices) != 0 || cl.Usage.CompletionTokens != 4 || cchunks[len(cchunks)-2].Choices[0].FinishReason != "length" ||
		cchunks[len(cchunks)-2].JSON.Usage.Raw() != "null" {
		t.Fatalf("completion stream ends with %s after %s", cl.RawJSON(), cchunks[len(cchunks)-2].RawJSON())
	}

	chat.N = openai.Int(1)
	_, err := client.Chat.Completions.New(ctx, chat)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "stream_options" {
		t.Fatalf("stream_options without streaming: %v", err)
	}
	waitIdle(t, e.s)
}
