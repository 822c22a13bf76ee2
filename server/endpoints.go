package server

import (
	"net/http"
	"strings"

	"github.com/tokenrouter/tokenrouter/internal/buildinfo"
)

// The endpoints around generation: one model card, the preset's tokenizer
// both ways, and the server's version.

// handleModel answers GET /v1/models/{id}: the preset's card, as listed
// by /v1/models.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, ok := s.byName[id]
	if !ok {
		writeError(w, errNotFoundModel(id, s.presetNames()))
		return
	}
	writeJSON(w, http.StatusOK, d.card())
}

// presetNames lists the presets in configuration order.
func (s *Server) presetNames() []string {
	have := make([]string, len(s.deps))
	for i, d := range s.deps {
		have[i] = d.name
	}
	return have
}

// TokenizeRequest is the body of POST /tokenize: a prompt or a chat.
type TokenizeRequest struct {
	// Model names a preset ("" is the first preset).
	Model string `json:"model"`
	// Prompt is text to encode.
	Prompt *string `json:"prompt"`
	// Messages is a chat, rendered with the preset's chat template (as
	// /v1/chat/completions does) and encoded.
	Messages []chatMessage `json:"messages"`
	// AddSpecialTokens adds BOS to a prompt when the tokenizer asks for
	// it, as /generate's text does (default true).
	AddSpecialTokens *bool `json:"add_special_tokens"`
}

// TokenizeResponse is what POST /tokenize answers.
type TokenizeResponse struct {
	// Tokens are the token ids.
	Tokens []int32 `json:"tokens"`
	// Count is len(Tokens).
	Count int `json:"count"`
	// MaxModelLen is the preset's context length.
	MaxModelLen int `json:"max_model_len"`
}

// handleTokenize encodes a prompt or a chat with the preset's tokenizer.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req TokenizeRequest
	d, aerr := s.decodeFor(w, r, tokenizeFields, &req, &req.Model)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var ids []int32
	switch {
	case req.Prompt != nil && req.Messages != nil:
		aerr = badRequest("prompt", "invalid_value", "Give prompt or messages, not both")
	case req.Prompt != nil && (req.AddSpecialTokens == nil || *req.AddSpecialTokens):
		ids = d.text.encodeText(*req.Prompt)
	case req.Prompt != nil:
		ids = d.text.encode(*req.Prompt)
	case req.Messages != nil:
		ids, aerr = d.encodeMessages(req.Messages)
	default:
		aerr = badRequest("prompt", "missing_required_parameter", "Missing prompt: give prompt or messages")
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, http.StatusOK, TokenizeResponse{Tokens: ids, Count: len(ids), MaxModelLen: d.ctxLen})
}

// decodeFor decodes a body checked against t into v and returns the
// preset *model (a field of v) names.
func (s *Server) decodeFor(w http.ResponseWriter, r *http.Request, t fieldTable, v any, model *string) (*deployment, *apiError) {
	if aerr := s.decodeFields(w, r, t, v); aerr != nil {
		return nil, aerr
	}
	return s.deployment(*model)
}

// encodeMessages renders a chat with d's template and encodes it.
func (d *deployment) encodeMessages(m []chatMessage) ([]int32, *apiError) {
	req := ChatRequest{Messages: m}
	msgs, aerr := req.check()
	if aerr != nil {
		return nil, aerr
	}
	return d.encodeChat(msgs)
}

// DetokenizeRequest is the body of POST /detokenize.
type DetokenizeRequest struct {
	// Model names a preset ("" is the first preset).
	Model string `json:"model"`
	// Tokens are the ids to decode.
	Tokens []int32 `json:"tokens"`
}

// handleDetokenize decodes token ids with the preset's tokenizer, as the
// output of a generation is decoded.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req DetokenizeRequest
	d, aerr := s.decodeFor(w, r, detokenizeFields, &req, &req.Model)
	if aerr == nil {
		aerr = d.checkIDs(req.Tokens, "tokens")
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	dt := detok{t: d.text}
	var text strings.Builder
	for _, id := range req.Tokens {
		text.WriteString(dt.add(id))
	}
	text.WriteString(dt.flush())
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text.String()})
}

// checkIDs refuses token ids outside d's vocabulary.
func (d *deployment) checkIDs(ids []int32, param string) *apiError {
	vocab := d.models[0].info.VocabSize
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return badRequest(param, "invalid_value", "Token id %d at position %d is outside the vocabulary of %d tokens", id, i, vocab)
		}
	}
	return nil
}

// handleVersion answers what the server was built from.
func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	bi := buildinfo.Read()
	writeJSON(w, http.StatusOK, map[string]string{"version": bi.Version, "revision": bi.Revision, "committed": bi.Time, "go": bi.GoVersion})
}
