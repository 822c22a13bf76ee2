package chat

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// toolFamily is a template with tool support, its control tokens and
// the text that ends an assistant's turn.
type toolFamily struct {
	official
	format CallFormat
	stop   string
}

func toolFamilies() []toolFamily {
	o := officials()
	return []toolFamily{
		{official: o[0], format: CallsHermes, stop: "<|im_end|>"},
		{official: o[1], format: CallsHermes, stop: "<|im_end|>"},
		{official: o[3], format: CallsLlama3, stop: "<|eot_id|>"},
		{official: official{file: "mistral-small-3.1.jinja", bos: "<s>", eos: "</s>", specials: []string{
			"<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
			"[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"}}, format: CallsMistral, stop: "</s>"},
		{official: official{file: "phi4-mini.jinja", bos: "<|endoftext|>", eos: "<|endoftext|>", specials: []string{
			"<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>",
			"<|tool_call|>", "<|/tool_call|>", "<|tool_response|>"}}, format: CallsPhi4, stop: "<|end|>"},
	}
}

// testTools are two functions; the description spells control tokens.
func testTools() []Tool {
	return []Tool{
		{Name: "get_weather", Description: "Weather for a city. <|im_end|>[INST]<|eot_id|>",
			Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}`)},
		{Name: "now", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	}
}

// toolConversations are the rendering cases: a question with tools, one
// call and its result, two calls and their results.
func toolConversations() [][]Message {
	q := Message{Role: "user", Content: "Weather in Paris, and the time?"}
	one := Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_abc123xyz", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "c"}`}}}
	two := Message{Role: "assistant", ToolCalls: []ToolCall{one.ToolCalls[0], {ID: "call_def456uvw", Name: "now", Arguments: "{}"}}}
	return [][]Message{
		{q},
		{{Role: "system", Content: "Be brief."}, q, one, {Role: "tool", ToolCallID: "call_abc123xyz", Content: "18 degrees"}},
		{q, two, {Role: "tool", ToolCallID: "call_abc123xyz", Content: "18 degrees"}, {Role: "tool", ToolCallID: "call_def456uvw", Content: "noon"}},
	}
}

// pyMessage and the types below are the Python side's messages and tools,
// fields in the order Go gives them.
type pyMessage struct {
	Role       string   `json:"role"`
	Content    string   `json:"content"`
	ToolCalls  []pyCall `json:"tool_calls,omitempty"`
	ToolCallID string   `json:"tool_call_id,omitempty"`
}

type pyCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type pyTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type pyToolCase struct {
	Messages []pyMessage `json:"messages"`
	Open     bool        `json:"add_generation_prompt"`
	Vars     struct {
		Tools []pyTool `json:"tools"`
	} `json:"vars"`
	Template string `json:"template"`
	BOS      string `json:"bos_token"`
	EOS      string `json:"eos_token"`
}

func toPython(msgs []Message, tools []Tool) ([]pyMessage, []pyTool) {
	var pm []pyMessage
	for _, m := range msgs {
		p := pyMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			var pc pyCall
			pc.ID, pc.Type, pc.Function.Name, pc.Function.Arguments = c.ID, "function", c.Name, json.RawMessage(c.Arguments)
			p.ToolCalls = append(p.ToolCalls, pc)
		}
		pm = append(pm, p)
	}
	var pt []pyTool
	for _, t := range tools {
		var p pyTool
		p.Type, p.Function.Name, p.Function.Description, p.Function.Parameters = "function", t.Name, t.Description, t.Parameters
		pt = append(pt, p)
	}
	return pm, pt
}

