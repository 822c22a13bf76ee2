package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/constrain"
)

// Tool calling on /v1/chat/completions. The request's tools go to the
// model's chat template (chat.Options.Tools); the output is read back by
// a chat.CallParser in the template's call format, into tool_calls (and,
// streamed, delta.tool_calls: id, type and name first, then the
// arguments in pieces). tool_choice "required" or a named function
// forces calls: the output is constrained to the format's call syntax
// over the functions' parameters schemas (constrain.Calls), on every
// model the request visits. "none" leaves the tools out of the prompt.

// Bounds of a request's tools, beyond the body's size.
const (
	maxTools          = constrain.MaxFunctions // tools per request, as OpenAI
	maxToolName       = 64                     // a function name's bytes, as OpenAI
	maxToolDesc       = 16 << 10               // a description's bytes
	maxCallsPerMsg    = 128                    // an assistant message's tool_calls
	maxToolCallID     = 256                    // a call id's bytes
	maxParameterDepth = constrain.MaxSchemaDepth
)

// toolParams are the tool fields of a chat request, read by toolSpec.
type toolParams struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	spec              *toolSpec       // set by readChat: nil when the request has no tools in play
}

// messageToolParts are the tool fields of a chat message.
type messageToolParts struct {
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
}

// toolSpec is a request's tools in play: what the prompt shows, how the
// output is read and, for a forced call, its grammar.
type toolSpec struct {
	tools    []chat.Tool
	names    []string
	format   chat.CallFormat
	forced   []int // the functions a forced call may call (nil: auto)
	named    bool  // tool_choice named the one function
	parallel bool
}

// toolSpec validates the request's tools, tool_choice and
// parallel_tool_calls for deployment d. It returns nil when no tools are
// in play (none given, or tool_choice "none").
func (p *toolParams) toolSpec(d *deployment) (*toolSpec, *apiError) {
	tools, aerr := parseTools(p.Tools)
	if aerr != nil {
		return nil, aerr
	}
	parallel := true
	if !isNull(p.ParallelToolCalls) {
		if json.Unmarshal(p.ParallelToolCalls, &parallel) != nil {
			return nil, badRequest("parallel_tool_calls", "invalid_type", "parallel_tool_calls must be a boolean")
		}
	}
	mode, named, aerr := parseToolChoice(p.ToolChoice)
	if aerr != nil {
		return nil, aerr
	}
	if len(tools) == 0 {
		if mode == "required" || named != "" {
			return nil, badRequest("tool_choice", "invalid_value", "tool_choice %q needs tools", mode)
		}
		return nil, nil
	}
	if mode == "none" {
		return nil, nil
	}
	ts := &toolSpec{tools: tools, format: d.template.CallFormat(), parallel: parallel}
	for _, t := range tools {
		ts.names = append(ts.names, t.Name)
	}
	switch {
	case named != "":
		i := slices.Index(ts.names, named)
		if i < 0 {
			return nil, badRequest("tool_choice.function.name", "invalid_value", "tool_choice names %s, which is not among the tools", clip(named))
		}
		ts.forced, ts.named = []int{i}, true
	case mode == "required":
		for i := range tools {
			ts.forced = append(ts.forced, i)
		}
	}
	return ts, nil
}

