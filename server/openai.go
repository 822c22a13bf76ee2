package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/config"
)

// The OpenAI layer is pure conversion around the native handler: each
// handler turns its request into a NativeRequest (a chat is rendered with
// the model's template into input_ids), runs Server.generate, and turns the
// native result or deltas into OpenAI's shapes.

// streamOptions is OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// commonParams are the parameters completions and chat share.
type commonParams struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	Stop          json.RawMessage `json:"stop"`
	Seed          *uint64         `json:"seed"`
	IgnoreEOS     bool            `json:"ignore_eos"`
	// ResponseFormat is {"type": "text"}, {"type": "json_object"} or
	// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}.
	ResponseFormat *responseFormat `json:"response_format"`
	penaltyParams
}

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// schema returns the native json_schema for a response_format.
func (f *responseFormat) schema() (json.RawMessage, *apiError) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"object"}`), nil
	case "json_schema":
		if f.JSONSchema == nil || len(bytes.TrimSpace(f.JSONSchema.Schema)) == 0 {
			return nil, badRequest("response_format.json_schema.schema", "missing_required_parameter", "response_format json_schema needs json_schema.schema")
		}
		return f.JSONSchema.Schema, nil
	}
	return nil, badRequest("response_format.type", "invalid_value", "response_format type %q: want text, json_object or json_schema", f.Type)
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	commonParams
	// Prompt is a string, a one-element list of strings, or token ids.
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs, when set, adds each token's log-probability and the
	// Logprobs most likely tokens.
	Logprobs *int `json:"logprobs"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	commonParams
	// Messages is the conversation; content is a string or text parts.
	Messages []chatMessage `json:"messages"`
	// MaxCompletionTokens overrides max_tokens when given.
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	// Logprobs adds each token's log-probability, TopLogprobs that many
	// most likely tokens (needs Logprobs).
	Logprobs    bool `json:"logprobs"`
	TopLogprobs *int `json:"top_logprobs"`
	// tools, tool_choice and parallel_tool_calls (tools.go).
	toolParams
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	messageToolParts
}

// toNative converts the shared parameters.
func (c *commonParams) toNative() (NativeRequest, *apiError) {
	nr := NativeRequest{Model: c.Model, Stream: c.Stream}
	if c.StreamOptions != nil && !c.Stream {
		return nr, badRequest("stream_options", "invalid_value", "stream_options is only allowed when stream is true")
	}
	sp := &nr.SamplingParams
	sp.MaxNewTokens, sp.Temperature, sp.TopP, sp.TopK, sp.Seed, sp.IgnoreEOS = c.MaxTokens, c.Temperature, c.TopP, c.TopK, c.Seed, c.IgnoreEOS
	sp.penaltyParams = c.penaltyParams
	stop, aerr := parseStop(c.Stop)
	if aerr != nil {
		return nr, aerr
	}
	sp.Stop = stop
	if sp.JSONSchema, aerr = c.ResponseFormat.schema(); aerr != nil {
		return nr, aerr
	}
	return nr, nil
}

// parseStop accepts null, a string or a list of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or a list of strings")
	}
	return many, nil
}

// openAI param names for native ones.
var (
	completionNames = paramNames{"text": "prompt", "input_ids": "prompt", "sampling_params.max_new_tokens": "max_tokens",
		"top_logprobs_num": "logprobs", "return_logprob": "logprobs",
		"sampling_params.json_schema": "response_format"}
	chatNames = paramNames{"text": "messages", "input_ids": "messages", "sampling_params.max_new_tokens": "max_tokens",
		"top_logprobs_num": "top_logprobs", "return_logprob": "logprobs",
		"sampling_params.json_schema": "response_format"}
)

// completionChoice is a choice of a text completion (or one of its chunks).
type completionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// completionResponse is a text completion or one of its chunks.
type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
	Routing *Routing           `json:"routing,omitempty"`
}

