package server

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// writeCiterRouter writes a CITER router over hidden states of 64 values
// (the width of stories260K) with meta as its router metadata.
func writeCiterRouter(t *testing.T, meta nn.RouterMeta) string {
	t.Helper()
	const h, d = 64, 8
	fill := func(n int, v float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	ts := map[string]nn.Tensor{
		"mlp.0.weight": {Shape: []int{d, h}, Data: fill(d*h, 0.01)}, "mlp.0.bias": {Shape: []int{d}, Data: fill(d, 0)},
		"mlp.1.weight": {Shape: []int{1, d}, Data: fill(d, 0.1)}, "mlp.1.bias": {Shape: []int{1}, Data: fill(1, 0)},
	}
	s, err := meta.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "router.safetensors")
	if err := nn.Save(path, ts, map[string]string{nn.MetaKey: s}); err != nil {
		t.Fatal(err)
	}
	return path
}

// routerConfig is a server configuration with one CITER preset over
// stories260K (small, with its llama2.c tokenizer) and llama2xs, routed by
// the router file at path.
func routerConfig(t *testing.T, path string) config.Config {
	dir := testmodels.Dir(t)
	tok := filepath.Join(dir, "tok512.bin")
	cfg := config.Default()
	cfg.Port, cfg.ShutdownTimeout = 0, 5*time.Second
	cfg.Models = []config.Model{
		{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.bin"), Tokenizer: tok, Threads: 1},
		{Name: "llama2xs", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: tok, Threads: 1},
	}
	cfg.Presets = []config.Preset{{Name: "tiny-citer", Algorithm: "citer", Models: []string{"stories", "llama2xs"},
		Params: map[string]string{"weights": path, "tau": "0.5"}, Thresholds: "1", Placement: config.Partitioned}}
	cfg.FillDefaults()
	return cfg
}

// TestRouterMetadataCheckedAgainstSmallModel starts a CITER preset through
// the server's own loading path: a router file whose metadata was written
// for another vocabulary fails the preset (and, as any preset that fails
// to start, the server) with an error naming both sides; the same router
// written for stories260K's vocabulary serves.
func TestRouterMetadataCheckedAgainstSmallModel(t *testing.T) {
	tok, err := tokenizer.Open(filepath.Join(testmodels.Dir(t), "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, tok.VocabSize())
	for i := range tokens {
		tokens[i] = tok.Token(int32(i))
	}
	storiesHash := engine.VocabHash(tokens)

	wrong := writeCiterRouter(t, nn.RouterMeta{Algorithm: "citer", SLM: "big-slm", LLM: "big-llm",
		VocabSize: 32000, VocabHash: "0123456789abcdef", HiddenSize: 64, Threshold: 0.5})
	s, err := New(context.Background(), routerConfig(t, wrong), Options{})
	if err == nil {
		s.Close()
		t.Fatal("a preset whose router was trained for another vocabulary started")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{"preset tiny-citer", "router " + wrong, "0123456789abcdef (32000 tokens, hidden 64)",
		`of "big-slm"`, `model "stories" has vocabulary ` + storiesHash + " (512 tokens, hidden 64)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}

	right := writeCiterRouter(t, nn.RouterMeta{Algorithm: "citer", SLM: "stories", LLM: "llama2xs",
		VocabSize: 512, VocabHash: storiesHash, HiddenSize: 64, Threshold: 0.5})
	e := startWith(t, func(c *config.Config) { *c = routerConfig(t, right) }, Options{})
	var r chatResponse
	e.post("/v1/chat/completions", map[string]any{"model": "tiny-citer", "max_tokens": 8, "seed": 1,
		"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}}}, &r)
	if r.Usage.CompletionTokens == 0 {
		t.Fatalf("the matching router served nothing: %+v", r.Usage)
	}
	if code, _ := e.do(http.MethodGet, "/v1/models", nil); code != http.StatusOK {
		t.Fatalf("/v1/models: %d", code)
	}
}