// parseTools reads tools: null, or a list of at most maxTools function
// tools with distinct valid names.
func parseTools(raw json.RawMessage) ([]chat.Tool, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, badRequest("tools", "invalid_type", "tools must be a list of tools")
	}
	if len(list) > maxTools {
		return nil, badRequest("tools", "invalid_value", "At most %d tools, got %d", maxTools, len(list))
	}
	tools := make([]chat.Tool, 0, len(list))
	for i, el := range list {
		t, aerr := parseTool(el, fmt.Sprintf("tools[%d]", i))
		if aerr != nil {
			return nil, aerr
		}
		if slices.ContainsFunc(tools, func(o chat.Tool) bool { return o.Name == t.Name }) {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "invalid_value", "Two tools are named %s", clip(t.Name))
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// parseTool reads one tool, named pn in errors.
func parseTool(raw json.RawMessage, pn string) (chat.Tool, *apiError) {
	var t struct {
		Type     *string         `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &t) != nil {
		return chat.Tool{}, badRequest(pn, "invalid_type", "%s must be an object: {\"type\": \"function\", \"function\": {...}}", pn)
	}
	switch {
	case t.Type == nil:
		return chat.Tool{}, badRequest(pn+".type", "missing_required_parameter", "%s.type is missing (want \"function\")", pn)
	case *t.Type != "function":
		return chat.Tool{}, badRequest(pn+".type", "invalid_value", "%s.type %s: only function tools are supported", pn, clip(*t.Type))
	case !isObject(t.Function):
		return chat.Tool{}, badRequest(pn+".function", "missing_required_parameter", "%s.function must be an object with a name", pn)
	}
	var f struct {
		Name        json.RawMessage `json:"name"`
		Description json.RawMessage `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	_ = json.Unmarshal(t.Function, &f) // an object: its members' types are checked one by one
	name, aerr := optString(f.Name, pn+".function.name")
	if aerr == nil {
		aerr = checkName(name, pn+".function.name")
	}
	if aerr != nil {
		return chat.Tool{}, aerr
	}
	out := chat.Tool{Name: *name}
	desc, aerr := optString(f.Description, pn+".function.description")
	switch {
	case aerr != nil:
		return chat.Tool{}, aerr
	case desc != nil && len(*desc) > maxToolDesc:
		return chat.Tool{}, badRequest(pn+".function.description", "invalid_value", "%s.function.description has %d bytes, more than %d", pn, len(*desc), maxToolDesc)
	case desc != nil:
		out.Description = *desc
	}
	if !isNull(f.Parameters) {
		if !isObject(f.Parameters) {
			return chat.Tool{}, badRequest(pn+".function.parameters", "invalid_type", "%s.function.parameters must be a JSON Schema object", pn)
		}
		if len(f.Parameters) > constrain.MaxSchemaBytes || constrain.JSONDepth(f.Parameters) > maxParameterDepth {
			return chat.Tool{}, badRequest(pn+".function.parameters", "schema_too_large", "%s.function.parameters exceeds %d bytes or %d levels of nesting",
				pn, constrain.MaxSchemaBytes, maxParameterDepth)
		}
		out.Parameters = bytes.TrimSpace(f.Parameters)
	}
	return out, nil
}

// optString reads an optional string member named pn (nil: absent or
// null).
func optString(raw json.RawMessage, pn string) (*string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, badRequest(pn, "invalid_type", "%s must be a string", pn)
	}
	return &s, nil
}

// typeWords words a JSON type error of a nested object.
func typeWords(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must be a %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return "not valid JSON"
}

// checkName checks a function name: 1 to maxToolName bytes of a-z, A-Z,
// 0-9, underscores and dashes (OpenAI's rule).
func checkName(name *string, pn string) *apiError {
	if name == nil || *name == "" {
		return badRequest(pn, "missing_required_parameter", "%s is missing", pn)
	}
	if len(*name) > maxToolName {
		return badRequest(pn, "invalid_value", "%s has %d bytes, more than %d", pn, len(*name), maxToolName)
	}
	for _, c := range []byte(*name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return badRequest(pn, "invalid_value", "%s %s: use only a-z, A-Z, 0-9, underscores and dashes", pn, clip(*name))
		}
	}
	return nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// parseToolChoice reads tool_choice: "none", "auto", "required" or
// {"type": "function", "function": {"name": ...}}; absent is "auto".
func parseToolChoice(raw json.RawMessage) (mode, named string, _ *apiError) {
	if isNull(raw) {
		return "auto", "", nil
	}
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "none", "auto", "required":
			return mode, "", nil
		}
		return "", "", badRequest("tool_choice", "invalid_value", "tool_choice %s: want none, auto, required or a named function", clip(mode))
	}
	var c struct {
		Type     string `json:"type"`
		Function *struct {
			Name *string `json:"name"`
		} `json:"function"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &c) != nil {
		return "", "", badRequest("tool_choice", "invalid_type", "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	if c.Type != "function" {
		return "", "", badRequest("tool_choice.type", "invalid_value", "tool_choice.type %s: only function is supported", clip(c.Type))
	}
	if c.Function == nil {
		return "", "", badRequest("tool_choice.function", "missing_required_parameter", "tool_choice.function is missing")
	}
	if aerr := checkName(c.Function.Name, "tool_choice.function.name"); aerr != nil {
		return "", "", aerr
	}
	return "function", *c.Function.Name, nil
}

// readToolParts reads a message's tool_calls (an assistant's) and
// tool_call_id (a tool result's) into out, message i.
func (m *messageToolParts) readToolParts(i int, out *chat.Message) *apiError {
	pn := fmt.Sprintf("messages[%d]", i)
	if !isNull(m.ToolCallID) {
		if err := json.Unmarshal(m.ToolCallID, &out.ToolCallID); err != nil {
			return badRequest(pn+".tool_call_id", "invalid_type", "%s.tool_call_id must be a string", pn)
		}
		if len(out.ToolCallID) > maxToolCallID {
			return badRequest(pn+".tool_call_id", "invalid_value", "%s.tool_call_id has %d bytes, more than %d", pn, len(out.ToolCallID), maxToolCallID)
		}
		if out.Role != "tool" {
			return badRequest(pn+".tool_call_id", "invalid_value", "%s.tool_call_id is only for messages of role tool", pn)
		}
	}
	if isNull(m.ToolCalls) {
		return nil
	}
	var calls []json.RawMessage
	if json.Unmarshal(m.ToolCalls, &calls) != nil {
		return badRequest(pn+".tool_calls", "invalid_type", "%s.tool_calls must be a list", pn)
	}
	switch {
	case len(calls) > 0 && out.Role != "assistant":
		return badRequest(pn+".tool_calls", "invalid_value", "%s.tool_calls is only for assistant messages", pn)
	case len(calls) > maxCallsPerMsg:
		return badRequest(pn+".tool_calls", "invalid_value", "%s.tool_calls has %d calls, more than %d", pn, len(calls), maxCallsPerMsg)
	}
	for j, raw := range calls {
		c, aerr := readToolCall(raw, fmt.Sprintf("%s.tool_calls[%d]", pn, j))
		if aerr != nil {
			return aerr
		}
		out.ToolCalls = append(out.ToolCalls, c)
	}
	return nil
}

// readToolCall reads one call of an assistant message, named pn.
func readToolCall(raw json.RawMessage, pn string) (chat.ToolCall, *apiError) {
	var c struct {
		ID       *string `json:"id"`
		Type     *string `json:"type"`
		Function *struct {
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	}
	if !isObject(raw) {
		return chat.ToolCall{}, badRequest(pn, "invalid_type", "%s must be an object", pn)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return chat.ToolCall{}, badRequest(pn, "invalid_type", "%s: %s", pn, typeWords(err))
	}
	switch {
	case c.ID == nil || *c.ID == "":
		return chat.ToolCall{}, badRequest(pn+".id", "missing_required_parameter", "%s.id is missing", pn)
	case len(*c.ID) > maxToolCallID:
		return chat.ToolCall{}, badRequest(pn+".id", "invalid_value", "%s.id has %d bytes, more than %d", pn, len(*c.ID), maxToolCallID)
	case c.Type != nil && *c.Type != "function":
		return chat.ToolCall{}, badRequest(pn+".type", "invalid_value", "%s.type %s: only function calls are supported", pn, clip(*c.Type))
	case c.Function == nil:
		return chat.ToolCall{}, badRequest(pn+".function", "missing_required_parameter", "%s.function is missing", pn)
	}
	if aerr := checkName(c.Function.Name, pn+".function.name"); aerr != nil {
		return chat.ToolCall{}, aerr
	}
	if c.Function.Arguments == nil {
		return chat.ToolCall{}, badRequest(pn+".function.arguments", "missing_required_parameter", "%s.function.arguments is missing (a JSON text)", pn)
	}
	return chat.ToolCall{ID: *c.ID, Name: *c.Function.Name, Arguments: *c.Function.Arguments}, nil
}

// promptTools are the tools the prompt shows (none without a spec).
func (ts *toolSpec) promptTools() []chat.Tool {
	if ts == nil {
		return nil
	}
	return ts.tools
}

// apply sets g up for the tools: the control tokens that mark calls in
// the template's format keep their text in the output (the parser reads
// them), and a required or named tool choice forces calls: g's output
// must be calls in the template's syntax of the allowed functions, their
// arguments matching the parameters schemas. sp are the request's
// sampling parameters (a response_format and ignore_eos conflict).
func (ts *toolSpec) apply(g *genRequest, sp *SamplingParams) *apiError {
	if ts == nil {
		return nil
	}
	for _, m := range ts.format.Markers() {
		if id, ok := g.dep.text.special(m); ok && g.dep.text.control(id) {
			if g.markers == nil {
				g.markers = map[int32]string{}
			}
			g.markers[id] = m
		}
	}
	if ts.forced == nil {
		return nil
	}
	if len(sp.JSONSchema) > 0 {
		return badRequest("tool_choice", "invalid_value", "A required or named tool_choice cannot be combined with response_format")
	}
	if sp.IgnoreEOS {
		return badRequest("tool_choice", "invalid_value", "A required or named tool_choice cannot be combined with ignore_eos: the output ends where the calls do")
	}
	syn := ts.format.Syntax()
	c := constrain.Calls{Begin: syn.Begin, End: syn.End, Open: syn.Open, Mid: syn.Mid, Close: syn.Close, Sep: syn.Sep,
		Parallel: syn.Parallel && ts.parallel && !ts.named} // a named function: one call of it
	for _, i := range ts.forced {
		c.Functions = append(c.Functions, constrain.Function{Name: ts.tools[i].Name, Parameters: ts.tools[i].Parameters})
	}
	_, text, err := constrain.CompileCalls(c)
	if err != nil {
		return callsError(err, ts.forced)
	}
	g.params.Schema = string(text)
	return nil
}

// callsError words a call grammar's error, naming the tool it concerns.
func callsError(err error, forced []int) *apiError {
	code := "invalid_value"
	if errors.Is(err, constrain.ErrLimit) {
		code = "schema_too_large"
	}
	var fe *constrain.FunctionError
	if errors.As(err, &fe) && fe.Index < len(forced) {
		pn := fmt.Sprintf("tools[%d].function.parameters", forced[fe.Index])
		return badRequest(pn, code, "%s: %v", pn, fe.Err)
	}
	return badRequest("tools", code, "tools: %v", err)
}

// chatMessageOut is a choice's assistant message: content null when the
// answer is only calls.
type chatMessageOut struct {
	Role      string        `json:"role"`
	Content   *string       `json:"content"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

// toolCallOut is a call in a response (OpenAI's tool_calls[i]); in a
// streamed delta it has its index, and id, type and name only in the
// call's first chunk.
type toolCallOut struct {
	Index    *int            `json:"index,omitempty"`
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function toolFunctionOut `json:"function"`
}

// toolFunctionOut is a call's function and (a piece of) its arguments.
type toolFunctionOut struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// callID returns a fresh call id: "call_" and 24 letters and digits.
func callID() string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b strings.Builder
	b.WriteString("call_")
	for range 24 {
		b.WriteByte(digits[rand.IntN(len(digits))])
	}
	return b.String()
}