// readCompletion decodes and validates a /v1/completions body.
func (s *Server) readCompletion(w http.ResponseWriter, r *http.Request) (*CompletionRequest, *genRequest, *apiError) {
	var req CompletionRequest
	if aerr := s.decodeFields(w, r, completionFields, &req); aerr != nil {
		return nil, nil, aerr
	}
	nr, aerr := req.toNative()
	if aerr == nil {
		aerr = req.check(&nr)
	}
	if req.Logprobs != nil {
		nr.ReturnLogprob, nr.TopLogprobsNum = true, *req.Logprobs
	}
	if aerr != nil {
		return nil, nil, aerr
	}
	g, aerr := s.prepare(&nr, completionNames)
	return &req, g, aerr
}

// handleCompletions converts /v1/completions to the native path.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	req, g, aerr := s.readCompletion(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	created := time.Now().Unix()
	resp := func(id string, choices []completionChoice) completionResponse {
		return completionResponse{ID: id, Object: "text_completion", Created: created, Model: g.dep.name, Choices: choices}
	}
	if !g.stream {
		rs, err := s.generateN(r.Context(), g, func(int, delta) error { return nil })
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := resp("cmpl-"+rs[0].id, make([]completionChoice, len(rs)))
		for i, res := range rs {
			out.Choices[i] = completionChoice{Index: i, Text: res.text, FinishReason: &res.reason, Logprobs: g.completionLogprobs(res.lps, res.by, 0)}
		}
		out.Usage, out.Routing = g.usage(rs...), g.routing(rs...)
		writeJSON(w, http.StatusOK, out)
		return
	}
	ev := newSSE(w)
	ev.usage = req.StreamOptions.includeUsage()
	id := ""
	offsets := make([]int, g.n)
	rs, err := s.generateN(r.Context(), g, func(i int, d delta) error {
		switch {
		case d.start && id == "":
			id = "cmpl-" + d.id
			return ev.open()
		case d.flush:
			return ev.flush()
		case d.text == "" && len(d.lps) == 0:
			return nil
		}
		lp := g.completionLogprobs(d.lps, d.by, offsets[i])
		offsets[i] += len(d.text)
		return ev.send(resp(id, []completionChoice{{Index: i, Text: d.text, Logprobs: lp}}))
	})
	if err != nil {
		s.failStream(ev, w, r, err)
		return
	}
	for i, res := range rs {
		final := resp(id, []completionChoice{{Index: i, FinishReason: &res.reason}})
		if i == len(rs)-1 {
			final.Routing = g.routing(rs...)
		}
		if ev.send(final) != nil {
			return
		}
	}
	if ev.usage {
		u := resp(id, []completionChoice{})
		u.Usage, u.Routing = g.usage(rs...), g.routing(rs...)
		if ev.send(u) != nil {
			return
		}
	}
	_ = ev.done()
}

// check converts the prompt.
func (req *CompletionRequest) check(nr *NativeRequest) *apiError {
	raw := bytes.TrimSpace(req.Prompt)
	if len(raw) == 0 || string(raw) == "null" {
		return badRequest("prompt", "missing_required_parameter", "Missing required parameter: prompt")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		nr.Text = &text
		return nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return badRequest("prompt", "unsupported_value", "Give one prompt per request (got %d)", len(texts))
		}
		nr.Text = &texts[0]
		return nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return badRequest("prompt", "invalid_value", "The prompt is empty")
		}
		nr.InputIDs = ids
		return nil
	}
	var idLists [][]int32
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) == 1 && len(idLists[0]) > 0 {
		nr.InputIDs = idLists[0]
		return nil
	}
	return badRequest("prompt", "invalid_type", "prompt must be a string, a list of one string, or a list of token ids")
}

