package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Tool calling. A template that handles tools renders them itself: the
// request's tools become its Jinja `tools` variable, an assistant
// message's calls its `tool_calls` and a tool result its `tool_call_id`,
// in the shapes Hugging Face's apply_chat_template passes (OpenAI's, with
// each call's arguments decoded from their JSON text). The model then
// writes calls in its family's format (CallFormat), which a CallParser
// reads back. A template with no place for tools (Phi-3, Gemma 3, the
// built-in layouts) gets the Hermes format of Qwen's templates instead:
// the tools are described at the end of the system message, calls and
// results become text in assistant and user messages.

// Tool is a function the model may call (OpenAI's tools[i] of type
// function).
type Tool struct {
	// Name is the function's name.
	Name string
	// Description says what it does ("" when absent).
	Description string
	// Parameters is the JSON schema of its arguments (nil when absent).
	Parameters json.RawMessage
}

// ToolCall is a call an assistant message holds.
type ToolCall struct {
	// ID names the call; a tool result answers it by this id.
	ID string
	// Name is the called function's name.
	Name string
	// Arguments is the JSON text of the arguments.
	Arguments string
}

// CallFormat is how a model family writes tool calls.
type CallFormat uint8

// Call formats.
const (
	// CallsGeneric is the format of a template without tool support:
	// Hermes syntax, the tools described by a system message.
	CallsGeneric CallFormat = iota
	// CallsHermes is `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`
	// per call (Qwen2.5, Qwen3, Hermes).
	CallsHermes
	// CallsLlama3 is one `{"name": …, "parameters": …}` object (Llama
	// 3.1 to 3.3).
	CallsLlama3
	// CallsMistral is `[TOOL_CALLS] [{"name": …, "arguments": …}, …]`.
	CallsMistral
	// CallsPhi4 is `<|tool_call|>{"name": …, "arguments": …}<|/tool_call|>`
	// per call (Phi-4-mini).
	CallsPhi4
)

// String names the format.
func (f CallFormat) String() string {
	switch f {
	case CallsHermes:
		return "hermes"
	case CallsLlama3:
		return "llama3"
	case CallsMistral:
		return "mistral"
	case CallsPhi4:
		return "phi4"
	}
	return "generic"
}

// DetectCalls recognises the call format a template's source writes: by
// the markers of each family's format, in a template that uses the tools
// variable; anything else is CallsGeneric.
func DetectCalls(src string) CallFormat {
	if !strings.Contains(src, "tools") {
		return CallsGeneric
	}
	switch {
	case strings.Contains(src, "[TOOL_CALLS]"):
		return CallsMistral
	case strings.Contains(src, "<|tool_call|>"):
		return CallsPhi4
	case strings.Contains(src, "<tool_call>"):
		return CallsHermes
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, `"parameters": `):
		return CallsLlama3
	}
	return CallsGeneric
}

// CallSyntax is the text of a format's calls as a model writes them when
// it calls (the grammar of forced calls): Begin, then the calls separated
// by Sep, then End; each call is Open, the function's name, Mid, the
// arguments' JSON, Close.
type CallSyntax struct {
	Begin, End, Open, Mid, Close, Sep string
	// Parallel: the format holds more than one call.
	Parallel bool
}

// Syntax returns the format's call syntax.
func (f CallFormat) Syntax() CallSyntax {
	const name, args = `{"name": "`, `", "arguments": `
	switch f {
	case CallsLlama3:
		return CallSyntax{Open: name, Mid: `", "parameters": `, Close: "}"}
	case CallsMistral:
		return CallSyntax{Begin: "[TOOL_CALLS] [", End: "]", Open: name, Mid: args, Close: "}", Sep: ", ", Parallel: true}
	case CallsPhi4:
		return CallSyntax{Open: "<|tool_call|>" + name, Mid: args, Close: "}<|/tool_call|>", Parallel: true}
	}
	return CallSyntax{Open: "<tool_call>\n" + name, Mid: args, Close: "}\n</tool_call>", Sep: "\n", Parallel: true}
}