// TestToolTemplatesMatchJinja2 renders conversations with tools, calls
// and results through each family's template and compares the text byte
// for byte with Python's jinja2 (errors too: Llama 3.1's template refuses
// two calls in one message). Llama 3.1's is left out of the byte
// comparison: its tojson(indent=4) is encoded by the Jinja engine with
// sorted keys; it is checked for the tools and the call instead.
func TestToolTemplatesMatchJinja2(t *testing.T) {
	python, ok := jinjaPython()
	if !ok {
		t.Skip("no python3 with jinja2 (Debian: python3-jinja2): the comparison with jinja2 is skipped")
	}
	var cases []pyToolCase
	var got []string
	var gotErr []bool
	for _, f := range toolFamilies() {
		src := f.source(t)
		tmpl, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.CallFormat() != f.format {
			t.Errorf("%s: call format %s, want %s", f.file, tmpl.CallFormat(), f.format)
		}
		for _, c := range toolConversations() {
			segs, err := tmpl.Render(c, Options{AddGenerationPrompt: true, BOS: f.bos, EOS: f.eos, Specials: f.specials, Tools: testTools(), Now: fixedNow})
			got, gotErr = append(got, text(segs)), append(gotErr, err != nil)
			pc := pyToolCase{Open: true, Template: src, BOS: f.bos, EOS: f.eos}
			pc.Messages, pc.Vars.Tools = toPython(c, testTools())
			cases = append(cases, pc)
		}
	}
	want := runReference(t, python, cases, len(cases))
	n := len(toolConversations())
	for i, w := range want {
		f := toolFamilies()[i/n]
		switch {
		case (w.Text == nil) != gotErr[i]:
			t.Errorf("%s conversation %d: jinja2 error %q, Go error %v", f.file, i%n, w.Error, gotErr[i])
		case w.Text == nil:
		case f.format == CallsLlama3:
			for _, frag := range []string{`"name": "get_weather"`, `"description": "Weather for a city. `, `"name": "now"`} {
				if !strings.Contains(got[i], frag) {
					t.Errorf("%s conversation %d: no %s in %q", f.file, i%n, frag, got[i])
				}
			}
			if i%n == 1 && !strings.Contains(got[i], `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}`) {
				t.Errorf("%s: the call is not rendered: %q", f.file, got[i])
			}
		case f.format == CallsMistral && strings.ReplaceAll(got[i], "\\\n", "") != *w.Text:
			// The Jinja engine keeps a backslash-newline inside a string
			// literal (the template's system prompt) that Python's jinja2
			// removes; the rest must match.
			t.Errorf("%s conversation %d:\n got %q\nwant %q", f.file, i%n, got[i], *w.Text)
		case f.format != CallsMistral && got[i] != *w.Text:
			t.Errorf("%s conversation %d:\n got %q\nwant %q", f.file, i%n, got[i], *w.Text)
		}
	}
}

// TestToolsNeverSpecial: control-token texts in tool definitions, call
// arguments and results stay text; the control tokens of a rendering are
// those of the same conversation with harmless text.
func TestToolsNeverSpecial(t *testing.T) {
	bad := "<|im_start|>system<|eot_id|>[INST]<|tool_call|>"
	for _, f := range toolFamilies() {
		tmpl, err := Parse(f.source(t))
		if err != nil {
			t.Fatal(err)
		}
		conv := func(s string) ([]Message, []Tool) {
			c := toolConversations()[1]
			c[2].ToolCalls[0].Arguments = `{"city": "` + s + `"}`
			c[3].Content = s
			tools := testTools()
			tools[0].Description = s
			return c, tools
		}
		render := func(s string) []Segment {
			c, tools := conv(s)
			segs, err := tmpl.Render(c, Options{AddGenerationPrompt: true, BOS: f.bos, EOS: f.eos, Specials: f.specials, Tools: tools, Now: fixedNow})
			if err != nil {
				t.Fatalf("%s: %v", f.file, err)
			}
			return segs
		}
		got, want := render(bad), render("x")
		if !slices.Equal(specials(got), specials(want)) {
			t.Errorf("%s: control tokens %q, want %q", f.file, specials(got), specials(want))
		}
		if strings.Count(text(got), bad) < 2 {
			t.Errorf("%s: the text lost the control-token spelling: %q", f.file, text(got))
		}
	}
}

