package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/single"
)

// toolServer serves the tool tests' presets: the real tiny pair with a
// tool-capable template (routed, single), and models that answer with
// calls in Qwen's format (qwen2.5: one call) and Mistral's (mistral: two).
func toolServer(t *testing.T, edit func(*config.Config)) *env {
	t.Helper()
	tiny := toolPresets(t)
	return start(t, func(c *config.Config) {
		tiny(c)
		for _, f := range callingFamilies() {
			if f.name != "qwen2.5" && f.name != "mistral" {
				continue
			}
			c.Models = append(c.Models, config.Model{Name: f.name, Engine: loader.KindCPU, Path: callingModel(t, f), Threads: 1})
			c.Presets = append(c.Presets, config.Preset{Name: f.name, Algorithm: single.Name, Models: []string{f.name}, Thresholds: "1"})
		}
		if edit != nil {
			edit(c)
		}
	})
}

// goTools are the test tools as the Go SDK declares them.
func goTools(t *testing.T) []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, tool := range weatherTools() {
		fn := tool["function"].(map[string]any)
		var params shared.FunctionParameters
		if err := json.Unmarshal([]byte(fn["parameters"].(jsonRaw)), &params); err != nil {
			t.Fatal(err)
		}
		def := shared.FunctionDefinitionParam{Name: fn["name"].(string), Parameters: params}
		if d, ok := fn["description"].(string); ok {
			def.Description = openai.String(d)
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	return out
}

// sdkCalls checks an SDK completion's calls like checkCalls.
func sdkCalls(t *testing.T, what string, calls []openai.ChatCompletionMessageToolCallUnion, allowed ...string) []callOf {
	t.Helper()
	out := make([]callOf, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type, out[i].Function.Name, out[i].Function.Arguments = c.ID, c.Type, c.Function.Name, c.Function.Arguments
	}
	checkCalls(t, what, out, allowed...)
	return out
}

// TestOpenAIGoSDKTools drives tool calling with the official openai-go
// package: auto (a model that calls, and the tiny model), required and a
// named function on the tiny pair routed and single, parallel calls, a
// streamed call through the SDK's accumulator, a two-round tool loop, and
// a malformed tool as the SDK's typed error.
func TestOpenAIGoSDKTools(t *testing.T) {
	e := toolServer(t, func(c *config.Config) { c.APIKey = "sk-go-tools" })
	client := goSDK(e, "sk-go-tools")
	ctx := context.Background()
	tools := goTools(t)
	ask := func(model, question string, choice openai.ChatCompletionToolChoiceOptionUnionParam, parallel param.Opt[bool], seed int64) *openai.ChatCompletion {
		t.Helper()
		r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Tools: tools, ToolChoice: choice,
			ParallelToolCalls: parallel, Seed: openai.Int(seed), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return r
	}
	auto := openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	required := openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	named := openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})

	// auto: a model that calls, and the tiny model (text or valid calls).
	r := ask("qwen2.5", "Weather in Paris?", auto, param.Opt[bool]{}, 1)
	if c := r.Choices[0]; c.FinishReason != "tool_calls" || len(sdkCalls(t, "auto", c.Message.ToolCalls, "get_weather")) != 1 {
		t.Fatalf("auto: %s", r.RawJSON())
	}
	r = ask("single", "Tell me a story.", auto, param.Opt[bool]{}, 2)
	if c := r.Choices[0]; len(c.Message.ToolCalls) == 0 && c.Message.Content == "" {
		t.Fatalf("auto on the tiny model: %s", r.RawJSON())
	}
	// parallel: two calls in one answer.
	r = ask("mistral", "Weather and time in Lima?", auto, param.Opt[bool]{}, 1)
	if c := r.Choices[0]; c.FinishReason != "tool_calls" || len(sdkCalls(t, "parallel", c.Message.ToolCalls, "get_weather", "get_time")) != 2 {
		t.Fatalf("parallel: %s", r.RawJSON())
	}
	// required and named, routed and single.
	for _, preset := range []string{"routed", "single"} {
		r = ask(preset, "Weather in Rome?", required, openai.Bool(false), 3)
		if c := r.Choices[0]; c.FinishReason != "tool_calls" || len(sdkCalls(t, preset+" required", c.Message.ToolCalls, "get_weather", "get_time")) != 1 {
			t.Fatalf("%s required: %s", preset, r.RawJSON())
		}
		r = ask(preset, "Weather in Rome?", named, param.Opt[bool]{}, 4)
		if c := r.Choices[0]; c.FinishReason != "tool_calls" || len(sdkCalls(t, preset+" named", c.Message.ToolCalls, "get_weather")) != 1 {
			t.Fatalf("%s named: %s", preset, r.RawJSON())
		}
		goStreamedCall(t, client, preset, tools)
		goTwoRounds(t, client, preset, tools)
	}

	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "single",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "bad name!"})}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tools[0].function.name" {
		t.Fatalf("malformed tool: %v", err)
	}
	waitIdle(t, e.s)
}

// goStreamedCall streams a named call through the SDK's accumulator and
// compares it with the same request unstreamed.
func goStreamedCall(t *testing.T, client openai.Client, preset string, tools []openai.ChatCompletionToolUnionParam) {
	t.Helper()
	ctx := context.Background()
	p := openai.ChatCompletionNewParams{Model: preset, Tools: tools, Seed: openai.Int(5),
		ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}),
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Time in Tokyo?")}}
	want, err := client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0]
	w := want.Choices[0].Message.ToolCalls
	if got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 1 || len(w) != 1 || len(finished) != 1 ||
		got.Message.ToolCalls[0].Function.Arguments != w[0].Function.Arguments || finished[0].Arguments != w[0].Function.Arguments ||
		finished[0].Name != "get_time" || got.Message.ToolCalls[0].ID == "" {
		t.Fatalf("%s streamed: %+v (finished %+v), unstreamed %s", preset, got, finished, want.RawJSON())
	}
	sdkCalls(t, preset+" streamed", got.Message.ToolCalls, "get_time")
}

// goTwoRounds runs a tool loop: a forced call, its result sent back with
// the SDK's own message conversion, and the model's answer.
func goTwoRounds(t *testing.T, client openai.Client, preset string, tools []openai.ChatCompletionToolUnionParam) {
	t.Helper()
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")}
	r1, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: preset, Tools: tools, Messages: msgs, Seed: openai.Int(6),
		ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})})
	if err != nil {
		t.Fatal(err)
	}
	calls := sdkCalls(t, preset+" round 1", r1.Choices[0].Message.ToolCalls, "get_weather")
	msgs = append(msgs, r1.Choices[0].Message.ToParam())
	for _, c := range calls {
		msgs = append(msgs, openai.ToolMessage("Sunny.", c.ID))
	}
	r2, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: preset, Tools: tools, Messages: msgs,
		Seed: openai.Int(7), MaxTokens: openai.Int(8)})
	if err != nil {
		t.Fatalf("%s round 2: %v", preset, err)
	}
	if r2.Usage.PromptTokens <= r1.Usage.PromptTokens+r1.Usage.CompletionTokens {
		t.Fatalf("%s round 2: prompt %d tokens, round 1 %d+%d", preset, r2.Usage.PromptTokens, r1.Usage.PromptTokens, r1.Usage.CompletionTokens)
	}
	c := r2.Choices[0]
	if len(c.Message.ToolCalls) > 0 {
		sdkCalls(t, preset+" round 2", c.Message.ToolCalls, "get_weather", "get_time")
	} else if c.Message.Content == "" {
		t.Fatalf("%s round 2: %s", preset, fmt.Sprint(r2.RawJSON()))
	}
}