// answer is choice res's message and finish reason: its content and
// calls read back, "tool_calls" when it called and stopped by itself.
func (ts *toolSpec) answer(res *genResult) (*chatMessageOut, *string) {
	if ts == nil {
		return &chatMessageOut{Role: "assistant", Content: &res.text}, &res.reason
	}
	content, calls := chat.ParseCalls(ts.format, ts.names, res.text)
	if !ts.parallel && len(calls) > 1 {
		calls = calls[:1]
	}
	msg := &chatMessageOut{Role: "assistant"}
	if content != "" || len(calls) == 0 {
		msg.Content = &content
	}
	for _, c := range calls {
		msg.ToolCalls = append(msg.ToolCalls, toolCallOut{ID: callID(), Type: "function", Function: toolFunctionOut{Name: c.Name, Arguments: c.Arguments}})
	}
	return msg, finishReason(res.reason, len(calls) > 0)
}

// finishReason is "tool_calls" for an output with calls that stopped by
// itself, else reason.
func finishReason(reason string, called bool) *string {
	if called && reason == "stop" {
		r := "tool_calls"
		return &r
	}
	return &reason
}

// callStream turns one streamed choice's text into content and
// tool-call deltas.
type callStream struct {
	p        *chat.CallParser
	parallel bool
	called   bool
}

