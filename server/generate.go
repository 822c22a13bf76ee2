package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// NativeRequest is the body of POST /generate. Give Text, InputIDs or
// Messages.
type NativeRequest struct {
	// Model names a preset ("" is the first preset).
	Model string `json:"model"`
	// Text is the prompt; it is tokenized with BOS when the model asks.
	Text *string `json:"text,omitempty"`
	// InputIDs is the prompt as token ids, used as given.
	InputIDs []int32 `json:"input_ids,omitempty"`
	// Messages, instead of Text or InputIDs, is a chat rendered with the
	// preset's chat template, as /v1/chat/completions renders it.
	Messages []chatMessage `json:"messages,omitempty"`
	// SamplingParams controls generation.
	SamplingParams SamplingParams `json:"sampling_params"`
	// Stream answers with server-sent events.
	Stream bool `json:"stream"`
	// ReturnLogprob adds each output token's log-probability, by the
	// model that produced it (output_token_logprobs).
	ReturnLogprob bool `json:"return_logprob,omitempty"`
	// TopLogprobsNum adds that many most likely tokens per position
	// (0 to 20; with ReturnLogprob).
	TopLogprobsNum int `json:"top_logprobs_num,omitempty"`
}

// SamplingParams are the native generation parameters.
type SamplingParams struct {
	// MaxNewTokens bounds the output (default: the server's
	// default_max_tokens, clamped to the context left).
	MaxNewTokens *int `json:"max_new_tokens,omitempty"`
	// Temperature scales logits; 0 is greedy.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP keeps the smallest set of tokens reaching probability TopP.
	TopP *float64 `json:"top_p,omitempty"`
	// TopK keeps the K most likely tokens (0 disables).
	TopK *int `json:"top_k,omitempty"`
	// Seed seeds sampling and the algorithm's random decisions.
	Seed *uint64 `json:"seed,omitempty"`
	// IgnoreEOS keeps generating past the end-of-generation tokens (EOS
	// and the vocabulary's and chat template's ends of turn).
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// Stop ends the output before the first occurrence of any string.
	Stop []string `json:"stop,omitempty"`
	// JSONSchema constrains the output to JSON matching this schema (an
	// object, or a string holding one); every model the request visits
	// masks its draws to it. {"type":"object"} asks for any JSON object.
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	penaltyParams
}

// Routing is the extension object every response carries.
type Routing struct {
	// Algorithm is the preset's routing algorithm.
	Algorithm string `json:"algorithm"`
	// TokensByModel counts output tokens by the model that produced them.
	TokensByModel map[string]int `json:"tokens_by_model"`
	// LargeModelRatio is the fraction of output tokens produced by models
	// other than the first (small) one.
	LargeModelRatio float64 `json:"large_model_ratio"`
}

// Usage is OpenAI's token accounting.
type Usage struct {
	// PromptTokens counts the prompt (with BOS and template tokens).
	PromptTokens int `json:"prompt_tokens"`
	// CompletionTokens counts the output tokens.
	CompletionTokens int `json:"completion_tokens"`
	// TotalTokens is their sum.
	TotalTokens int `json:"total_tokens"`
}

// NativeResponse is the body POST /generate answers (and, with the delta
// fields only, each streamed event).
type NativeResponse struct {
	// ID names the request.
	ID string `json:"id"`
	// Index is the choice (0 unless sampling_params.n > 1).
	Index int `json:"index"`
	// Model is the preset that served it.
	Model string `json:"model"`
	// Text is the output text (the new text in a streamed event).
	Text string `json:"text"`
	// OutputIDs are the output token ids.
	OutputIDs []int32 `json:"output_ids"`
	// ProducedBy[i] indexes Models: the model that produced OutputIDs[i].
	ProducedBy []int8 `json:"produced_by"`
	// Models names the preset's models in index order.
	Models []string `json:"models,omitempty"`
	// OutputTokenLogprobs are the output tokens' log-probabilities, when
	// return_logprob asked for them.
	OutputTokenLogprobs []nativeLogprob `json:"output_token_logprobs,omitempty"`
	// FinishReason is "length" or "stop" (null while streaming).
	FinishReason *string `json:"finish_reason"`
	// Usage and Routing are set on the final answer.
	Usage   *Usage   `json:"usage,omitempty"`
	Routing *Routing `json:"routing,omitempty"`
}

// genRequest is a validated generation request.
type genRequest struct {
	dep     *deployment
	prompt  []int32
	params  route.Params
	stop    []string
	stopIDs []int32 // tokens that end the output: the chat template's and the request's
	n       int     // independent choices
	start   time.Time
	stream  bool
	promptN int
	markers map[int32]string // control tokens whose text the output keeps: tool-call markers (tools.go)
}

