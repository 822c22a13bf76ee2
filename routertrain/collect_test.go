package routertrain

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

// tinyPair opens the tiny trained pair: stories260K as the small model,
// llama2xs (same tok512 vocabulary) as the large one.
func tinyPair(t *testing.T) (slm, llm *cpu.Engine) {
	t.Helper()
	dir := testmodels.Dir(t)
	var err error
	if slm, err = cpu.Open(filepath.Join(dir, "stories260K.gguf"), cpu.Options{Threads: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slm.Close() })
	if llm, err = cpu.Open(filepath.Join(dir, "llama2xs-model.bin"), cpu.Options{Threads: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { llm.Close() })
	return slm, llm
}

// storiesRef is stories260K's greedy output from BOS alone and llama2xs's
// token after its first 25 tokens, from models/tiny/SOURCES.md (an
// independent pure-Python forward pass): the two models agree on 25
// tokens, then stories260K writes 322 " in" where llama2xs writes 269
// " and".
var storiesRef = []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433}

func TestCollectLabelsTinyPair(t *testing.T) {
	slm, llm := tinyPair(t)
	const K = 8
	ds, err := Collect(context.Background(), slm, llm, [][]int32{{1}}, CollectOptions{MaxTokens: len(storiesRef), TopK: K, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ds.Tok, storiesRef) {
		t.Fatalf("small model wrote %v,\nwant %v", ds.Tok, storiesRef)
	}
	for j := range 25 {
		if ds.Y[j] != 0 {
			t.Errorf("position %d labelled 1: the models agree on the first 25 tokens", j)
		}
	}
	if ds.Y[25] != 1 {
		t.Errorf("position 25 labelled 0: llama2xs writes 269 where stories260K writes 322")
	}
	for j, g := range ds.Gap {
		if (ds.Y[j] == 0) != (g == 0) || g < 0 {
			t.Errorf("position %d: label %d, gap %v (want 0 exactly where the models agree, else positive)", j, ds.Y[j], g)
		}
	}
	// The gap at 25 against the large model's log-probabilities of its own
	// token and of the small model's, stepped here one token at a time.
	prefix := append([]int32{1}, storiesRef[:25]...)
	_, own := continuation(t, llm, 901, prefix, -1, 0)
	_, small := continuation(t, llm, 902, prefix, storiesRef[25], 0)
	if want := own - small; math.Abs(float64(ds.Gap[25])-want) > 1e-4*max(1, want) {
		t.Errorf("gap at 25 = %v, want %v (log p(269) − log p(322))", ds.Gap[25], want)
	}
	H, W := ds.H, ds.H+ds.E+ds.K
	if H != 64 || ds.E != 64 || ds.K != K || len(ds.X) != len(ds.Y)*W {
		t.Fatalf("widths H %d E %d K %d, %d values for %d rows", ds.H, ds.E, ds.K, len(ds.X), len(ds.Y))
	}
	emb := make([]float32, H)
	for j, tok := range ds.Tok {
		row := ds.X[j*W : (j+1)*W]
		slm.Embed(tok, emb)
		if !slices.Equal(row[H:2*H], emb) {
			t.Fatalf("position %d: the embedding is not the small model's embedding of its token", j)
		}
		if top := row[2*H:]; !slices.IsSortedFunc(top, func(a, b float32) int { return cmpF(b, a) }) {
			t.Fatalf("position %d: top logits %v not descending", j, top)
		}
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestCollectBatchIndependent: the dataset does not depend on how many
// prompts share an engine step.
func TestCollectBatchIndependent(t *testing.T) {
	slm, llm := tinyPair(t)
	prompts := [][]int32{{1}, {1, 403, 407, 261, 378}, {1, 426}, {1, 416, 439}, {1, 281}}
	var sets []*Dataset
	for _, b := range []int{1, 3, 8} {
		ds, err := Collect(context.Background(), slm, llm, prompts, CollectOptions{MaxTokens: 20, TopK: 16, Batch: b, Verify: 3, Judge: JudgeExact})
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, ds)
	}
	for _, ds := range sets[1:] {
		if !slices.Equal(ds.X, sets[0].X) || !slices.Equal(ds.Y, sets[0].Y) || !slices.Equal(ds.Tok, sets[0].Tok) ||
			!slices.Equal(ds.Gap, sets[0].Gap) {
			t.Fatal("batching changed the dataset")
		}
	}
}

// continuation has the large model continue prefix on its own, one token
// per step: with first, it appends first and then k greedy tokens; with
// first < 0, its own greedy token and k more. It returns the tokens after
// the first and the summed log-probability of the first and those.
func continuation(t *testing.T, eng engine.Engine, seq engine.SeqID, prefix []int32, first int32, k int) ([]int32, float64) {
	t.Helper()
	defer eng.Release(seq)
	in := []engine.Input{{Seq: seq, Tokens: prefix, Want: engine.WantLogits}}
	out := make([]engine.Output, 1)
	var toks []int32
	var lp float64
	for step := 0; step <= k; step++ {
		if err := eng.Step(context.Background(), in, out); err != nil {
			t.Fatal(err)
		}
		next := out[0].Token
		if step == 0 && first >= 0 {
			next = first
		} else if step > 0 {
			toks = append(toks, next)
		}
		var sum float64 // log-softmax, written out here
		for _, v := range out[0].Logits {
			sum += math.Exp(float64(v))
		}
		lp += float64(out[0].Logits[next]) - math.Log(sum)
		in[0].Tokens = []int32{next}
	}
	return toks, lp
}

// TestVerify checks the verified labels of every differing position
// against the two continuations computed one sequence at a time: the exact
// judge compares the K tokens after each token, the likelihood judge
// (margin 0) their mean log-probabilities. A margin of −∞ keeps every
// differing position, +∞ none.
func TestVerify(t *testing.T) {
	slm, llm := tinyPair(t)
	prompts := [][]int32{{1}, {1, 426}, {1, 416, 439}}
	const K = 1
	collect := func(verify int, judge string, margin float64) *Dataset {
		ds, err := Collect(context.Background(), slm, llm, prompts, CollectOptions{MaxTokens: 40, TopK: 4, Batch: 5, Verify: verify, Judge: judge, Margin: margin})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	raw, exact, lik := collect(0, "", 0), collect(K, JudgeExact, 0), collect(K, JudgeLikelihood, 0)
	if raw.Positives() != raw.Differ || exact.Differ != raw.Differ || raw.Differ == 0 {
		t.Fatalf("differing positions: raw %d (%d labelled), verified run %d", raw.Differ, raw.Positives(), exact.Differ)
	}
	seq := engine.SeqID(1000)
	for i, y := range raw.Y {
		if y == 0 {
			if exact.Y[i] != 0 || lik.Y[i] != 0 {
				t.Fatalf("position %d: verified 1 but the models agree", i)
			}
			continue
		}
		p := raw.Prompt[i]
		start := slices.Index(raw.Prompt, p)
		prefix := append(slices.Clone(prompts[p]), raw.Tok[start:i]...)
		own, lpOwn := continuation(t, llm, seq, prefix, -1, K)
		small, lpSmall := continuation(t, llm, seq+1, prefix, raw.Tok[i], K)
		seq += 2
		if want := b2u(!slices.Equal(own, small)); exact.Y[i] != want {
			t.Errorf("position %d: exact label %d; continuations %v and %v", i, exact.Y[i], own, small)
		}
		if want := b2u(lpSmall < lpOwn); lik.Y[i] != want {
			t.Errorf("position %d: likelihood label %d; log-probabilities %v (small) and %v (own)", i, lik.Y[i], lpSmall, lpOwn)
		}
	}
	t.Logf("%d positions, %d differ; diverging over %d tokens: %d exact, %d by likelihood", raw.Len(), raw.Differ, K, exact.Positives(), lik.Positives())
	if exact.Positives() == raw.Differ && lik.Positives() == raw.Differ {
		t.Fatal("no position was dropped: the check above saw only one outcome")
	}
	if all := collect(K, JudgeLikelihood, -1e300); !slices.Equal(all.Y, raw.Y) {
		t.Fatal("likelihood judge with margin −∞ dropped a differing position")
	}
	if none := collect(K, JudgeLikelihood, 1e300); none.Positives() != 0 {
		t.Fatalf("likelihood judge with margin +∞ kept %d positions", none.Positives())
	}
}

func TestTopKPads(t *testing.T) {
	dst := make([]float32, 4)
	inf := float32(math.Inf(-1))
	TopK([]float32{1, 5, inf, 3}, dst)
	if dst[0] != 5 || dst[1] != 3 || dst[2] != 1 || dst[3] != inf {
		t.Fatalf("TopK = %v, want 5 3 1 −∞", dst)
	}
}
