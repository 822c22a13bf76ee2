package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/synth"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/single"
)

// The tool tests' functions: parameters bounded so that the tiny models'
// forced calls end well within their context.
const (
	weatherParams = `{"type":"object","properties":{"city":{"type":"string","minLength":1,"maxLength":10},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`
	timeParams    = `{"type":"object","properties":{"zone":{"type":"string","maxLength":6}},"required":["zone"],"additionalProperties":false}`
)

// weatherTools are the request's tools.
func weatherTools() []map[string]any {
	return []map[string]any{
		{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather in a city.", "parameters": jsonRaw(weatherParams)}},
		{"type": "function", "function": map[string]any{"name": "get_time", "parameters": jsonRaw(timeParams)}},
	}
}

// templatePath is a family template of chat/testdata/templates.
func templatePath(t *testing.T, file string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "chat", "testdata", "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// toolPresets serve the real tiny pair with a tool-capable chat template
// (testdata/tools_chatml.jinja: Qwen's call format, the tools by name, to
// fit the models' 256 and 512 tokens of context): routed (r2r-random
// over both) and single (the small model alone).
func toolPresets(t *testing.T) func(*config.Config) {
	models := testmodels.Dir(t)
	tmpl, err := filepath.Abs(filepath.Join("testdata", "tools_chatml.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(models, "tok512.bin")
	return func(c *config.Config) {
		c.Models = []config.Model{
			{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(models, "stories260K.bin"), Tokenizer: tok, ChatTemplate: tmpl},
			{Name: "llama2xs", Engine: loader.KindCPU, Path: filepath.Join(models, "llama2xs-model.bin"), Tokenizer: tok, ChatTemplate: tmpl},
		}
		c.Presets = []config.Preset{
			{Name: "routed", Algorithm: "r2r-random", Models: []string{"stories", "llama2xs"}, Params: map[string]string{"p": "0.35"}, Thresholds: "1"},
			{Name: "single", Algorithm: single.Name, Models: []string{"stories"}, Thresholds: "1"},
		}
	}
}

// toolAnswer is a chat completion as the tests read it.
type toolAnswer struct {
	Choices []struct {
		Message struct {
			Content   *string           `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage   Usage   `json:"usage"`
	Routing Routing `json:"routing"`
}

// callOf is a response's tool call.
type callOf struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func decodeCalls(t *testing.T, raws []json.RawMessage) []callOf {
	t.Helper()
	out := make([]callOf, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatalf("tool call %s: %v", r, err)
		}
	}
	return out
}

// validators compile the tools' parameters for an independent check.
func validators(t *testing.T) map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{"get_weather": testkit.JSONSchema(t, weatherParams), "get_time": testkit.JSONSchema(t, timeParams)}
}

// checkCalls checks that calls are of the allowed functions, with ids,
// and that their arguments validate against the parameters schemas.
func checkCalls(t *testing.T, what string, calls []callOf, allowed ...string) {
	t.Helper()
	vs := validators(t)
	for _, c := range calls {
		if !slices.Contains(allowed, c.Function.Name) || c.Type != "function" || !strings.HasPrefix(c.ID, "call_") {
			t.Fatalf("%s: call %+v, want one of %v with an id", what, c, allowed)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Function.Arguments))
		if err != nil {
			t.Fatalf("%s: arguments %q are not JSON: %v", what, c.Function.Arguments, err)
		}
		if err := vs[c.Function.Name].Validate(doc); err != nil {
			t.Fatalf("%s: arguments %q of %s do not validate: %v", what, c.Function.Arguments, c.Function.Name, err)
		}
	}
}

// TestToolCallsForcedTiny: on the real tiny pair with a tool-capable
// template, routed and single, tool_choice required and a named function
// force calls that parse and validate against their schemas, finish
// "tool_calls", and are counted by model like any other tokens. One call
// each: a named function, or parallel_tool_calls false. With parallel
// calls allowed the tiny model seldom stops calling, so the output may
// run to the context's end: every call it completed is valid.
func TestToolCallsForcedTiny(t *testing.T) {
	e := start(t, toolPresets(t))
	runs := 4
	if testing.Short() {
		runs = 2
	}
	named := map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}
	byModel := map[string]int{}
	for _, preset := range []string{"routed", "single"} {
		for i := range runs {
			for _, tc := range []struct {
				choice        any
				parallel, one bool
				allowed       []string
			}{
				{"required", false, true, []string{"get_weather", "get_time"}},
				{named, true, true, []string{"get_time"}},
				{"required", true, false, []string{"get_weather", "get_time"}},
			} {
				what := fmt.Sprintf("%s seed %d choice %v parallel %v", preset, i, tc.choice, tc.parallel)
				var r toolAnswer
				e.post("/v1/chat/completions", map[string]any{"model": preset, "seed": i + 1, "temperature": 0.8,
					"messages": []map[string]string{{"role": "user", "content": "What is the weather in Paris?"}},
					"tools":    weatherTools(), "tool_choice": tc.choice, "parallel_tool_calls": tc.parallel}, &r)
				ch := r.Choices[0]
				calls := decodeCalls(t, ch.Message.ToolCalls)
				switch one := tc.one; {
				case len(calls) == 0:
					t.Fatalf("%s: no calls: %+v", what, ch)
				case one && (len(calls) != 1 || ch.FinishReason != "tool_calls" || ch.Message.Content != nil):
					t.Fatalf("%s: finish %q, %d calls, content %v", what, ch.FinishReason, len(calls), ch.Message.Content)
				case ch.FinishReason == "length": // cut short while calling again
					calls = calls[:len(calls)-1]
				case ch.FinishReason != "tool_calls" || ch.Message.Content != nil:
					t.Fatalf("%s: finish %q, content %v", what, ch.FinishReason, ch.Message.Content)
				}
				checkCalls(t, what, calls, tc.allowed...)
				sum := 0
				for m, n := range r.Routing.TokensByModel {
					sum += n
					byModel[preset+"/"+m] += n
				}
				if sum != r.Usage.CompletionTokens || sum == 0 {
					t.Fatalf("%s: tokens by model %v, completion tokens %d", what, r.Routing.TokensByModel, r.Usage.CompletionTokens)
				}
				if i == 0 {
					t.Logf("%s: %s, finish %s", what, ch.Message.ToolCalls, ch.FinishReason)
				}
			}
		}
	}
	if byModel["routed/stories"] == 0 || byModel["routed/llama2xs"] == 0 || byModel["single/llama2xs"] != 0 {
		t.Fatalf("tokens by model %v: the routed preset must use both models, single only the small one", byModel)
	}
	waitIdle(t, e.s)
}

// streamedCalls posts a streaming chat request and reassembles what its
// chunks say: content, calls by index, the finish reason, and checks the
// chunks' shape: a call's first chunk has its id, type "function", name
// and empty arguments; later ones only its index and arguments.
func streamedCalls(t *testing.T, e *env, body map[string]any) (content string, calls []callOf, finish string) {
	t.Helper()
	resp := e.openStream(context.Background(), "/v1/chat/completions", with(body, "stream", true))
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    *int   `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatalf("chunk %s: %v", ev.data, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				switch {
				case tc.Index == nil || tc.Function.Arguments == nil:
					t.Fatalf("chunk %s: a call without index or arguments", ev.data)
				case *tc.Index == len(calls):
					if tc.ID == "" || tc.Type != "function" || tc.Function.Name == nil || *tc.Function.Arguments != "" {
						t.Fatalf("chunk %s: a call's first chunk must carry id, type, name and empty arguments", ev.data)
					}
					var nc callOf
					nc.ID, nc.Type, nc.Function.Name = tc.ID, tc.Type, *tc.Function.Name
					calls = append(calls, nc)
				case *tc.Index == len(calls)-1 && tc.ID == "" && tc.Function.Name == nil:
					calls[*tc.Index].Function.Arguments += *tc.Function.Arguments
				default:
					t.Fatalf("chunk %s: out of order after %d calls", ev.data, len(calls))
				}
			}
		}
	}
	return content, calls, finish
}

// TestToolCallsStreamedTiny: a streamed forced call arrives as OpenAI
// sends one, and is the call the same request answers unstreamed.
func TestToolCallsStreamedTiny(t *testing.T) {
	e := start(t, toolPresets(t))
	for _, preset := range []string{"routed", "single"} {
		for seed := 1; seed <= 2; seed++ {
			body := map[string]any{"model": preset, "seed": seed, "temperature": 0.8,
				"messages": []map[string]string{{"role": "user", "content": "Weather and time in Rome?"}},
				"tools":    weatherTools(), "tool_choice": "required", "parallel_tool_calls": false}
			var r toolAnswer
			e.post("/v1/chat/completions", body, &r)
			want := decodeCalls(t, r.Choices[0].Message.ToolCalls)
			content, calls, finish := streamedCalls(t, e, body)
			what := fmt.Sprintf("%s seed %d", preset, seed)
			if finish != "tool_calls" || content != "" || len(calls) != len(want) {
				t.Fatalf("%s: streamed finish %q content %q, %d calls; unstreamed %d", what, finish, content, len(calls), len(want))
			}
			for i := range calls {
				if calls[i].Function != want[i].Function {
					t.Fatalf("%s: streamed call %d %+v, unstreamed %+v", what, i, calls[i].Function, want[i].Function)
				}
			}
			checkCalls(t, what, calls, "get_weather", "get_time")
		}
	}
	waitIdle(t, e.s)
}

// TestToolCallsTwoRoundsTiny: a forced call, then the conversation with
// the assistant's call and the tool's result sent back (auto): the
// result is in the prompt, and the answer is text or a valid call.
func TestToolCallsTwoRoundsTiny(t *testing.T) {
	e := start(t, toolPresets(t))
	for _, preset := range []string{"routed", "single"} {
		user := map[string]any{"role": "user", "content": "Weather?"}
		var r1 toolAnswer
		e.post("/v1/chat/completions", map[string]any{"model": preset, "seed": 3, "messages": []any{user},
			"tools": weatherTools(), "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}, &r1)
		calls := decodeCalls(t, r1.Choices[0].Message.ToolCalls)
		if len(calls) == 0 {
			t.Fatalf("%s: round 1 made no call", preset)
		}
		msgs := []any{user, map[string]any{"role": "assistant", "content": nil, "tool_calls": r1.Choices[0].Message.ToolCalls}}
		for _, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": "Sunny."})
		}
		var r2 toolAnswer
		e.post("/v1/chat/completions", map[string]any{"model": preset, "seed": 4, "max_tokens": 8, "messages": msgs, "tools": weatherTools()}, &r2)
		if r2.Usage.PromptTokens <= r1.Usage.PromptTokens+r1.Usage.CompletionTokens {
			t.Fatalf("%s: round 2's prompt has %d tokens, round 1's prompt and call %d+%d", preset,
				r2.Usage.PromptTokens, r1.Usage.PromptTokens, r1.Usage.CompletionTokens)
		}
		ch := r2.Choices[0]
		if got := decodeCalls(t, ch.Message.ToolCalls); len(got) > 0 {
			checkCalls(t, preset+" round 2", got, "get_weather", "get_time")
		} else if ch.Message.Content == nil || ch.FinishReason == "tool_calls" {
			t.Fatalf("%s: round 2 answered neither text nor calls: %+v", preset, ch)
		}
	}
	waitIdle(t, e.s)
}

// TestToolCallsAutoTiny: with tool_choice auto (and absent) the tools
// are in the prompt (more prompt tokens than none, which leaves them
// out), and the tiny model's answer is text or valid calls, the same
// streamed.
func TestToolCallsAutoTiny(t *testing.T) {
	e := start(t, toolPresets(t))
	base := map[string]any{"model": "single", "seed": 5, "max_tokens": 24, "tools": weatherTools(),
		"messages": []map[string]string{{"role": "user", "content": "Tell me a story."}}}
	prompt := map[string]int{}
	for _, choice := range []any{nil, "auto", "none"} {
		var r toolAnswer
		e.post("/v1/chat/completions", with(base, "tool_choice", choice), &r)
		prompt[fmt.Sprint(choice)] = r.Usage.PromptTokens
		ch := r.Choices[0]
		calls := decodeCalls(t, ch.Message.ToolCalls)
		checkCalls(t, fmt.Sprint(choice), calls, "get_weather", "get_time")
		if len(calls) == 0 && (ch.Message.Content == nil || ch.FinishReason == "tool_calls") {
			t.Fatalf("%v: neither text nor calls: %+v", choice, ch)
		}
		content, scalls, finish := streamedCalls(t, e, with(base, "tool_choice", choice))
		if (ch.Message.Content != nil && content != *ch.Message.Content) || len(scalls) != len(calls) || finish != ch.FinishReason {
			t.Fatalf("%v: streamed %q %d calls %q, unstreamed %v %d calls %q", choice, content, len(scalls), finish, ch.Message.Content, len(calls), ch.FinishReason)
		}
	}
	if prompt["<nil>"] != prompt["auto"] || prompt["none"] >= prompt["auto"] {
		t.Fatalf("prompt tokens by tool_choice %v: auto (the default) shows the tools, none does not", prompt)
	}
	waitIdle(t, e.s)
}

// callingFamily is a template with a call format and what a model of
// that family writes when it calls (token texts in byte-level BPE; those
// in specials are control tokens).
type callingFamily struct {
	name, template string
	specials       []string
	bos, eos       string
	chain          []string
	want           []string // the functions called, in order
}

func callingFamilies() []callingFamily {
	q := `Ċ{"name":Ġ"get_weather",Ġ"arguments":Ġ{"city":Ġ"Paris",Ġ"unit":Ġ"c"}}Ċ`
	return []callingFamily{
		{name: "qwen2.5", template: "qwen2.5.jinja", specials: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, eos: "<|endoftext|>",
			chain: []string{"<tool_call>", q, "</tool_call>", "<|im_end|>"}, want: []string{"get_weather"}},
		{name: "unknown", template: "qwen2.5.jinja", specials: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, eos: "<|endoftext|>",
			chain: []string{"<tool_call>", strings.Replace(q, "get_weather", "rm_rf", 1), "</tool_call>", "<|im_end|>"}},
		{name: "llama3.1", template: "llama3.1.jinja", specials: []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
			"<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"}, bos: "<|begin_of_text|>", eos: "<|end_of_text|>",
			chain: []string{`{"name":Ġ"get_time",`, `Ġ"parameters":Ġ{"zone":Ġ"UTC"}}`, "<|eot_id|>"}, want: []string{"get_time"}},
		{name: "mistral", template: "mistral-small-3.1.jinja", specials: []string{"<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]",
			"[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"}, bos: "<s>", eos: "</s>",
			chain: []string{"[TOOL_CALLS]", `Ġ[{"name":Ġ"get_weather",Ġ"arguments":Ġ{"city":Ġ"Lima",Ġ"unit":Ġ"f"}},`, `Ġ{"name":Ġ"get_time",Ġ"arguments":Ġ{"zone":Ġ"PET"}}]`, "</s>"},
			want:  []string{"get_weather", "get_time"}},
		{name: "phi4", template: "phi4-mini.jinja", specials: []string{"<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
			"<|tool|>", "<|/tool|>", "<|tool_call|>", "<|/tool_call|>", "<|tool_response|>"}, eos: "<|endoftext|>",
			chain: []string{"<|tool_call|>", `{"name":Ġ"get_time",Ġ"arguments":Ġ{"zone":Ġ"CET"}}`, "<|/tool_call|>", "<|endoftext|>"}, want: []string{"get_time"}},
	}
}

// callingModel writes a GGUF model of family f whose output after any
// prompt is f's chain.
func callingModel(t *testing.T, f callingFamily) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "templates", f.template))
	if err != nil {
		t.Fatal(err)
	}
	m := synth.Forced{Template: string(src), Merges: []string{"H e"}, BOS: -1}
	ids := map[string]int32{}
	add := func(s string, typ int32) int32 {
		if id, ok := ids[s]; ok {
			return id
		}
		m.Tokens, m.Types = append(m.Tokens, s), append(m.Types, typ)
		ids[s] = int32(len(m.Tokens) - 1)
		return ids[s]
	}
	for c := '!'; c <= '~'; c++ {
		add(string(c), 1)
	}
	add("\u0120", 1)
	add("\u010a", 1)
	add("He", 1)
	for _, s := range f.specials {
		add(s, 3)
	}
	if f.bos != "" {
		m.BOS = ids[f.bos]
	}
	m.EOS = ids[f.eos]
	for _, s := range f.chain {
		m.Chain = append(m.Chain, add(s, 1))
	}
	path := filepath.Join(t.TempDir(), f.name+".gguf")
	if err := synth.WriteForcedFile(context.Background(), path, m); err != nil {
		t.Fatal(err)
	}
	widenContext(t, path, 4096)
	return path
}

// widenContext rewrites a forced model's context length: its prompts
// (tools described character by character) are longer than the 256
// tokens it declares, and its output depends on the last token only.
func widenContext(t *testing.T, path string, n uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	kvs := slices.Clone(f.KVs)
	for i := range kvs {
		if kvs[i].Key == "llama.context_length" {
			kvs[i].Value.V = n
		}
	}
	var out bytes.Buffer
	enc, err := gguf.NewEncoder(&out, kvs, f.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		data, err := f.TensorData(&f.Tensors[i])
		if err == nil {
			_, err = enc.Write(data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestToolCallsAutoFamilies: models of each family that answer with
// calls in their format (Qwen's <tool_call>, Llama 3's JSON, Mistral's
// [TOOL_CALLS] array and Phi-4's <|tool_call|>, the last two control
// tokens) give tool_calls with tool_choice auto, unstreamed and streamed;
// a call of a function not among the tools stays text, and with
// tool_choice none the output is text.
func TestToolCallsAutoFamilies(t *testing.T) {
	fams := callingFamilies()
	e := start(t, func(c *config.Config) {
		c.Models, c.Presets = nil, nil
		for _, f := range fams {
			c.Models = append(c.Models, config.Model{Name: f.name, Engine: loader.KindCPU, Path: callingModel(t, f), Threads: 1})
			c.Presets = append(c.Presets, config.Preset{Name: f.name, Algorithm: single.Name, Models: []string{f.name}, Thresholds: "1"})
		}
	})
	for _, f := range fams {
		body := map[string]any{"model": f.name, "max_tokens": 16, "tools": weatherTools(),
			"messages": []map[string]string{{"role": "user", "content": "Weather?"}}}
		var r toolAnswer
		e.post("/v1/chat/completions", body, &r)
		ch := r.Choices[0]
		calls := decodeCalls(t, ch.Message.ToolCalls)
		var names []string
		for _, c := range calls {
			names = append(names, c.Function.Name)
		}
		if !slices.Equal(names, f.want) {
			t.Errorf("%s: calls %v, want %v (content %v)", f.name, names, f.want, ch.Message.Content)
			continue
		}
		checkCalls(t, f.name, calls, "get_weather", "get_time")
		content, scalls, finish := streamedCalls(t, e, body)
		if f.want == nil {
			if ch.Message.Content == nil || !strings.Contains(*ch.Message.Content, `"rm_rf"`) || ch.FinishReason != "stop" || content != *ch.Message.Content {
				t.Errorf("%s: content %v finish %q, streamed %q", f.name, ch.Message.Content, ch.FinishReason, content)
			}
			continue
		}
		if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || finish != "tool_calls" || content != "" || len(scalls) != len(calls) {
			t.Errorf("%s: finish %q content %v; streamed finish %q content %q, %d calls", f.name, ch.FinishReason, ch.Message.Content, finish, content, len(scalls))
			continue
		}
		for i := range calls {
			if scalls[i].Function != calls[i].Function {
				t.Errorf("%s: streamed call %+v, unstreamed %+v", f.name, scalls[i].Function, calls[i].Function)
			}
		}
		var none toolAnswer
		e.post("/v1/chat/completions", with(body, "tool_choice", "none"), &none)
		if len(none.Choices[0].Message.ToolCalls) != 0 || none.Choices[0].FinishReason != "stop" || none.Usage.PromptTokens >= r.Usage.PromptTokens {
			t.Errorf("%s: tool_choice none: %+v, %d prompt tokens (auto %d)", f.name, none.Choices[0], none.Usage.PromptTokens, r.Usage.PromptTokens)
		}
	}
	waitIdle(t, e.s)
}

// TestToolCallsRefused: malformed or unknown tools entries, tool
// choices and tool messages are 400s naming the parameter, and the
// server serves on.
func TestToolCallsRefused(t *testing.T) {
	e := start(t, toolPresets(t))
	user := []map[string]string{{"role": "user", "content": "x"}}
	fn := func(kv ...any) map[string]any {
		return map[string]any{"type": "function", "function": with(map[string]any{"name": "f"}, kv...)}
	}
	deep := strings.Repeat(`{"type":"array","items":`, 200) + `{}` + strings.Repeat(`}`, 200)
	many := make([]any, 129)
	for i := range many {
		many[i] = fn("name", fmt.Sprintf("f%d", i))
	}
	call := func(kv ...any) map[string]any {
		return with(map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}, kv...)
	}
	for _, tc := range []struct {
		body  map[string]any
		param string
	}{
		{map[string]any{"tools": "f"}, "tools"},
		{map[string]any{"tools": []any{"f"}}, "tools[0]"},
		{map[string]any{"tools": []any{map[string]any{"function": map[string]any{"name": "f"}}}}, "tools[0].type"},
		{map[string]any{"tools": []any{map[string]any{"type": "custom", "function": map[string]any{"name": "f"}}}}, "tools[0].type"},
		{map[string]any{"tools": []any{map[string]any{"type": "function"}}}, "tools[0].function"},
		{map[string]any{"tools": []any{map[string]any{"type": "function", "custom": map[string]any{}}}}, "tools[0].custom"},
		{map[string]any{"tools": []any{fn(), fn("name", nil)}}, "tools[1].function.name"},
		{map[string]any{"tools": []any{fn("name", "bad name!")}}, "tools[0].function.name"},
		{map[string]any{"tools": []any{fn("name", strings.Repeat("n", 65))}}, "tools[0].function.name"},
		{map[string]any{"tools": []any{fn("name", 7)}}, "tools[0].function.name"},
		{map[string]any{"tools": []any{fn("description", false)}}, "tools[0].function.description"},
		{map[string]any{"tools": []any{fn(), fn()}}, "tools[1].function.name"},
		{map[string]any{"tools": []any{fn("parameters", "{}")}}, "tools[0].function.parameters"},
		{map[string]any{"tools": []any{fn("parameters", jsonRaw(deep))}}, "tools[0].function.parameters"},
		{map[string]any{"tools": []any{fn("description", strings.Repeat("d", 17<<10))}}, "tools[0].function.description"},
		{map[string]any{"tools": []any{fn("extra", 1)}}, "tools[0].function.extra"},
		{map[string]any{"tools": many}, "tools"},
		{map[string]any{"tools": []any{fn()}, "tool_choice": "always"}, "tool_choice"},
		{map[string]any{"tools": []any{fn()}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "g"}}}, "tool_choice.function.name"},
		{map[string]any{"tools": []any{fn()}, "tool_choice": map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{}}}, "tool_choice.allowed_tools"},
		{map[string]any{"tools": []any{fn()}, "tool_choice": map[string]any{"type": "custom"}}, "tool_choice.type"},
		{map[string]any{"tool_choice": "required"}, "tool_choice"},
		{map[string]any{"tools": []any{fn()}, "parallel_tool_calls": "yes"}, "parallel_tool_calls"},
		{map[string]any{"tools": []any{fn("parameters", map[string]any{"type": "object", "oneOf": []any{}})}, "tool_choice": "required"}, "tools[0].function.parameters"},
		{map[string]any{"tools": []any{fn("parameters", map[string]any{"type": "array"})}, "tool_choice": "required"}, "tools[0].function.parameters"},
		{map[string]any{"tools": []any{fn()}, "tool_choice": "required", "response_format": map[string]any{"type": "json_object"}}, "tool_choice"},
		{map[string]any{"tools": []any{fn()}, "tool_choice": "required", "ignore_eos": true}, "tool_choice"},
		{map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x", "tool_calls": []any{call()}}}}, "messages[0].tool_calls"},
		{map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{call("id", nil)}}}}, "messages[0].tool_calls[0].id"},
		{map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{call("function", map[string]any{"name": "f"})}}}}, "messages[0].tool_calls[0].function.arguments"},
		{map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{call("function", map[string]any{"name": "a b", "arguments": "{}"})}}}}, "messages[0].tool_calls[0].function.name"},
		{map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": "x"}}}, "messages[0].tool_calls"},
		{map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{call("extra", 1)}}}}, "messages[0].tool_calls[0].extra"},
		{map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x", "tool_call_id": "call_1"}}}, "messages[0].tool_call_id"},
		{map[string]any{"messages": []any{map[string]any{"role": "tool", "content": "x", "tool_call_id": strings.Repeat("i", 300)}}}, "messages[0].tool_call_id"},
	} {
		body := with(map[string]any{"model": "single", "messages": user, "max_tokens": 4}, flatten(tc.body)...)
		code, b := e.do(http.MethodPost, "/v1/chat/completions", body)
		var er errorBody
		if code != http.StatusBadRequest || json.Unmarshal(b, &er) != nil || er.Error.Param == nil || *er.Error.Param != tc.param {
			t.Errorf("%v: %d %s, want 400 naming %s", tc.body, code, b, tc.param)
		}
	}
	var r toolAnswer
	e.post("/v1/chat/completions", map[string]any{"model": "single", "messages": user, "max_tokens": 100, "tools": []any{fn()}, "tool_choice": "required"}, &r)
	if calls := decodeCalls(t, r.Choices[0].Message.ToolCalls); len(calls) == 0 || calls[0].Function.Arguments != "{}" {
		t.Fatalf("after the refusals, a call of f without parameters: %+v", r.Choices[0])
	}
	waitIdle(t, e.s)
}