// delta is newly released output: one token and its text, or text alone at
// the end. The first call of emit has start set and no content (the request
// was admitted); a call with flush set and no content ends each batch of
// tokens the runtime committed together.
type delta struct {
	start bool
	flush bool
	id    string
	text  string
	ids   []int32
	by    []int8
	lps   []engine.Logprob // with ids, when the request asked for them
}

// genResult is a finished generation.
type genResult struct {
	id     string
	text   string
	ids    []int32
	by     []int8
	lps    []engine.Logprob // parallel to ids, when the request asked for them
	reason string
}

// usage returns the token accounting of rs, the choices of g: the prompt
// counted once, the output of every choice.
func (g *genRequest) usage(rs ...*genResult) *Usage {
	n := 0
	for _, r := range rs {
		n += len(r.ids)
	}
	return &Usage{PromptTokens: g.promptN, CompletionTokens: n, TotalTokens: g.promptN + n}
}

// routing returns the per-model counts of rs, the choices of g.
func (g *genRequest) routing(rs ...*genResult) *Routing {
	rt := &Routing{Algorithm: g.dep.algorithm, TokensByModel: map[string]int{}}
	for _, m := range g.dep.models {
		rt.TokensByModel[m.name] = 0
	}
	large, all := 0, 0
	for _, r := range rs {
		for _, b := range r.by {
			if int(b) >= 0 && int(b) < len(g.dep.models) {
				rt.TokensByModel[g.dep.models[b].name]++
			}
			if b > 0 {
				large++
			}
		}
		all += len(r.by)
	}
	if all > 0 {
		rt.LargeModelRatio = float64(large) / float64(all)
	}
	return rt
}

// paramNames maps native parameter names to the names a client used.
type paramNames map[string]string

// name is the client's name of a native parameter: renamed by p, or,
// when p is set, without the sampling_params prefix.
func (p paramNames) name(native string) string {
	if n, ok := p[native]; ok {
		return n
	}
	if s, ok := strings.CutPrefix(native, "sampling_params."); ok && p != nil {
		return s
	}
	return native
}

// prepare validates a native request and turns it into a genRequest. names
// renames parameters in error messages (the OpenAI layer's names).
func (s *Server) prepare(nr *NativeRequest, names paramNames) (*genRequest, *apiError) {
	d, aerr := s.deployment(nr.Model)
	if aerr != nil {
		return nil, aerr
	}
	g := &genRequest{dep: d, start: time.Now(), stream: nr.Stream}
	if aerr := g.setPrompt(nr, names); aerr != nil {
		return nil, aerr
	}
	sp := &nr.SamplingParams
	if aerr := g.setMaxTokens(sp, names, s.cfg.DefaultMaxTokens); aerr != nil {
		return nil, aerr
	}
	if aerr := g.setSampling(sp, names); aerr != nil {
		return nil, aerr
	}
	if sp.Seed != nil {
		g.params.Seed = *sp.Seed
		g.params.Sampling.Seed = *sp.Seed
	} else {
		g.params.Seed = s.nextID.Add(1) // fresh routing draws per request
	}
	g.params.IgnoreEOS = sp.IgnoreEOS
	if aerr := g.setStop(sp, names); aerr != nil {
		return nil, aerr
	}
	if aerr := g.applyPenalties(&sp.penaltyParams, names); aerr != nil {
		return nil, aerr
	}
	if aerr := g.askLogprobs(nr, names); aerr != nil {
		return nil, aerr
	}
	if aerr := g.setSchema(sp.JSONSchema, names.name("sampling_params.json_schema")); aerr != nil {
		return nil, aerr
	}
	return g, nil
}

// setPrompt sets the prompt from the request's text or token ids (exactly
// one of them), which must not be empty.
func (g *genRequest) setPrompt(nr *NativeRequest, names paramNames) *apiError {
	d := g.dep
	switch {
	case nr.Text != nil && nr.InputIDs != nil:
		return badRequest(names.name("text"), "invalid_value", "Give %s or %s, not both", names.name("text"), names.name("input_ids"))
	case nr.Text != nil:
		g.prompt = d.text.encodeText(*nr.Text)
	case len(nr.InputIDs) > 0:
		if aerr := d.checkIDs(nr.InputIDs, names.name("input_ids")); aerr != nil {
			return aerr
		}
		g.prompt = slices.Clone(nr.InputIDs)
	default:
		return badRequest(names.name("text"), "missing_required_parameter", "Missing prompt: give %s or %s", names.name("text"), names.name("input_ids"))
	}
	if len(g.prompt) == 0 {
		return badRequest(names.name("text"), "invalid_value", "The prompt is empty and the model has no BOS token to start from")
	}
	g.promptN = len(g.prompt)
	return nil
}