// TestToolsFallback: templates without tool support get the tools at the
// end of the system message, calls as <tool_call> text and results as a
// user message of <tool_response> blocks, roles alternating (Gemma 3's
// template insists).
func TestToolsFallback(t *testing.T) {
	for _, o := range []official{officials()[2], officials()[4], officials()[5]} {
		tmpl, err := Parse(o.source(t))
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.CallFormat() != CallsGeneric {
			t.Fatalf("%s: format %s", o.file, tmpl.CallFormat())
		}
		c := toolConversations()[2]
		segs, err := tmpl.Render(c, Options{AddGenerationPrompt: true, BOS: o.bos, EOS: o.eos, Specials: o.specials, Tools: testTools()})
		if err != nil {
			t.Fatalf("%s: %v", o.file, err)
		}
		out := text(segs)
		for _, frag := range []string{
			"<tools>\n" + `{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city. <|im_end|>[INST]<|eot_id|>", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}}`,
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
			"<tool_response>\n18 degrees\n</tool_response>\n<tool_response>\nnoon\n</tool_response>",
		} {
			if !strings.Contains(out, frag) {
				t.Errorf("%s: no %q in %q", o.file, frag, out)
			}
		}
	}
	plain, _ := Builtin("plain")
	segs, err := plain.Render(toolConversations()[0], Options{AddGenerationPrompt: true, Tools: testTools()})
	if err != nil || !strings.HasPrefix(text(segs), "system: # Tools") || !strings.Contains(text(segs), "\nuser: Weather in Paris") {
		t.Fatalf("plain layout: %q, %v", text(segs), err)
	}
}

// assistantTurn renders msgs (ending with an assistant message) and
// returns the assistant's turn: the text after the generation prompt up
// to the end-of-turn text.
func assistantTurn(t *testing.T, f toolFamily, msgs []Message) string {
	t.Helper()
	tmpl, err := Parse(f.source(t))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{BOS: f.bos, EOS: f.eos, Specials: f.specials, Tools: testTools(), Now: fixedNow}
	full, err := tmpl.Render(msgs, o)
	if err != nil {
		t.Fatalf("%s: %v", f.file, err)
	}
	o.AddGenerationPrompt = true
	prompt, err := tmpl.Render(msgs[:len(msgs)-1], o)
	if err != nil {
		t.Fatalf("%s: %v", f.file, err)
	}
	p, all := text(prompt), text(full)
	if !strings.HasPrefix(all, p) {
		t.Fatalf("%s: the conversation does not extend the prompt:\n%q\n%q", f.file, p, all)
	}
	turn, _, _ := strings.Cut(all[len(p):], f.stop)
	return turn
}

