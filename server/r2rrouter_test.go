package server

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// r2rPreset serves r2r over two real TinyStories models (stories260K
// small, llama2xs large) with the router file weights.
func r2rPreset(t *testing.T, weights string) func(*config.Config) {
	models := testmodels.Dir(t)
	return func(c *config.Config) {
		c.Models = []config.Model{
			{Name: "small", Engine: loader.KindCPU, Path: filepath.Join(models, "stories260K.gguf"), Threads: 1},
			{Name: "large", Engine: loader.KindCPU, Path: filepath.Join(models, "llama2xs-model.bin"), Tokenizer: filepath.Join(models, "tok512.bin"), Threads: 1},
		}
		c.Presets = []config.Preset{{Name: "r2r", Algorithm: "r2r", Models: []string{"small", "large"}, Thresholds: "1",
			Params: map[string]string{"weights": weights}}}
	}
}

// TestR2RRouterFileServes: a preset running r2r with a router file as
// R2R's save_model writes it (torch.save, random weights) serves, the
// router sending some tokens to the large model and leaving others to the
// small one.
func TestR2RRouterFileServes(t *testing.T) {
	pt := filepath.Join(t.TempDir(), "router.pt")
	if err := routetest.WriteR2RTorch(pt, 64, 5, 0, 0.5); err != nil {
		t.Fatal(err)
	}
	e := start(t, r2rPreset(t, pt))
	byModel := map[string]int{}
	for i, prompt := range []string{"Once upon a time", "The little dog", "Lily wanted"} {
		var nr NativeResponse
		e.post("/generate", map[string]any{"model": "r2r", "text": prompt,
			"sampling_params": map[string]any{"max_new_tokens": 24, "seed": i, "ignore_eos": true}}, &nr)
		if len(nr.OutputIDs) == 0 {
			t.Fatalf("%q: no output (%+v)", prompt, nr)
		}
		for m, n := range nr.Routing.TokensByModel {
			byModel[m] += n
		}
	}
	if byModel["small"] == 0 || byModel["large"] == 0 {
		t.Fatalf("tokens by model %v: the router should use both", byModel)
	}
	t.Logf("tokens by model: %v", byModel)
}

// TestR2RBadRouterFile: a preset whose router file is bad does not start,
// with an error that names the problem, and the server releases what it
// opened (the package's leak check runs after the tests).
func TestR2RBadRouterFile(t *testing.T) {
	dir := t.TempDir()
	ts, meta := routetest.R2RWeights(64, 5, 0)
	ts["backbone.blocks.1.mlp.0.weight"].Data[7] = float32(math.NaN())
	nan := filepath.Join(dir, "nan.safetensors")
	if err := nn.Save(nan, ts, meta); err != nil {
		t.Fatal(err)
	}
	narrow := filepath.Join(dir, "narrow.pt")
	if err := routetest.WriteR2RTorch(narrow, 32, 5, 0, nil); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		nan:    `tensor "backbone.blocks.1.mlp.0.weight" holds NaN at element 7`,
		narrow: `takes hidden states of 32 values, but model "small" has hidden 64`,
	} {
		cfg := config.Default()
		cfg.Port = 0
		r2rPreset(t, file)(&cfg)
		cfg.FillDefaults()
		s, err := New(context.Background(), cfg, Options{})
		if err == nil {
			s.Close()
			t.Fatalf("%s: the server started", filepath.Base(file))
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", filepath.Base(file), err, want)
		}
	}
}