// Markers are the texts that mark calls in the format, which a
// vocabulary may hold as control tokens: the output must keep their text
// for a CallParser to find the calls.
func (f CallFormat) Markers() []string {
	switch f {
	case CallsLlama3:
		return []string{"<|python_tag|>"}
	case CallsMistral:
		return []string{"[TOOL_CALLS]"}
	case CallsPhi4:
		return []string{"<|tool_call|>", "<|/tool_call|>"}
	}
	return []string{"<tool_call>", "</tool_call>"}
}

// CallFormat is the call format of the template: its family's, or
// CallsGeneric for a template without tool support.
func (t *Template) CallFormat() CallFormat { return t.calls }

// toolsFallback rewrites a conversation with tools for a template
// without tool support (CallsGeneric): the tools' description ends the
// system message, calls become Hermes text in their assistant messages,
// and runs of tool results become one user message of <tool_response>
// blocks. Other templates' conversations are returned as they are.
func (t *Template) toolsFallback(msgs []Message, o Options) ([]Message, Options) {
	if t.calls != CallsGeneric || (len(o.Tools) == 0 && !hasCalls(msgs)) {
		return msgs, o
	}
	out := make([]Message, 0, len(msgs)+1)
	if len(o.Tools) > 0 {
		pre := toolsPreamble(o.Tools)
		if len(msgs) > 0 && msgs[0].Role == "system" {
			pre = msgs[0].Content + "\n\n" + pre
			msgs = msgs[1:]
		}
		out = append(out, Message{Role: "system", Content: pre})
	}
	for _, m := range msgs {
		switch {
		case m.Role == "tool":
			block := "<tool_response>\n" + m.Content + "\n</tool_response>"
			if n := len(out); n > 0 && out[n-1].Role == "user" && strings.HasSuffix(out[n-1].Content, "</tool_response>") {
				out[n-1].Content += "\n" + block
				continue
			}
			out = append(out, Message{Role: "user", Content: block})
		case len(m.ToolCalls) > 0:
			var b strings.Builder
			b.WriteString(m.Content)
			for _, c := range m.ToolCalls {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>", pyJSONString(c.Name), pyJSON([]byte(c.Arguments)))
			}
			out = append(out, Message{Role: m.Role, Content: b.String()})
		default:
			out = append(out, Message{Role: m.Role, Content: m.Content})
		}
	}
	o.Tools = nil
	return out, o
}

// hasCalls reports whether msgs hold an assistant's calls or a tool
// result that answers one (a tool message without an id is a plain
// message, rendered by the template as it is).
func hasCalls(msgs []Message) bool {
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			return true
		}
	}
	return false
}

// toolsPreamble describes tools in the Hermes format, in the words of
// Qwen2.5's template.
func toolsPreamble(tools []Tool) string {
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for _, t := range tools {
		b.WriteString("\n")
		b.WriteString(toolJSON(t))
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
		"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String()
}

// toolJSON is a tool as tojson writes the value a template gets.
func toolJSON(t Tool) string {
	var b strings.Builder
	b.WriteString(`{"type": "function", "function": {"name": ` + pyJSONString(t.Name))
	if t.Description != "" {
		b.WriteString(`, "description": ` + pyJSONString(t.Description))
	}
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		b.WriteString(`, "parameters": ` + pyJSON(t.Parameters))
	}
	b.WriteString("}}")
	return b.String()
}

// pyJSONString is s as Python's json.dumps(ensure_ascii=False) writes it.
func pyJSONString(s string) string {
	var b strings.Builder
	writePyString(&b, s)
	return b.String()
}

func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyJSON re-encodes a JSON text as Python's json.dumps writes it (", "
// and ": " separators, keys in their order, no ASCII escaping); text that
// is not JSON is written as a JSON string.
func pyJSON(raw []byte) string {
	v, err := decodeOrdered(raw, nil)
	if err != nil {
		return pyJSONString(string(raw))
	}
	var b strings.Builder
	writePy(&b, v)
	return b.String()
}