// flatten turns a map into with's key-value pairs.
func flatten(m map[string]any) []any {
	var kv []any
	for k, v := range m {
		kv = append(kv, k, v)
	}
	return kv
}

// FuzzChatToolsBody feeds chat bodies with tools, tool choices and tool
// messages to the decoder (simulated default, generic call format): a
// refusal of tools is a client error naming the parameter, an accepted forced call
// carries a grammar that compiles.
func FuzzChatToolsBody(f *testing.F) {
	cfg := config.Default()
	for i := range cfg.Models {
		cfg.Models[i].ContextLength = 2048
	}
	cfg.MaxBodyBytes = 1 << 16
	s, err := New(context.Background(), cfg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	tool := `{"type":"function","function":{"name":"get_weather","description":"d","parameters":` + weatherParams + `}}`
	for _, b := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":"required"}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `,{"type":"function","function":{"name":"now"}}],"tool_choice":{"type":"function","function":{"name":"now"}},"parallel_tool_calls":false}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"noon"}],"tools":[` + tool + `]}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a b"}}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{}],"tool_choice":"none"}`,
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w, r := fuzzRequest("/v1/chat/completions", body)
		_, g, aerr := s.readChat(w, r)
		if aerr != nil && aerr.param == "" && strings.Contains(aerr.message, "tool") {
			t.Fatalf("body %q: a refusal of tools naming no parameter: %s", body, aerr.message)
		}
		checkDecoded(t, s, body, g, aerr)
		if aerr == nil && g.params.Schema != "" {
			if _, err := constrain.Compile([]byte(g.params.Schema)); err != nil {
				t.Fatalf("body %q: the request's grammar does not compile: %v", body, err)
			}
		}
	})
}
