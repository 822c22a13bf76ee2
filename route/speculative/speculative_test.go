package speculative_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

// alone is what e generates by itself, greedily.
func alone(t *testing.T, e engine.Engine, prompt []int32, n int) []int32 {
	t.Helper()
	out := make([]engine.Output, 1)
	in := []engine.Input{{Seq: 99, Tokens: prompt}}
	var gen []int32
	for range n {
		if err := e.Step(context.Background(), in, out); err != nil {
			t.Fatal(err)
		}
		gen = append(gen, out[0].Token)
		in[0].Tokens = []int32{out[0].Token}
	}
	e.Release(99)
	return gen
}

// speculate runs every prompt concurrently with draft k and returns the
// outputs and how many tokens each model produced.
func speculate(t *testing.T, draft, target engine.Engine, k string, prompts [][]int32, n int) ([][]int32, [2]int) {
	t.Helper()
	ms := []deploy.Model{
		{Name: "draft", Engine: draft},
		{Name: "target", Engine: target},
	}
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "speculative", Params: map[string]string{"k": k}, Registry: builtin.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var outs [][]int32
	var by [2]int
	for _, p := range prompts {
		s, err := r.Submit(context.Background(), p, route.Params{MaxTokens: n, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, res.Tokens)
		for _, b := range res.By {
			by[b]++
		}
	}
	return outs, by
}

func TestGreedyEqualsTargetOnSim(t *testing.T) {
	prompts := [][]int32{{1, 5}, {1, 9, 10}, {1, 77}}
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		want[i] = alone(t, sim.New(sim.Config{Seed: 2}), p, 40)
	}
	for _, k := range []string{"1", "3", "8"} {
		got, by := speculate(t, sim.New(sim.Config{Seed: 1, Agree: 0.8, AgreeSeed: 2}), sim.New(sim.Config{Seed: 2}), k, prompts, 40)
		for i := range prompts {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("k=%s prompt %d:\n got %v\nwant %v", k, i, got[i], want[i])
			}
		}
		if by[0] == 0 {
			t.Fatalf("k=%s: no draft token accepted at 80%% agreement", k)
		}
	}
}

// TestGreedyEqualsTargetOnRealPair drafts with llama2xs for stories260K:
// the output must equal stories260K alone; the acceptance rate per k is
// logged (accepted drafts / proposed drafts).
func TestGreedyEqualsTargetOnRealPair(t *testing.T) {
	modelsDir := testmodels.Dir(t)
	open := func(f string) engine.Engine {
		e, err := cpu.Open(filepath.Join(modelsDir, f), cpu.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// " Once upon a time", " Lily", " One day", " The", "<s>" alone.
	prompts := [][]int32{{1, 403, 407, 261, 378}, {1, 426}, {1, 416, 439}, {1, 281}, {1}}
	const n = 32
	tgt := open("stories260K.gguf")
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		want[i] = alone(t, tgt, p, n)
	}
	tgt.Close()
	ks := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	if testing.Short() {
		ks = []string{"1", "4"}
	}
	for _, k := range ks {
		got, by := speculate(t, open("llama2xs-model.bin"), open("stories260K.gguf"), k, prompts, n)
		for i := range prompts {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("k=%s prompt %d:\n got %v\nwant %v", k, i, got[i], want[i])
			}
		}
		kk := float64(len(k)) * float64(k[0]-'0')
		t.Logf("k=%s: %d prompts equal to the target alone; draft tokens %d, target tokens %d (rounds), acceptance %.3f, tokens per target step %.2f",
			k, len(prompts), by[0], by[1], float64(by[0])/(float64(by[1])*kk), float64(n*len(prompts))/float64(by[1]))
	}
}