// writePy writes a decoded value as Python's json.dumps does.
func writePy(b *strings.Builder, v jinja.Value) {
	switch {
	case v.IsDict():
		d := v.AsDict()
		b.WriteByte('{')
		for i, k := range d.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyString(b, k)
			b.WriteString(": ")
			writePy(b, d.Data[k])
		}
		b.WriteByte('}')
	case v.IsList():
		b.WriteByte('[')
		for i, item := range v.AsList().Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writePy(b, item)
		}
		b.WriteByte(']')
	case v.IsString():
		writePyString(b, v.AsString())
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(map[bool]string{true: "true", false: "false"}[v.AsBool()])
	default:
		b.WriteString(v.String()) // numbers
	}
}

// maxJSONDepth bounds the nesting decodeOrdered follows.
const maxJSONDepth = 256

// errDepth is a JSON text nested deeper than maxJSONDepth.
var errDepth = errors.New("chat: JSON nested too deep")

// decodeOrdered decodes one JSON text into template values, objects as
// dicts that keep their keys' order and strings escaped by esc (nil:
// as they are).
func decodeOrdered(raw []byte, esc *escaper) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, esc, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err == nil {
		return jinja.Undefined(), errors.New("chat: data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, esc *escaper, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), errDepth
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec, esc, depth+1)
				if err != nil {
					return v, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
		d := jinja.NewDict()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return jinja.Undefined(), fmt.Errorf("chat: %w", err)
			}
			v, err := decodeValue(dec, esc, depth+1)
			if err != nil {
				return v, err
			}
			d.AsDict().Set(esc.text(k.(string)), v)
		}
		_, err := dec.Token()
		return d, err
	case string:
		return jinja.NewString(esc.text(t)), nil
	}
	return jinja.FromGoValue(tok), nil
}

// text is s escaped, or s for a nil escaper.
func (e *escaper) text(s string) string {
	if e == nil {
		return s
	}
	return e.escape(s)
}

// dict builds a template dict of the key-value pairs kv, in order.
func dict(kv ...any) jinja.Value {
	d := jinja.NewDict()
	for i := 0; i+1 < len(kv); i += 2 {
		d.AsDict().Set(kv[i].(string), kv[i+1].(jinja.Value))
	}
	return d
}

// messageValues are the template's messages: role and content, an
// assistant's tool_calls and a tool result's tool_call_id when they have
// them (absent otherwise: templates test whether they are defined).
func messageValues(msgs []Message, esc *escaper) jinja.Value {
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := dict("role", jinja.NewString(esc.text(m.Role)), "content", jinja.NewString(esc.text(m.Content)))
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				calls[j] = dict("id", jinja.NewString(esc.text(c.ID)), "type", jinja.NewString("function"),
					"function", dict("name", jinja.NewString(esc.text(c.Name)), "arguments", argumentsValue(c.Arguments, esc)))
			}
			d.AsDict().Set("tool_calls", jinja.NewList(calls))
		}
		if m.ToolCallID != "" {
			d.AsDict().Set("tool_call_id", jinja.NewString(esc.text(m.ToolCallID)))
		}
		list[i] = d
	}
	return jinja.NewList(list)
}

// argumentsValue is a call's arguments as templates expect them: the
// decoded JSON object, or the text when it is not one.
func argumentsValue(args string, esc *escaper) jinja.Value {
	if v, err := decodeOrdered([]byte(args), esc); err == nil && v.IsDict() {
		return v
	}
	return jinja.NewString(esc.text(args))
}

// toolValues are the template's tools: OpenAI's shape, {"type":
// "function", "function": {"name", "description", "parameters"}}, the
// last two only when given.
func toolValues(tools []Tool, esc *escaper) jinja.Value {
	list := make([]jinja.Value, len(tools))
	for i, t := range tools {
		fn := dict("name", jinja.NewString(esc.text(t.Name)))
		if t.Description != "" {
			fn.AsDict().Set("description", jinja.NewString(esc.text(t.Description)))
		}
		if len(bytes.TrimSpace(t.Parameters)) > 0 {
			p, err := decodeOrdered(t.Parameters, esc)
			if err != nil {
				p = jinja.NewString(esc.text(string(t.Parameters)))
			}
			fn.AsDict().Set("parameters", p)
		}
		list[i] = dict("type", jinja.NewString("function"), "function", fn)
	}
	return jinja.NewList(list)
}