// newStreams returns a call stream per choice, nil without tools.
func (ts *toolSpec) newStreams(n int) []*callStream {
	if ts == nil {
		return nil
	}
	out := make([]*callStream, n)
	for i := range out {
		out[i] = &callStream{p: chat.NewCallParser(ts.format, ts.names), parallel: ts.parallel}
	}
	return out
}

// deltas turns parser events into deltas: content, a call's first chunk
// (index, id, type, name, empty arguments), pieces of its arguments.
func (cs *callStream) deltas(evs []chat.CallEvent) []*chatOut {
	var out []*chatOut
	for _, e := range evs {
		if e.Kind != chat.Content && e.Index > 0 && !cs.parallel {
			continue // parallel_tool_calls false: the first call only
		}
		idx := e.Index
		switch e.Kind {
		case chat.Content:
			text := e.Text
			out = append(out, &chatOut{Content: &text})
		case chat.CallStart:
			cs.called = true
			out = append(out, &chatOut{ToolCalls: []toolCallOut{{Index: &idx, ID: callID(), Type: "function", Function: toolFunctionOut{Name: e.Text}}}})
		case chat.CallArgs:
			out = append(out, &chatOut{ToolCalls: []toolCallOut{{Index: &idx, Function: toolFunctionOut{Arguments: e.Text}}}})
		}
	}
	return out
}

