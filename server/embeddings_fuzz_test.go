package server

import (
	"context"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
)

// FuzzEmbeddingBody feeds arbitrary bodies to the /v1/embeddings decoder
// of a server whose preset "one" is one simulated model with a short
// context: a body is refused as a client error, or becomes inputs within
// every bound.
func FuzzEmbeddingBody(f *testing.F) {
	cfg := config.Default()
	for i := range cfg.Models {
		cfg.Models[i].ContextLength = 64
	}
	cfg.Presets = append(cfg.Presets, config.Preset{Name: "one", Algorithm: "single", Models: []string{cfg.Models[0].Name}, Thresholds: "1"})
	cfg.MaxBodyBytes = 1 << 16
	cfg.FillDefaults()
	s, err := New(context.Background(), cfg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	for _, b := range []string{
		`{"model":"one","input":"hi"}`,
		`{"model":"one","input":["a","b"],"encoding_format":"base64","dimensions":64,"user":"u"}`,
		`{"model":"one","input":[1,2,3]}`,
		`{"model":"one","input":[[1,2],[3]]}`,
		`{"model":"one","input":[[1],"a"]}`, `{"model":"one","input":[]}`, `{"model":"one","input":""}`,
		`{"model":"one","input":[-1]}`, `{"model":"one","input":[[]]}`, `{"input":"x"}`, `{"model":"one"}`,
		`{"model":"one","input":"x","encoding_format":"hex"}`, `{"model":"one","input":[1.5]}`, `null`, `{`,
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w, r := fuzzRequest("/v1/embeddings", body)
		j, aerr := s.readEmbeddings(w, r)
		if aerr != nil {
			checkDecoded(t, s, body, nil, aerr)
			return
		}
		d := j.dep
		if len(d.models) != 1 || j.width != d.models[0].info.HiddenSize || len(j.inputs) == 0 || len(j.inputs) > maxEmbeddingInputs ||
			len(j.names) != len(j.inputs) || j.tokens > maxEmbeddingTokens {
			t.Fatalf("body %q: job of %d inputs (%d names), %d tokens, width %d", body, len(j.inputs), len(j.names), j.tokens, j.width)
		}
		n := 0
		for _, seq := range j.inputs {
			if len(seq) == 0 || len(seq) > d.ctxLen {
				t.Fatalf("body %q: an input of %d tokens in a context of %d", body, len(seq), d.ctxLen)
			}
			for _, id := range seq {
				if id < 0 || int(id) >= d.models[0].info.VocabSize {
					t.Fatalf("body %q: token %d outside the vocabulary", body, id)
				}
			}
			n += len(seq)
		}
		if n != j.tokens {
			t.Fatalf("body %q: %d tokens counted, %d held", body, j.tokens, n)
		}
	})
}
