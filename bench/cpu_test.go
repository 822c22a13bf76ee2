package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
)

// tinyPair describes the real tiny pair on the cpu engine: llama2xs and
// stories260K, which share the tok512 vocabulary.
func tinyPair(t *testing.T) []config.Model {
	dir := testmodels.Dir(t)
	return []config.Model{
		{Name: "slm", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: filepath.Join(dir, "tok512.bin")},
		{Name: "llm", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.gguf")},
	}
}

// TestEverySystemOnTheCPUEngine runs every system briefly on the real tiny
// pair (llama2xs and stories260K, which share tok512), partitioned and
// time-shared, with prompts from text tokenised by the shared tokenizer.
func TestEverySystemOnTheCPUEngine(t *testing.T) {
	ms := tinyPair(t)
	ctx := context.Background()
	voc, err := loader.Builtin().SharedVocabulary(ctx, ms)
	if err != nil {
		t.Fatal(err)
	}
	prompts := []Prompt{{Text: "Once upon a time"}, {Text: "The cat sat"}}
	for i := range prompts {
		prompts[i].IDs = voc.Tokenizer.Encode(prompts[i].Text, true)
	}
	for _, pl := range []config.Placement{config.Partitioned, config.TimeShared} {
		t.Run(string(pl), func(t *testing.T) {
			placed, err := loader.Builtin().Place(ctx, ms, pl, loader.PlaceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			setup := Setup{Models: placed.Models, TimeShared: placed.TimeShared(), Algorithm: "r2r-random", Params: map[string]string{"p": "0.3"},
				Registry: builtin.Registry(), Launch: sched.Launch{Auto: true, MaxWait: 5 * time.Millisecond}}
			rows, err := Compare(ctx, setup, append(Systems(), "tokenrouter-auto"), []int{2},
				Options{MaxTokens: 16, Prompts: prompts, Duration: 400 * time.Millisecond, Seed: 3}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Tokens == 0 || len(r.TTFT) == 0 {
					t.Errorf("%s: %d tokens, %d TTFT samples", r.System, r.Tokens, len(r.TTFT))
				}
				if r.System == "llm-only" && r.RoutedFraction != 1 || r.System == "slm-only" && r.RoutedFraction != 0 {
					t.Errorf("%s: large-model share %.2f", r.System, r.RoutedFraction)
				}
			}
		})
	}
}