// setMaxTokens sets the new-token budget: the request's, or def capped by
// the room the model's context leaves after the prompt.
func (g *genRequest) setMaxTokens(sp *SamplingParams, names paramNames, def int) *apiError {
	ctxLen := g.dep.ctxLen
	room := ctxLen - len(g.prompt)
	if room < 1 {
		return badRequest(names.name("text"), "context_length_exceeded",
			"The prompt has %d tokens; the model's context length is %d", len(g.prompt), ctxLen)
	}
	maxTok := min(def, room)
	if sp.MaxNewTokens != nil {
		maxTok = *sp.MaxNewTokens
		pn := names.name("sampling_params.max_new_tokens")
		if maxTok <= 0 {
			return badRequest(pn, "invalid_value", "%s must be at least 1, got %d", pn, maxTok)
		}
		if maxTok > room {
			return badRequest(pn, "context_length_exceeded",
				"%s = %d is too large: the prompt has %d tokens and the model's context length is %d (at most %d new tokens)",
				pn, maxTok, len(g.prompt), ctxLen, room)
		}
	}
	g.params.MaxTokens = maxTok
	return nil
}

// setSampling sets the temperature, top-p and top-k the request gives.
func (g *genRequest) setSampling(sp *SamplingParams, names paramNames) *apiError {
	if sp.Temperature != nil {
		t, pn := *sp.Temperature, names.name("sampling_params.temperature")
		if t < 0 || math.IsNaN(t) || t > 100 {
			return badRequest(pn, "invalid_value", "%s must be between 0 and 100, got %v", pn, t)
		}
		g.params.Sampling.Temperature = float32(t)
	}
	if sp.TopP != nil {
		p, pn := *sp.TopP, names.name("sampling_params.top_p")
		if !(p > 0 && p <= 1) {
			return badRequest(pn, "invalid_value", "%s must be in (0, 1], got %v", pn, p)
		}
		g.params.Sampling.TopP = float32(p)
	}
	if sp.TopK != nil {
		k, pn := *sp.TopK, names.name("sampling_params.top_k")
		if k < 0 {
			return badRequest(pn, "invalid_value", "%s must not be negative, got %d", pn, k)
		}
		g.params.Sampling.TopK = k
	}
	return nil
}

// setStop sets the stop strings: at most 4, each of at most maxStopBytes.
func (g *genRequest) setStop(sp *SamplingParams, names paramNames) *apiError {
	if len(sp.Stop) > 4 {
		pn := names.name("sampling_params.stop")
		return badRequest(pn, "invalid_value", "At most 4 %s sequences, got %d", pn, len(sp.Stop))
	}
	for _, s := range sp.Stop {
		if len(s) > maxStopBytes {
			pn := names.name("sampling_params.stop")
			return badRequest(pn, "invalid_value", "A %s sequence may have at most %d bytes, got %d", pn, maxStopBytes, len(s))
		}
	}
	g.stop = sp.Stop
	g.params.Stop = sp.Stop // every sub-server with the model's texts stops there too
	return nil
}

// maxStopBytes bounds one stop string (what the bus carries).
const maxStopBytes = 1024

// setSchema checks a request's output schema and puts it in its
// parameters. A schema in a JSON string is taken from the string.
func (g *genRequest) setSchema(raw json.RawMessage, pn string) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		raw = []byte(text)
	}
	if _, err := constrain.Compile(raw); err != nil {
		code := "invalid_value"
		if errors.Is(err, constrain.ErrLimit) {
			code = "schema_too_large" // valid, but beyond a limit the message names
		}
		return badRequest(pn, code, "%s: %v", pn, err)
	}
	if g.params.IgnoreEOS {
		return badRequest(pn, "invalid_value", "%s and ignore_eos cannot be combined: the output ends where the JSON does", pn)
	}
	g.params.Schema = string(raw)
	return nil
}