// feed sends the deltas of a piece of text with send; the token's
// logprobs go with the first, or alone when the text settled nothing.
func (cs *callStream) feed(text string, lp *chatLogprobs, send func(*chatOut, *chatLogprobs) error) error {
	ds := cs.deltas(cs.p.Feed(text))
	if len(ds) == 0 && lp != nil && len(lp.Content) > 0 {
		return send(&chatOut{}, lp)
	}
	for _, d := range ds {
		if err := send(d, lp); err != nil {
			return err
		}
		lp = nil
	}
	return nil
}

// finish sends what the parser still held and returns the finish reason.
func (cs *callStream) finish(reason string, send func(*chatOut, *chatLogprobs) error) (*string, error) {
	for _, d := range cs.deltas(cs.p.Finish()) {
		if err := send(d, nil); err != nil {
			return nil, err
		}
	}
	return finishReason(reason, cs.called), nil
}

// sendText sends the text of a delta of choice i: as content, or through
// the choice's call stream.
func sendText(calls []*callStream, i int, text string, lp *chatLogprobs, send func(*chatOut, *chatLogprobs) error) error {
	if calls == nil {
		return send(&chatOut{Content: &text}, lp)
	}
	return calls[i].feed(text, lp, send)
}

// finishStream sends what choice i's call stream still held and returns
// its finish reason (reason without calls).
func finishStream(calls []*callStream, i int, reason string, send func(*chatOut, *chatLogprobs) error) (*string, error) {
	if calls == nil {
		return &reason, nil
	}
	return calls[i].finish(reason, send)
}

// encodeChatTools renders a conversation, and tools, with d's chat
// template and encodes it.
func (d *deployment) encodeChatTools(msgs []chat.Message, tools []chat.Tool) ([]int32, *apiError) {
	if len(tools) == 0 {
		return d.encodeChat(msgs)
	}
	o := d.text.chat
	o.Tools = tools
	segs, err := d.template.Render(msgs, o)
	if err != nil {
		return nil, badRequest("messages", "invalid_value", "%v", err)
	}
	return d.text.encodeChat(segs), nil
}
