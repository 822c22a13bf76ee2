package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// stepHidden returns the final hidden state after every position of
// tokens, decoded one at a time through Step (WantHidden) as sequence seq.
func stepHidden(t *testing.T, e *Engine, seq engine.SeqID, tokens []int32) [][]float32 {
	t.Helper()
	out := make([]engine.Output, 1)
	var res [][]float32
	for _, tok := range tokens {
		in := []engine.Input{{Seq: seq, Tokens: []int32{tok}, Want: engine.WantHidden}}
		if err := e.Step(context.Background(), in, out); err != nil {
			t.Fatal(err)
		}
		res = append(res, slices.Clone(out[0].Hidden))
	}
	e.Release(seq)
	return res
}

// pooled pools per-position vectors as how says, summing in float64.
func pooled[T float32 | float64](hs [][]T, how engine.Pooling) []float64 {
	switch how {
	case engine.PoolingCLS:
		hs = hs[:1]
	case engine.PoolingLast:
		hs = hs[len(hs)-1:]
	}
	sum := make([]float64, len(hs[0]))
	for _, h := range hs {
		for k, v := range h {
			sum[k] += float64(v)
		}
	}
	for k := range sum {
		sum[k] /= float64(len(hs))
	}
	return sum
}

// asFloat32 rounds v to float32, as Pool does.
func asFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// randomTokens returns n seeded token ids below vocab.
func randomTokens(n, vocab int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

// TestPoolMatchesStepHiddenStates: Pool of a real model file (no
// pooling_type: mean) equals, bit for bit, the mean of the hidden states
// Step gives at each position of the same tokens decoded one at a time,
// over more positions than one pass runs (encodeRows); the engine's own
// sequences and KV are untouched.
func TestPoolMatchesStepHiddenStates(t *testing.T) {
	e := openModel(t, "stories260K.gguf", Options{Threads: 2})
	if e.Pooling() != engine.PoolingMean {
		t.Fatalf("pooling %v for a file without pooling_type, want mean", e.Pooling())
	}
	tokens := randomTokens(encodeRows+45, e.Info().VocabSize, 1)
	want := asFloat32(pooled(stepHidden(t, e, 1, tokens), engine.PoolingMean))

	held := greedy(t, e, 9, []int32{1, 403}, 3) // a sequence the engine keeps: 4 tokens
	blocks := e.KVBlocksInUse()
	got := make([]float32, e.Info().HiddenSize)
	if err := e.Pool(context.Background(), tokens, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Pool differs from the mean of Step's hidden states\n got %v\nwant %v", got[:4], want[:4])
	}
	if e.KVBlocksInUse() != blocks || e.seqLen(9) != 4 {
		t.Fatalf("Pool changed the engine's KV: %d blocks (was %d), sequence 9 holds %d tokens", e.KVBlocksInUse(), blocks, e.seqLen(9))
	}
	if next := greedy(t, e, 9, held[2:], 1); !slices.Equal(held, refStories[1:4]) || next[0] != refStories[4] {
		t.Fatalf("the held sequence went %v then %d, want %v", held, next[0], refStories[1:5])
	}
}

// TestPoolSyntheticMatchesReference: for generated models of every
// architecture, Pool with each pooling_type a file may declare equals the
// float64 reference forward pass's final hidden states pooled the same way
// (within the tolerance of activation quantisation) and, bit for bit, the
// pooled hidden states of Step.
func TestPoolSyntheticMatchesReference(t *testing.T) {
	tokens := []int32{1, 17, 33, 5, 60, 79, 2, 40, 41, 12}
	pools := []struct {
		file *uint32 // nil: no pooling_type
		how  engine.Pooling
	}{{nil, engine.PoolingMean}, {u32(0), engine.PoolingMean}, {u32(1), engine.PoolingMean}, {u32(2), engine.PoolingCLS}, {u32(3), engine.PoolingLast}}
	for ai, arch := range Architectures() {
		for pi, p := range pools {
			s := archShape(arch, gguf.Q8_0)
			s.pooling = p.file
			name := "absent"
			if p.file != nil {
				name = fmt.Sprint(*p.file)
			}
			t.Run(fmt.Sprintf("%s/pooling_type=%s", arch, name), func(t *testing.T) {
				f, err := gguf.Parse(buildTiny(t, s, uint64(10*ai+pi+1)))
				if err != nil {
					t.Fatal(err)
				}
				e, err := NewFromGGUF(f, Options{Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if e.Pooling() != p.how {
					t.Fatalf("pooling %v, want %v", e.Pooling(), p.how)
				}
				got := make([]float32, s.dim)
				if err := e.Pool(context.Background(), tokens, got); err != nil {
					t.Fatal(err)
				}
				if step := asFloat32(pooled(stepHidden(t, e, 1, tokens), p.how)); !slices.Equal(got, step) {
					t.Fatalf("Pool differs from Step's pooled hidden states")
				}
				want := pooled((&refModel{f: f, s: s}).hidden(t, tokens), p.how)
				diff, mx := 0.0, 0.0
				for k, v := range want {
					mx = math.Max(mx, math.Abs(v))
					diff = math.Max(diff, math.Abs(v-float64(got[k])))
				}
				if diff > 2e-2*(1+mx) {
					t.Fatalf("max difference %g from the reference (max |value| %g)", diff, mx)
				}
			})
		}
	}
}

func u32(v uint32) *uint32 { return &v }

// TestPoolRefuses: a reranker's file (pooling_type rank), empty and
// too-long inputs, ids outside the vocabulary, a short destination, a
// cancelled context and a closed engine are errors, the right ones.
func TestPoolRefuses(t *testing.T) {
	s := archShape("llama", gguf.Q8_0)
	s.pooling = u32(4)
	f, err := gguf.Parse(buildTiny(t, s, 3))
	if err != nil {
		t.Fatal(err)
	}
	rank, err := NewFromGGUF(f, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rank.Close()
	dst := make([]float32, 64)
	if err := rank.Pool(context.Background(), []int32{1, 2}, dst); rank.Pooling() != engine.PoolingRank || !errors.Is(err, engine.ErrBadInput) {
		t.Fatalf("rank file: pooling %v, Pool %v", rank.Pooling(), err)
	}

	e := openModel(t, "stories260K.gguf", Options{Threads: 1})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
		toks []int32
		dst  []float32
		want error
	}{
		{"empty", ctx, nil, dst, engine.ErrBadInput},
		{"beyond the context", ctx, make([]int32, e.Info().ContextLength+1), dst, engine.ErrContextFull},
		{"outside the vocabulary", ctx, []int32{1, 512}, dst, engine.ErrBadInput},
		{"short destination", ctx, []int32{1}, dst[:63], engine.ErrBadInput},
		{"cancelled", cancelled, []int32{1, 2, 3}, dst, context.Canceled},
	} {
		if err := e.Pool(c.ctx, c.toks, c.dst); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	e.Close()
	if err := e.Pool(ctx, []int32{1}, dst); !errors.Is(err, engine.ErrBadInput) {
		t.Fatalf("Pool on a closed engine: %v", err)
	}
}

// TestPoolBesideSteps: Pool calls from several goroutines while the
// engine's owner steps: every Pool gives the result of a Pool alone, and
// the steps give the reference tokens (go test -race checks that the two
// share nothing they write).
func TestPoolBesideSteps(t *testing.T) {
	e := openModel(t, "stories260K.gguf", Options{Threads: 2})
	tokens := randomTokens(300, 512, 2)
	alone := make([]float32, 64)
	if err := e.Pool(context.Background(), tokens, alone); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]float32, 3)
	errs := make([]error, 3)
	for i := range got {
		got[i] = make([]float32, 64)
		wg.Go(func() { errs[i] = e.Pool(context.Background(), tokens, got[i]) })
	}
	steps := greedy(t, e, 1, []int32{1}, 40)
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !slices.Equal(got[i], alone) {
			t.Fatalf("Pool %d beside steps: %v, equal to alone: %v", i, errs[i], slices.Equal(got[i], alone))
		}
	}
	if !slices.Equal(steps, refStories[:40]) {
		t.Fatalf("steps beside Pool gave %v", steps)
	}
}

// TestCloseStopsPool: Close while Pool calls run returns once they have
// stopped; each ended with its result or the closed engine's error.
func TestCloseStopsPool(t *testing.T) {
	e, err := Open(filepath.Join(modelsDir(t), "stories260K.gguf"), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	tokens := randomTokens(2000, 512, 3)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = e.Pool(context.Background(), tokens, make([]float32, 64)) })
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, engine.ErrBadInput) {
			t.Errorf("Pool %d: %v", i, err)
		}
	}
}