// generate runs g and calls emit with each piece of released output. It is
// the one generation path every endpoint uses. It returns an *apiError for
// refusals (admission, bad input) and the context's error when the client
// went away.
func (s *Server) generate(ctx context.Context, g *genRequest, emit func(delta) error) (*genResult, error) {
	release, aerr := s.admit()
	if aerr != nil {
		return nil, aerr
	}
	defer release()
	st, err := g.dep.r.Submit(ctx, g.prompt, g.params)
	switch {
	case errors.Is(err, deploy.ErrBadRequest):
		return nil, badRequest("", "invalid_value", "%v", strings.TrimPrefix(err.Error(), "bad request: "))
	case errors.Is(err, deploy.ErrClosed):
		return nil, errShuttingDown("The server is shutting down")
	case errors.Is(err, deploy.ErrUnavailable):
		return nil, errUnavailable(unavailableMessage(err))
	case err != nil:
		return nil, err
	}
	defer st.Close()
	s.metrics.req.promptTokens.WithLabelValues(g.dep.name).Add(float64(g.promptN))
	res := &genResult{id: fmt.Sprintf("%s-%d", s.epoch, st.ID)}
	first, err := s.relay(ctx, g, st, res, emit)
	if err != nil {
		if stoppedByShutdown(ctx) {
			// The shutdown cut the request off, not its client: the
			// client is told, and the abort counted as a shutdown.
			err, ctx = errServerShutdown(), context.WithoutCancel(ctx)
		}
		s.ended(ctx, g, res.id, nil, first, err)
		return nil, err
	}
	s.ended(ctx, g, res.id, res, first, nil)
	return res, nil
}

// relay reads st into res, calling emit with each piece of released
// output, and returns the time of the first output token.
func (s *Server) relay(ctx context.Context, g *genRequest, st *stream.Stream, res *genResult, emit func(delta) error) (first time.Time, _ error) {
	if err := emit(delta{start: true, id: res.id}); err != nil {
		return first, err
	}
	r := relayer{g: g, res: res, emit: emit, dt: detok{t: g.dep.text}, stops: newStopper(g.stop)}
	var (
		chunk stream.Chunk
		last  time.Time
	)
	for !r.ended {
		rerr := st.Recv(ctx, &chunk)
		if err := recvError(ctx, rerr, &chunk); err != nil {
			return first, err
		}
		now := time.Now()
		n0 := len(res.ids)
		if err := r.tokens(&chunk); err != nil {
			return first, err
		}
		if chunk.Done && !r.ended {
			if err := r.finish(chunk.Reason); err != nil {
				return first, err
			}
		}
		if len(res.ids) > n0 {
			if first.IsZero() {
				first = now
			}
			last = now
		}
		if err := emit(delta{flush: true}); err != nil {
			return first, err
		}
	}
	st.Close() // a stop before the end cancels the rest everywhere
	res.text, res.reason = r.text.String(), r.reason
	s.metrics.finished(g, first, last, len(res.ids), r.reason)
	return first, nil
}

// recvError is the error a received chunk (and the receive's error rerr)
// ends the request with, or nil to go on.
func recvError(ctx context.Context, rerr error, chunk *stream.Chunk) error {
	if rerr != nil && ctx.Err() == nil && errors.Is(rerr, deploy.ErrUnavailable) {
		return errUnavailable(unavailableMessage(rerr))
	}
	if rerr != nil && !chunk.Done {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(rerr, stream.ErrCancelled) {
			return errShuttingDown("The request was cancelled: the server is shutting down")
		}
		return fmt.Errorf("generate: %w", rerr)
	}
	if rerr != nil && chunk.Reason == stream.Error {
		return fmt.Errorf("generate: %w", rerr)
	}
	if chunk.Reason == stream.Cancelled {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errShuttingDown("The request was cancelled: the server is shutting down")
	}
	return nil
}

// relayer turns one request's chunks into deltas: it detokenises, watches
// for stop tokens and strings, and collects the result.
type relayer struct {
	g      *genRequest
	res    *genResult
	emit   func(delta) error
	dt     detok
	stops  *stopper
	text   strings.Builder
	ended  bool
	reason string
}

// tokens emits a delta for each token of chunk, up to a stop token or a
// stop string.
func (r *relayer) tokens(chunk *stream.Chunk) error {
	res := r.res
	for i, id := range chunk.Tokens {
		if slices.Contains(r.g.stopIDs, id) {
			r.ended, r.reason = true, stream.Stop
			return nil
		}
		res.ids = append(res.ids, id)
		res.by = append(res.by, chunk.By[i])
		var lps []engine.Logprob
		if i < len(chunk.Logprobs) {
			res.lps = append(res.lps, chunk.Logprobs[i])
			lps = res.lps[len(res.lps)-1:]
		}
		out, hit := r.stops.add(r.dt.add(id) + r.g.markers[id])
		r.text.WriteString(out)
		if err := r.emit(delta{text: out, ids: res.ids[len(res.ids)-1:], by: res.by[len(res.by)-1:], lps: lps}); err != nil {
			return err
		}
		if hit {
			r.ended, r.reason = true, stream.Stop
			return nil
		}
	}
	return nil
}