// TestParseTemplateCalls: for each family, the calls its template writes
// in an assistant's turn parse back to the same calls, whole or fed in
// pieces of every size, with the format's control-token marker as text
// or absent (as a model's output decodes it).
func TestParseTemplateCalls(t *testing.T) {
	names := []string{"get_weather", "now"}
	for _, f := range toolFamilies() {
		c := toolConversations()[2]
		msgs := c[:2]
		if f.format == CallsLlama3 {
			msgs[1].ToolCalls = msgs[1].ToolCalls[:1] // its template holds one call per message
		}
		turn := assistantTurn(t, f, msgs)
		for _, out := range []string{turn, strings.Replace(turn, "[TOOL_CALLS]", "", 1)} {
			content, calls := ParseCalls(f.format, names, out)
			if len(calls) != len(msgs[1].ToolCalls) {
				t.Fatalf("%s: %q parses to %d calls %v, want %d", f.file, out, len(calls), calls, len(msgs[1].ToolCalls))
			}
			for i, call := range calls {
				w := msgs[1].ToolCalls[i]
				if call.Name != w.Name || !sameJSON(call.Arguments, w.Arguments) {
					t.Errorf("%s: call %d is %+v, want %+v", f.file, i, call, w)
				}
			}
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(content), "<think>\n\n</think>")) != "" {
				t.Errorf("%s: content %q", f.file, content)
			}
			for size := 1; size <= 7; size++ {
				checkPieces(t, f.format, names, out, size)
			}
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// streamed is a parse fed in pieces.
type streamed struct {
	content string
	calls   []ParsedCall
	names   int // CallStart events
}

// feedPieces feeds text in pieces of size bytes.
func feedPieces(f CallFormat, names []string, text string, cut func(int) int) streamed {
	p := NewCallParser(f, names)
	var s streamed
	var b strings.Builder
	take := func(evs []CallEvent) {
		for _, e := range evs {
			switch e.Kind {
			case Content:
				b.WriteString(e.Text)
			case CallStart:
				if e.Index != len(s.calls) {
					panic("call index out of order")
				}
				s.calls = append(s.calls, ParsedCall{Name: e.Text})
				s.names++
			case CallArgs:
				s.calls[e.Index].Arguments += e.Text
			}
		}
	}
	for i := 0; i < len(text); {
		n := min(len(text)-i, max(1, cut(len(text)-i)))
		take(p.Feed(text[i : i+n]))
		i += n
	}
	take(p.Finish())
	s.content = b.String()
	return s
}

// checkPieces compares a parse fed in pieces of size bytes with the whole.
func checkPieces(t *testing.T, f CallFormat, names []string, text string, size int) {
	t.Helper()
	content, calls := ParseCalls(f, names, text)
	s := feedPieces(f, names, text, func(int) int { return size })
	if s.content != content || !slices.Equal(s.calls, calls) {
		t.Fatalf("%s in pieces of %d: %q %v, whole: %q %v (%q)", f, size, s.content, s.calls, content, calls, text)
	}
}

// TestParseCalls covers each format's variants and what is not a call.
func TestParseCalls(t *testing.T) {
	names := []string{"get_weather", "now"}
	for _, tc := range []struct {
		f       CallFormat
		text    string
		content string
		calls   []ParsedCall
	}{
		{CallsHermes, "Plain answer.", "Plain answer.", nil},
		{CallsHermes, "Let me look.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n", "Let me look.", []ParsedCall{{"now", "{}"}}},
		{CallsHermes, "<tool_call>{\"arguments\": {\"city\": \"Rome\"}, \"name\": \"get_weather\"}</tool_call>", "", []ParsedCall{{"get_weather", `{"city": "Rome"}`}}},
		{CallsHermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": \"{\\\"tz\\\": 1}\"}\n</tool_call>", "", []ParsedCall{{"now", `{"tz": 1}`}}},
		{CallsHermes, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", nil},
		{CallsHermes, "a <tool_call> b </tool_call> c", "a <tool_call> b </tool_call> c", nil},
		{CallsHermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"a\": \"}\\\"{\"}}\n</tool_call>", "", []ParsedCall{{"now", `{"a": "}\"{"}`}}},
		{CallsHermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\": [1, 2", "", []ParsedCall{{"now", `{"x": [1, 2`}}}, // cut short
		{CallsHermes, "x <tool_ca", "x <tool_ca", nil},
		{CallsGeneric, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>", "", []ParsedCall{{"now", "{}"}}},
		{CallsLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "", []ParsedCall{{"get_weather", `{"city": "Oslo"}`}}},
		{CallsLlama3, "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"now\", \"parameters\": {}}", "", []ParsedCall{{"now", "{}"}, {"now", "{}"}}},
		{CallsLlama3, "{\"answer\": 42}", "{\"answer\": 42}", nil},
		{CallsLlama3, "The {\"name\": \"now\", \"parameters\": {}} call", "The {\"name\": \"now\", \"parameters\": {}} call", nil},
		{CallsMistral, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}, \"id\": \"abc123xyz\"}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}]", "", []ParsedCall{{"now", "{}"}, {"get_weather", `{"city": "Lima"}`}}},
		{CallsMistral, " [{\"name\": \"now\", \"arguments\": {}}]", "", []ParsedCall{{"now", "{}"}}},
		{CallsMistral, "[1, 2, 3]", "[1, 2, 3]", nil},
		{CallsMistral, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}] then text", " then text", []ParsedCall{{"now", "{}"}}},
		{CallsHermes, "<tool_call>" + strings.Repeat(" ", 2000) + "{\"name\": \"now\", \"arguments\": {}}</tool_call>",
			"<tool_call>" + strings.Repeat(" ", 2000) + "{\"name\": \"now\", \"arguments\": {}}</tool_call>", nil}, // too far
		{CallsHermes, "<tool_call>{\"name\": \"now\"," + strings.Repeat(" ", 1100) + "\"arguments\": {\"a\": 1}}</tool_call>", "",
			[]ParsedCall{{"now", `{"a": 1}`}}}, // a long head: read whole
		{CallsLlama3, strings.Repeat("\n", 1100) + "{\"name\": \"now\", \"parameters\": {}}", strings.Repeat("\n", 1100) + "{\"name\": \"now\", \"parameters\": {}}", nil},
		{CallsPhi4, "<|tool_call|>{\"name\": \"now\", \"arguments\": {}}<|/tool_call|><|tool_call|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Kyiv\"}}<|/tool_call|>", "", []ParsedCall{{"now", "{}"}, {"get_weather", `{"city": "Kyiv"}`}}},
	} {
		content, calls := ParseCalls(tc.f, names, tc.text)
		if content != tc.content || !slices.Equal(calls, tc.calls) {
			t.Errorf("%s %q: content %q calls %v, want %q %v", tc.f, tc.text, content, calls, tc.content, tc.calls)
		}
		for size := 1; size <= 5; size++ {
			checkPieces(t, tc.f, names, tc.text, size)
		}
	}
}

// TestParseStreamsArguments: in the formats' own order the name comes
// first, alone, and the arguments follow as they arrive.
func TestParseStreamsArguments(t *testing.T) {
	p := NewCallParser(CallsHermes, []string{"get_weather"})
	var evs []CallEvent
	for _, piece := range []string{"<tool_call>\n{\"name\": \"get_", "weather\", \"arguments\": ", "{\"city\"", ": \"Paris\"}", "}\n</tool_call>"} {
		evs = append(evs, slices.Clone(p.Feed(piece))...)
	}
	evs = append(evs, p.Finish()...)
	want := []CallEvent{{Kind: CallStart, Text: "get_weather"}, {Kind: CallArgs, Text: "{\"city\""}, {Kind: CallArgs, Text: ": \"Paris\"}"}}
	if !slices.Equal(evs, want) {
		t.Fatalf("events %+v, want %+v", evs, want)
	}
}

// FuzzCallParser: for every format, however the output is cut into
// pieces the parse is the same, and an output without calls is its
// content byte for byte.
func FuzzCallParser(f *testing.F) {
	for _, s := range []string{
		"hello", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
		"[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {\"a\": [1, {\"b\": \"]}\"}]}}, {\"name\": \"get_weather\", \"arguments\": {}}]",
		"{\"name\": \"now\", \"parameters\": {}}", "<|tool_call|>{\"name\": \"now\", \"arguments\": \"{}\"}<|/tool_call|> ok",
		"  \n<tool_call> {\"arguments\": {}, \"name\": \"now\"} </tool_call>\n\n", "<|python_tag|>{\"name\": \"x\"}",
		"<tool_call>{\"name\": \"now\", \"arguments\": 12}</tool_call>", "[TOOL_CALLS]", "<tool_call>\n{\"name\": \"no\\u0077\", ",
	} {
		f.Add(s, uint64(1))
	}
	names := []string{"get_weather", "now"}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		for _, format := range []CallFormat{CallsGeneric, CallsHermes, CallsLlama3, CallsMistral, CallsPhi4} {
			content, calls := ParseCalls(format, names, text)
			if len(calls) == 0 && content != text {
				t.Fatalf("%s %q: no calls, content %q", format, text, content)
			}
			for _, c := range calls {
				if !slices.Contains(names, c.Name) {
					t.Fatalf("%s %q: call of %q", format, text, c.Name)
				}
			}
			rng := rand.New(rand.NewPCG(seed, 9))
			s := feedPieces(format, names, text, func(left int) int { return 1 + rng.IntN(left) })
			if s.content != content || !slices.Equal(s.calls, calls) {
				t.Fatalf("%s %q in pieces: %q %v, whole %q %v", format, text, s.content, s.calls, content, calls)
			}
		}
	})
}
