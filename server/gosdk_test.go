package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tokenrouter/tokenrouter/config"
)

// goSDK returns a client of the official openai-go package for the server.
func goSDK(e *env, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// TestOpenAIGoSDK drives the server with the official openai-go package:
// a chat completion, a streamed one with usage, a text completion, and an
// unknown model as the SDK's typed error.
func TestOpenAIGoSDK(t *testing.T) {
	e := start(t, func(c *config.Config) { c.APIKey = "sk-go-sdk" })
	client := goSDK(e, "sk-go-sdk")
	ctx := context.Background()

	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     "r2r-random",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something.")},
		MaxTokens: openai.Int(12),
	})
	if err != nil {
		t.Fatal(err)
	}
	if chat.Object != "chat.completion" || len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" ||
		chat.Choices[0].FinishReason != "length" || chat.Usage.CompletionTokens != 12 {
		t.Fatalf("chat completion %s", chat.RawJSON())
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "r2r-random",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream please.")},
		MaxTokens:     openai.Int(16),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			chunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 16 || acc.Usage.CompletionTokens != 16 || acc.Choices[0].FinishReason != "length" ||
		acc.Choices[0].Message.Content == "" {
		t.Fatalf("stream: %d content chunks, usage %d, finish %q, text %q", chunks, acc.Usage.CompletionTokens,
			acc.Choices[0].FinishReason, acc.Choices[0].Message.Content)
	}

	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "r2r-random",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Object != "text_completion" || len(strings.Fields(comp.Choices[0].Text)) != 5 || comp.Usage.CompletionTokens != 5 {
		t.Fatalf("completion %s", comp.RawJSON())
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "no-such-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Fatalf("unknown model: %v", err)
	}
	waitIdle(t, e.s)
}