// finish ends the output for the stream's reason: it flushes the text held
// back and emits it (the reason becomes Stop if a stop string completes).
func (r *relayer) finish(reason string) error {
	r.ended, r.reason = true, reason
	out, hit := r.stops.add(r.dt.flush())
	if !hit {
		out += r.stops.flush()
	} else {
		r.reason = stream.Stop
	}
	if out == "" {
		return nil
	}
	r.text.WriteString(out)
	return r.emit(delta{text: out})
}

// readGenerate decodes and validates a /generate body.
func (s *Server) readGenerate(w http.ResponseWriter, r *http.Request) (*genRequest, *apiError) {
	var nr NativeRequest
	if aerr := s.decodeFields(w, r, generateFields, &nr); aerr != nil {
		return nil, aerr
	}
	if aerr := s.renderMessages(&nr); aerr != nil {
		return nil, aerr
	}
	return s.prepare(&nr, nil)
}

// handleGenerate is the native endpoint. With n > 1 it answers a list of
// responses (one per choice, each with its index); streamed events carry
// their choice's index.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	g, aerr := s.readGenerate(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if !g.stream {
		rs, err := s.generateN(r.Context(), g, func(int, delta) error { return nil })
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if g.n == 1 {
			writeJSON(w, http.StatusOK, s.nativeResponse(g, 0, rs[0]))
			return
		}
		out := make([]NativeResponse, len(rs))
		for i, res := range rs {
			out[i] = s.nativeResponse(g, i, res)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	ev := newSSE(w)
	ids := make([]string, g.n)
	rs, err := s.generateN(r.Context(), g, func(i int, d delta) error {
		switch {
		case d.start:
			ids[i] = "gen-" + d.id
			return ev.open()
		case d.flush:
			return ev.flush()
		}
		return ev.send(NativeResponse{ID: ids[i], Index: i, Model: g.dep.name, Text: d.text, OutputIDs: d.ids, ProducedBy: d.by,
			OutputTokenLogprobs: g.nativeLogprobs(d.lps, d.by)})
	})
	if err != nil {
		s.failStream(ev, w, r, err)
		return
	}
	for i, res := range rs {
		final := s.nativeResponse(g, i, res)
		final.Text, final.OutputIDs, final.ProducedBy, final.OutputTokenLogprobs = "", []int32{}, []int8{}, nil
		if ev.send(final) != nil {
			return
		}
	}
	_ = ev.done()
}

// nativeResponse is choice i of g's native answer.
func (s *Server) nativeResponse(g *genRequest, i int, res *genResult) NativeResponse {
	reason := res.reason
	ids, by := res.ids, res.by
	if ids == nil {
		ids, by = []int32{}, []int8{}
	}
	return NativeResponse{
		ID: "gen-" + res.id, Index: i, Model: g.dep.name, Text: res.text, OutputIDs: ids, ProducedBy: by,
		Models: g.dep.names(), FinishReason: &reason, Usage: g.usage(res), Routing: g.routing(res),
		OutputTokenLogprobs: g.nativeLogprobs(res.lps, res.by),
	}
}

// unavailableMessage words an error wrapping deploy.ErrUnavailable (a
// model of a multi-process deployment stopped answering) for the client.
func unavailableMessage(err error) string {
	return "A model of this deployment is unavailable; retry later (" + err.Error() + ")"
}

// fail answers a generation error before any output was sent.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if aerr := s.failure(r, err); aerr != nil {
		writeError(w, aerr)
	}
}

// failStream reports an error on a stream: as a JSON error before the
// stream opened, as an error event followed by the end marker after.
func (s *Server) failStream(ev *sse, w http.ResponseWriter, r *http.Request, err error) {
	if !ev.opened {
		s.fail(w, r, err)
		return
	}
	if aerr := s.failure(r, err); aerr != nil {
		_ = ev.fail(aerr)
	}
}

// failure is the error to tell the client of a generation that failed
// with err, or nil when the client went away. A request the shutdown cut
// off is told so (server_shutdown), whatever error its generation ended
// with.
func (s *Server) failure(r *http.Request, err error) *apiError {
	var aerr *apiError
	switch {
	case errors.As(err, &aerr):
	case stoppedByShutdown(r.Context()):
		aerr = errServerShutdown()
	case r.Context().Err() != nil:
		s.log.Debug("client went away", "path", r.URL.Path, "err", err)
		return nil
	default:
		s.log.Error("generation failed", "path", r.URL.Path, "err", err)
		aerr = errInternal(err)
	}
	return aerr
}
