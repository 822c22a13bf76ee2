package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
)

// fuzzServer is a server over the default configuration (short contexts,
// so length checks are reached) whose decoders the fuzz targets call; it
// serves no connection.
func fuzzServer(f *testing.F) *Server {
	f.Helper()
	cfg := config.Default()
	for i := range cfg.Models {
		cfg.Models[i].ContextLength = 64
	}
	cfg.MaxBodyBytes = 1 << 16
	s, err := New(context.Background(), cfg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s
}

// fuzzRequest is a POST of body to path as the decoders see it.
func fuzzRequest(path, body string) (*httptest.ResponseRecorder, *http.Request) {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return httptest.NewRecorder(), r
}

// checkDecoded checks what a decoder returned: a client error that
// renders as OpenAI's error shape, or a request the runtime can run.
func checkDecoded(t *testing.T, s *Server, body string, g *genRequest, aerr *apiError) {
	t.Helper()
	if aerr != nil {
		if aerr.status < 400 || aerr.status > 499 || aerr.message == "" {
			t.Fatalf("body %q: refusal %d %q", body, aerr.status, aerr.message)
		}
		if _, err := json.Marshal(aerr.body()); err != nil {
			t.Fatalf("body %q: error body: %v", body, err)
		}
		if len(aerr.message) > 1024 {
			t.Fatalf("body %q: error message of %d bytes", body, len(aerr.message))
		}
		return
	}
	if g == nil || g.dep == nil || len(g.prompt) == 0 {
		t.Fatalf("body %q: accepted without a prompt", body)
	}
	vocab := g.dep.models[0].info.VocabSize
	for _, id := range g.prompt {
		if id < 0 || int(id) >= vocab {
			t.Fatalf("body %q: token %d outside the vocabulary of %d", body, id, vocab)
		}
	}
	if m := g.params.MaxTokens; m < 1 || len(g.prompt)+m > g.dep.ctxLen {
		t.Fatalf("body %q: %d prompt tokens + %d new in a context of %d", body, len(g.prompt), m, g.dep.ctxLen)
	}
	if len(g.stop) > 4 {
		t.Fatalf("body %q: %d stop strings", body, len(g.stop))
	}
	if tp := g.params.Sampling.Temperature; tp < 0 || tp > 100 {
		t.Fatalf("body %q: temperature %v", body, tp)
	}
	if sp := g.params.Sampling; sp.MinP < 0 || sp.MinP > 1 || sp.TopLogprobs < 0 || sp.TopLogprobs > maxTopLogprobs || g.n < 1 || g.n > maxChoices {
		t.Fatalf("body %q: min_p %v, top logprobs %d, n %d", body, sp.MinP, sp.TopLogprobs, g.n)
	}
	for _, b := range g.params.Sampling.Penalties.Bias {
		if b.Token < 0 || int(b.Token) >= vocab || b.Bias < -100 || b.Bias > 100 {
			t.Fatalf("body %q: logit bias %+v", body, b)
		}
	}
}

// FuzzGenerateBody feeds arbitrary bodies to the /generate decoder.
func FuzzGenerateBody(f *testing.F) {
	s := fuzzServer(f)
	for _, b := range []string{
		`{"text":"hi","sampling_params":{"max_new_tokens":4,"temperature":0.5,"top_p":0.9,"top_k":3,"stop":["a"]}}`,
		`{"input_ids":[1,2,3],"stream":true}`,
		`{"text":"a","input_ids":[1]}`,
		`{"input_ids":[-1]}`,
		`{"text":"x","sampling_params":{"max_new_tokens":100000}}`,
		`{"model":"nope"}`, `[]`, `{`, `null`,
		`{"text":"a","return_logprob":true,"top_logprobs_num":3,"sampling_params":{"n":2,"min_p":0.1,"logit_bias":{"5":-100},"stop_token_ids":[2],"frequency_penalty":1,"presence_penalty":-1,"repetition_penalty":1.2}}`,
		`{"text":"a","sampling_params":{"unknown":1}}`,
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w, r := fuzzRequest("/generate", body)
		g, aerr := s.readGenerate(w, r)
		checkDecoded(t, s, body, g, aerr)
	})
}

// FuzzCompletionBody feeds arbitrary bodies to the /v1/completions
// decoder.
func FuzzCompletionBody(f *testing.F) {
	s := fuzzServer(f)
	for _, b := range []string{
		`{"prompt":"hi","max_tokens":4,"stop":"x","temperature":1}`,
		`{"prompt":["one"],"n":1,"best_of":1}`,
		`{"prompt":[[1,2,3]]}`,
		`{"prompt":[1,2,3],"echo":true}`,
		`{"prompt":["a","b"]}`, `{"prompt":null}`, `{"stop":[1]}`, `{"prompt":"x","stop":["a","b","c","d","e"]}`,
		`{"prompt":"x","logprobs":2,"n":3,"logit_bias":{"1":1},"suffix":"y"}`,
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w, r := fuzzRequest("/v1/completions", body)
		_, g, aerr := s.readCompletion(w, r)
		checkDecoded(t, s, body, g, aerr)
	})
}

// FuzzChatBody feeds arbitrary bodies to the /v1/chat/completions decoder.
func FuzzChatBody(f *testing.F) {
	s := fuzzServer(f)
	for _, b := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`,
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":3}`,
		`{"messages":[{"role":"tool","content":null}],"tools":[]}`,
		`{"messages":[{"role":"wizard","content":"x"}]}`,
		`{"messages":[],"logprobs":true}`, `{"messages":[{"content":"x"}]}`, `{"messages":[{"role":"user","content":[{"type":"image"}]}]}`,
		`{"messages":[{"role":"user","content":"x","name":"a"}],"logprobs":true,"top_logprobs":3,"n":2,"tools":[],"response_format":{"type":"text"}}`,
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w, r := fuzzRequest("/v1/chat/completions", body)
		_, g, aerr := s.readChat(w, r)
		checkDecoded(t, s, body, g, aerr)
	})
}