// chatChoice is a choice of a chat completion.
type chatChoice struct {
	Index        int             `json:"index"`
	Message      *chatMessageOut `json:"message,omitempty"`
	Delta        *chatOut        `json:"delta,omitempty"`
	Logprobs     any             `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// chatOut is an assistant message or a delta of one.
type chatOut struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

// chatResponse is a chat completion or one of its chunks.
type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
	Routing *Routing     `json:"routing,omitempty"`
}

// readChat decodes and validates a /v1/chat/completions body.
func (s *Server) readChat(w http.ResponseWriter, r *http.Request) (*ChatRequest, *genRequest, *apiError) {
	var req ChatRequest
	if aerr := s.decodeFields(w, r, chatFields, &req); aerr != nil {
		return nil, nil, aerr
	}
	if req.MaxCompletionTokens != nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	nr, aerr := req.toNative()
	nr.ReturnLogprob = req.Logprobs
	if req.TopLogprobs != nil {
		nr.TopLogprobsNum = *req.TopLogprobs
	}
	var msgs []chat.Message
	if aerr == nil {
		msgs, aerr = req.check()
	}
	var d *deployment
	if aerr == nil {
		d, aerr = s.deployment(req.Model)
	}
	if aerr != nil {
		return nil, nil, aerr
	}
	if req.spec, aerr = req.toolSpec(d); aerr != nil {
		return nil, nil, aerr
	}
	if nr.InputIDs, aerr = d.encodeChatTools(msgs, req.spec.promptTools()); aerr != nil {
		return nil, nil, aerr
	}
	g, aerr := s.prepare(&nr, chatNames)
	if aerr == nil {
		aerr = req.spec.apply(g, &nr.SamplingParams)
	}
	return &req, g, aerr
}

// handleChat converts /v1/chat/completions to the native path.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	req, g, aerr := s.readChat(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	created := time.Now().Unix()
	resp := func(object, id string, choices []chatChoice) chatResponse {
		return chatResponse{ID: id, Object: object, Created: created, Model: g.dep.name, Choices: choices}
	}
	if !g.stream {
		rs, err := s.generateN(r.Context(), g, func(int, delta) error { return nil })
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := resp("chat.completion", "chatcmpl-"+rs[0].id, make([]chatChoice, len(rs)))
		for i, res := range rs {
			msg, reason := req.spec.answer(res)
			out.Choices[i] = chatChoice{Index: i, Message: msg, FinishReason: reason, Logprobs: g.chatLogprobs(res.lps, res.by)}
		}
		out.Usage, out.Routing = g.usage(rs...), g.routing(rs...)
		writeJSON(w, http.StatusOK, out)
		return
	}
	ev := newSSE(w)
	ev.usage = req.StreamOptions.includeUsage()
	id := ""
	chunk := func(c chatChoice) chatResponse { return resp("chat.completion.chunk", id, []chatChoice{c}) }
	send := func(i int) func(*chatOut, *chatLogprobs) error {
		return func(o *chatOut, lp *chatLogprobs) error {
			return ev.send(chunk(chatChoice{Index: i, Delta: o, Logprobs: lp}))
		}
	}
	calls := req.spec.newStreams(g.n) // tool calls read from the text (nil: the text is content)
	rs, err := s.generateN(r.Context(), g, func(i int, d delta) error {
		switch {
		case d.start:
			if id == "" {
				id = "chatcmpl-" + d.id
			}
			if err := ev.open(); err != nil {
				return err
			}
			empty := ""
			if err := ev.send(chunk(chatChoice{Index: i, Delta: &chatOut{Role: "assistant", Content: &empty}})); err != nil {
				return err
			}
			return ev.flush()
		case d.flush:
			return ev.flush()
		case d.text == "" && len(d.lps) == 0:
			return nil
		}
		return sendText(calls, i, d.text, g.chatLogprobs(d.lps, d.by), send(i))
	})
	if err != nil {
		s.failStream(ev, w, r, err)
		return
	}
	for i, res := range rs {
		reason, err := finishStream(calls, i, res.reason, send(i))
		final := chunk(chatChoice{Index: i, Delta: &chatOut{}, FinishReason: reason})
		if i == len(rs)-1 {
			final.Routing = g.routing(rs...)
		}
		if err != nil || ev.send(final) != nil {
			return
		}
	}
	if ev.usage {
		u := resp("chat.completion.chunk", id, []chatChoice{})
		u.Usage, u.Routing = g.usage(rs...), g.routing(rs...)
		if ev.send(u) != nil {
			return
		}
	}
	_ = ev.done()
}

// check validates the messages.
func (req *ChatRequest) check() ([]chat.Message, *apiError) {
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "missing_required_parameter", "Missing required parameter: messages (a non-empty list)")
	}
	out := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		case "":
			return nil, badRequest("messages", "missing_required_parameter", "messages[%d].role is missing", i)
		default:
			return nil, badRequest("messages", "invalid_value", "messages[%d].role %s: want system, developer, user, assistant or tool", i, clip(m.Role))
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		content, ok := messageText(m.Content)
		if !ok {
			return nil, badRequest("messages", "invalid_type", "messages[%d].content must be a string or a list of text parts", i)
		}
		out[i] = chat.Message{Role: role, Content: content}
		if aerr := m.readToolParts(i, &out[i]); aerr != nil {
			return nil, aerr
		}
	}
	return out, nil
}

// messageText reads content: a string, null, or a list of {type:"text"}
// parts.
func messageText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// modelCard is one entry of /v1/models.
type modelCard struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Created   int64  `json:"created"`
	OwnedBy   string `json:"owned_by"`
	Simulated bool   `json:"simulated"`
	// Description says in words what serves this name.
	Description string       `json:"description"`
	Algorithm   string       `json:"algorithm"`
	Params      any          `json:"params,omitempty"`
	Models      []modelEntry `json:"models"`
	ChatFormat  string       `json:"chat_template"`
	ContextLen  int          `json:"context_length"`
}

// modelEntry is one model behind a preset.
type modelEntry struct {
	Name          string `json:"name"`
	Engine        string `json:"engine"`
	Simulated     bool   `json:"simulated"`
	Path          string `json:"path,omitempty"`
	ContextLength int    `json:"context_length"`
	VocabSize     int    `json:"vocab_size"`
}

// handleModels lists the presets.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	cards := make([]modelCard, 0, len(s.deps))
	for _, d := range s.deps {
		cards = append(cards, d.card())
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": cards})
}

// encodeChat renders a conversation with d's chat template and encodes it.
func (d *deployment) encodeChat(msgs []chat.Message) ([]int32, *apiError) {
	segs, err := d.template.Render(msgs, d.text.chat)
	if err != nil {
		return nil, badRequest("messages", "invalid_value", "%v", err)
	}
	return d.text.encodeChat(segs), nil
}

// card is d's entry of /v1/models.
func (d *deployment) card() modelCard {
	c := modelCard{ID: d.name, Object: "model", Created: d.created, OwnedBy: "tokenrouter", Simulated: d.simulated(),
		Algorithm: d.algorithm, Params: d.params, ChatFormat: d.template.Name(), ContextLen: d.ctxLen}
	var sims, reals, embedded []string
	for _, m := range d.models {
		if _, ok := config.Embedded(m.path); ok {
			embedded = append(embedded, m.name)
		}
		c.Models = append(c.Models, modelEntry{Name: m.name, Engine: m.engine, Simulated: m.simulated, Path: m.path,
			ContextLength: m.info.ContextLength, VocabSize: m.info.VocabSize})
		if m.simulated {
			sims = append(sims, m.name)
		} else {
			reals = append(reals, m.name)
		}
	}
	desc := d.algorithm + " routing over " + strings.Join(d.names(), ", ")
	switch {
	case len(reals) == 0:
		desc += ". SIMULATED: no weights are loaded; the models are latency profiles and the text is pseudo-words."
	case len(sims) > 0:
		desc += ". Partly SIMULATED: " + strings.Join(sims, ", ") + " run no weights."
	case len(embedded) == len(reals):
		desc += " (real weights on the CPU engine, built into the binary: the tiny TinyStories pair of models/tiny)."
	default:
		desc += " (real weights on the CPU engine)."
	}
	c.Description = desc
	return c
}
