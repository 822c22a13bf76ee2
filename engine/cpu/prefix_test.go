package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// TestPrefixCacheMatchesNoCache drives an engine with prefix caching and
// one without through the same random workload — sequences sharing a
// system prompt, decodes, truncations inside shared blocks, releases and
// new sequences reusing what the released ones left — and checks that
// every step samples the same tokens with the same logits (to rounding),
// that the cache was hit, and that every block comes back.
func TestPrefixCacheMatchesNoCache(t *testing.T) {
	const budget = 48 * 16 * 2 * 64 * 4 * 6 // a few dozen blocks: eviction happens
	cached := openModel(t, "stories260K.bin", Options{Threads: 1, KVBudgetBytes: budget})
	plain := openModel(t, "stories260K.bin", Options{Threads: 1, KVBudgetBytes: 1 << 26, NoPrefixCache: true})
	rng := rand.New(rand.NewPCG(3, 9))
	system := make([]int32, 64)
	for i := range system {
		system[i] = int32(3 + rng.IntN(500))
	}
	ctx := context.Background()
	live := map[engine.SeqID]int{} // tokens held
	next := engine.SeqID(1)
	maxDiff := float32(0)
	for step := 0; step < 300; step++ {
		var in []engine.Input
		for seq, n := range live {
			if rng.IntN(4) == 0 {
				continue
			}
			switch r := rng.IntN(20); {
			case r == 0:
				cached.Release(seq)
				plain.Release(seq)
				delete(live, seq)
				continue
			case r <= 2 && n > 2:
				k := 1 + rng.IntN(n-1)
				if err := cached.Truncate(seq, k); err != nil {
					t.Fatal(err)
				}
				if err := plain.Truncate(seq, k); err != nil {
					t.Fatal(err)
				}
				n = k
			}
			if n+4 > cached.Info().ContextLength {
				continue
			}
			toks := []int32{int32(3 + rng.IntN(500))}
			if rng.IntN(5) == 0 {
				toks = append(toks, int32(3+rng.IntN(500)), int32(3+rng.IntN(500)))
			}
			in = append(in, engine.Input{Seq: seq, Tokens: toks, Want: engine.WantLogits})
			live[seq] = n + len(toks)
		}
		if len(live) < 6 && rng.IntN(2) == 0 {
			prompt := append([]int32(nil), system[:16*(1+rng.IntN(3))+rng.IntN(8)]...)
			for range rng.IntN(20) {
				prompt = append(prompt, int32(3+rng.IntN(500)))
			}
			in = append(in, engine.Input{Seq: next, Tokens: prompt, Want: engine.WantLogits, Sampling: engine.Sampling{Temperature: 0.9, Seed: uint64(next)}})
			live[next] = len(prompt)
			next++
		}
		if len(in) == 0 {
			continue
		}
		a, b := make([]engine.Output, len(in)), make([]engine.Output, len(in))
		if err := cached.Step(ctx, in, a); err != nil {
			t.Fatalf("step %d with the cache: %v", step, err)
		}
		if err := plain.Step(ctx, in, b); err != nil {
			t.Fatalf("step %d without: %v", step, err)
		}
		for i := range in {
			if a[i].Token != b[i].Token {
				t.Fatalf("step %d seq %d: token %d with the cache, %d without", step, in[i].Seq, a[i].Token, b[i].Token)
			}
			for k := range a[i].Logits {
				maxDiff = max(maxDiff, float32(math.Abs(float64(a[i].Logits[k]-b[i].Logits[k]))))
			}
		}
	}
	if maxDiff > 1e-3 {
		t.Fatalf("logits differ by up to %g with the cache", maxDiff)
	}
	looked, hit, idle := cached.PrefixCacheStats()
	if hit == 0 || hit >= looked {
		t.Fatalf("prefix cache: %d of %d tokens hit", hit, looked)
	}
	for seq := range live {
		cached.Release(seq)
	}
	if n := cached.KVBlocksInUse(); n != 0 {
		t.Fatalf("%d blocks held after every sequence was released", n)
	}
	t.Logf("%d of %d prompt tokens from the cache; %d idle cached blocks at the end; max logit difference %g", hit, looked, idle, maxDiff)
}

// TestPrefixCacheSkipsCompute: a second sequence with the same long
// prompt computes only its last block's positions, and gets the same
// token as the first.
func TestPrefixCacheSkipsCompute(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{Threads: 1})
	prompt := make([]int32, 70)
	for i := range prompt {
		prompt[i] = int32(3 + i*7%500)
	}
	out := make([]engine.Output, 1)
	ctx := context.Background()
	if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: prompt}}, out); err != nil {
		t.Fatal(err)
	}
	first := out[0].Token
	if err := e.Step(ctx, []engine.Input{{Seq: 2, Tokens: prompt}}, out); err != nil {
		t.Fatal(err)
	}
	looked, hit, _ := e.PrefixCacheStats()
	if out[0].Token != first || looked != 140 || hit != 64 {
		t.Fatalf("second sequence: token %d (first %d), %d of %d tokens from the cache; want the same token and 64 of 140", out[0].Token, first, hit, looked)
	}
	if n := e.KVBlocksInUse(); n != 5+5-4 {
		t.Fatalf("%d blocks held, want 6 (two sequences of 5 blocks sharing 4)", n)
	}
}
