package cpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// prompts16 are 16 different prompts (BOS first) of different lengths.
func prompts16() [][]int32 {
	var ps [][]int32
	for i := range 16 {
		p := []int32{1}
		for j := range 1 + i%5 {
			p = append(p, int32(259+(i*37+j*11)%250))
		}
		ps = append(ps, p)
	}
	return ps
}

func TestBatchedEqualsSeparate(t *testing.T) {
	const n = 24
	ps := prompts16()
	want := make([][]int32, len(ps))
	single := openModel(t, "stories260K.bin", Options{Threads: 1})
	for i, p := range ps {
		want[i] = greedy(t, single, engine.SeqID(100+i), p, n)
	}
	e := openModel(t, "stories260K.bin", Options{Threads: 2})
	ctx := context.Background()
	// Half the sequences start at step 0, the others join at step 3, so
	// steps mix extends and decodes.
	got := make([][]int32, len(ps))
	next := make([][]int32, len(ps))
	out := make([]engine.Output, len(ps))
	for step := 0; ; step++ {
		var in []engine.Input
		var idx []int
		for i, p := range ps {
			late := i%2 == 1
			switch {
			case len(got[i]) >= n:
				continue
			case got[i] == nil && (!late || step == 3):
				in = append(in, engine.Input{Seq: engine.SeqID(i), Tokens: p})
			case got[i] != nil:
				in = append(in, engine.Input{Seq: engine.SeqID(i), Tokens: next[i]})
			default:
				continue
			}
			idx = append(idx, i)
		}
		if len(in) == 0 {
			if step > 3 {
				break
			}
			continue
		}
		if err := e.Step(ctx, in, out); err != nil {
			t.Fatal(err)
		}
		for k, i := range idx {
			if got[i] == nil {
				got[i] = []int32{}
			}
			got[i] = append(got[i], out[k].Token)
			next[i] = []int32{out[k].Token}
		}
	}
	for i := range ps {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("prompt %d: batched %v, separate %v", i, got[i], want[i])
		}
	}
}

func TestTruncateThenExtend(t *testing.T) {
	e := openModel(t, "stories260K.gguf", Options{})
	ctx := context.Background()
	prompt := []int32{1, 403, 407}
	gen := greedy(t, e, 1, prompt, 30)
	// Keep prompt + 10 generated tokens, then append a different token.
	keep := len(prompt) + 10
	if err := e.Truncate(1, keep); err != nil {
		t.Fatal(err)
	}
	if got := e.seqLen(1); got != keep {
		t.Fatalf("Len after truncate = %d, want %d", got, keep)
	}
	alt := int32(300)
	out := make([]engine.Output, 1)
	if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: []int32{alt}, Want: engine.WantLogits}}, out); err != nil {
		t.Fatal(err)
	}
	logitsA := slices.Clone(out[0].Logits)
	contA := append([]int32{out[0].Token}, greedy(t, e, 1, []int32{out[0].Token}, 15)...)

	// A fresh sequence that never saw the dropped tokens.
	fresh := append(append(slices.Clone(prompt), gen[:10]...), alt)
	if err := e.Step(ctx, []engine.Input{{Seq: 2, Tokens: fresh, Want: engine.WantLogits}}, out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[0].Logits, logitsA) {
		t.Fatalf("logits after truncate+extend differ from a fresh sequence")
	}
	contB := append([]int32{out[0].Token}, greedy(t, e, 2, []int32{out[0].Token}, 15)...)
	if !slices.Equal(contA, contB) {
		t.Fatalf("truncate+extend %v, fresh %v", contA, contB)
	}
	if e.seqLen(1) != e.seqLen(2) {
		t.Fatalf("lengths %d and %d differ", e.seqLen(1), e.seqLen(2))
	}
}

func TestWantAllTokensMatchesDecode(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{})
	gen := greedy(t, e, 1, []int32{1}, 20)
	seq := append([]int32{1}, gen[:19]...)
	out := make([]engine.Output, 1)
	err := e.Step(context.Background(), []engine.Input{{Seq: 2, Tokens: seq, Want: engine.WantAllTokens | engine.WantHidden | engine.WantLogits}}, out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[0].Tokens, gen) {
		t.Fatalf("verification tokens %v, decode %v", out[0].Tokens, gen)
	}
	if out[0].Token != gen[19] || len(out[0].Logits) != 512 || len(out[0].Hidden) != 64 {
		t.Fatalf("token %d logits %d hidden %d", out[0].Token, len(out[0].Logits), len(out[0].Hidden))
	}
	if engine.Argmax(out[0].Logits) != out[0].Token {
		t.Fatalf("greedy token %d is not the argmax of the logits", out[0].Token)
	}
	var ss float64
	for _, v := range out[0].Hidden {
		ss += float64(v) * float64(v)
	}
	if ss == 0 || math.IsNaN(ss) {
		t.Fatalf("hidden state norm %v", ss)
	}
}

func TestSamplingReproducibleAcrossBatches(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{})
	sp := engine.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 42}
	run := func(seq engine.SeqID, withOthers bool) []int32 {
		ctx := context.Background()
		in := []engine.Input{{Seq: seq, Tokens: []int32{1, 403}, Sampling: sp}}
		if withOthers {
			in = append(in, engine.Input{Seq: seq + 1000, Tokens: []int32{1, 300, 301}, Sampling: engine.Sampling{Temperature: 1, Seed: 7}})
		}
		out := make([]engine.Output, len(in))
		var got []int32
		for range 40 {
			if err := e.Step(ctx, in, out); err != nil {
				t.Fatal(err)
			}
			got = append(got, out[0].Token)
			for k := range in {
				in[k].Tokens = []int32{out[k].Token}
			}
		}
		return got
	}
	a, b := run(1, false), run(2, true)
	if !slices.Equal(a, b) {
		t.Fatalf("alone %v\nbatched %v", a, b)
	}
	sp.Seed = 43
	if c := run(3, false); slices.Equal(a, c) {
		t.Fatalf("different seeds gave identical samples %v", a)
	}
	greedyIDs := greedy(t, e, 9, []int32{1, 403}, 40)
	sp = engine.Sampling{Temperature: 1, TopK: 1, Seed: 5}
	if c := run(4, false); !slices.Equal(c, greedyIDs) {
		t.Fatalf("top-k 1 %v differs from greedy %v", c, greedyIDs)
	}
}

func TestSampleDistribution(t *testing.T) {
	e := &Engine{}
	logits := []float32{2, 1, 0, -1, math.Float32frombits(0xff800000)} // last is -inf
	counts := make([]int, len(logits))
	const n = 20000
	for pos := range n {
		counts[e.sample(logits, engine.Sampling{Temperature: 1, Seed: 3}, pos)]++
	}
	z := math.Exp(2) + math.Exp(1) + 1 + math.Exp(-1)
	for i, c := range counts[:4] {
		p := math.Exp(float64(logits[i])) / z
		if got := float64(c) / n; math.Abs(got-p) > 0.02 {
			t.Errorf("token %d sampled with frequency %.3f, want %.3f", i, got, p)
		}
	}
	if counts[4] != 0 {
		t.Errorf("-inf logit sampled %d times", counts[4])
	}
	// top-k 2 keeps only the two best; top-p 0.5 keeps only the best here.
	for pos := range 1000 {
		if tok := e.sample(logits, engine.Sampling{Temperature: 1, TopK: 2, Seed: 1}, pos); tok > 1 {
			t.Fatalf("top-k 2 sampled token %d", tok)
		}
		if tok := e.sample(logits, engine.Sampling{Temperature: 1, TopP: 0.5, Seed: 1}, pos); tok != 0 {
			t.Fatalf("top-p 0.5 sampled token %d", tok)
		}
	}
}

func TestStepErrorsLeaveStateUnchanged(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{ContextLength: 40, KVBudgetBytes: 20 * 5 * 2 * 32 * 4 * blockTokens})
	ctx := context.Background()
	out := make([]engine.Output, 4)
	if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: []int32{1, 2, 3}}}, out); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   []engine.Input
		want error
	}{
		{"empty tokens", []engine.Input{{Seq: 1, Tokens: []int32{5}}, {Seq: 2}}, engine.ErrBadInput},
		{"token out of range", []engine.Input{{Seq: 1, Tokens: []int32{5}}, {Seq: 3, Tokens: []int32{512}}}, engine.ErrBadInput},
		{"negative token", []engine.Input{{Seq: 4, Tokens: []int32{-1}}}, engine.ErrBadInput},
		{"duplicate seq", []engine.Input{{Seq: 1, Tokens: []int32{5}}, {Seq: 1, Tokens: []int32{6}}}, engine.ErrBadInput},
		{"context full", []engine.Input{{Seq: 5, Tokens: []int32{1}}, {Seq: 1, Tokens: make([]int32, 38)}}, engine.ErrContextFull},
	}
	for _, tc := range cases {
		err := e.Step(ctx, tc.in, out)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
		if e.seqLen(1) != 3 || e.seqLen(2) != 0 || e.seqLen(3) != 0 || e.seqLen(5) != 0 {
			t.Errorf("%s: state changed: lens %d %d %d %d", tc.name, e.seqLen(1), e.seqLen(2), e.seqLen(3), e.seqLen(5))
		}
	}
	if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: []int32{1}}}, out[:0]); !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("short output slice: %v", err)
	}
	// KV budget: 20 blocks of 16 tokens. Seq 1 holds 1 block.
	var in []engine.Input
	for i := range 10 {
		in = append(in, engine.Input{Seq: engine.SeqID(10 + i), Tokens: make([]int32, 17)}) // 2 blocks each
	}
	out = make([]engine.Output, len(in))
	err := e.Step(ctx, in, out)
	if !errors.Is(err, engine.ErrOutOfMemory) {
		t.Fatalf("over budget: error %v, want ErrOutOfMemory", err)
	}
	if e.KVBlocksInUse() != 1 || e.seqLen(10) != 0 {
		t.Fatalf("failed step kept %d blocks, seq 10 len %d", e.KVBlocksInUse(), e.seqLen(10))
	}
	if err := e.Step(ctx, in[:9], out); err != nil {
		t.Fatalf("within budget: %v", err)
	}
	if e.KVBlocksInUse() != 19 {
		t.Fatalf("%d blocks in use, want 19", e.KVBlocksInUse())
	}
	for i := range 9 {
		e.Release(engine.SeqID(10 + i))
	}
	e.Release(12345) // unknown: no-op
	if e.KVBlocksInUse() != 1 || e.seqLen(10) != 0 {
		t.Fatalf("after release %d blocks in use", e.KVBlocksInUse())
	}
	if err := e.Truncate(1, 0); err != nil || e.seqLen(1) != 0 || e.KVBlocksInUse() != 0 {
		t.Fatalf("truncate to 0: err %v len %d blocks %d", err, e.seqLen(1), e.KVBlocksInUse())
	}
	if err := e.Truncate(1, -1); !errors.Is(err, engine.ErrBadInput) {
		t.Fatalf("negative truncate: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.Step(cctx, []engine.Input{{Seq: 1, Tokens: []int32{1}}}, out); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestSteadyStateDecodeAllocatesNothing(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{Threads: 2})
	ctx := context.Background()
	const B = 8
	in := make([]engine.Input, B)
	out := make([]engine.Output, B)
	for i := range in {
		in[i] = engine.Input{Seq: engine.SeqID(i), Tokens: []int32{1, int32(300 + i)}, Sampling: engine.Sampling{Temperature: 0.8, TopK: 20, TopP: 0.9, Seed: uint64(i)}}
	}
	if err := e.Step(ctx, in, out); err != nil {
		t.Fatal(err)
	}
	toks := make([]int32, B)
	step := func() {
		for i := range in {
			if e.seqLen(in[i].Seq) > 200 {
				if err := e.Truncate(in[i].Seq, 2); err != nil {
					t.Fatal(err)
				}
			}
			toks[i] = out[i].Token
			in[i].Tokens = toks[i : i+1]
		}
		if err := e.Step(ctx, in, out); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up past a whole truncation cycle, so that every buffer, the
	// sequences' block lists and the prefix cache's index have their
	// steady-state sizes.
	for range 450 {
		step()
	}
	if allocs := testing.AllocsPerRun(30, step); allocs != 0 {
		t.Fatalf("steady-state decode step allocates %v times", allocs)
	}
}

func TestThreadsGiveIdenticalLogits(t *testing.T) {
	ps := prompts16()
	var ref [][]float32
	for _, threads := range []int{1, 2, 3} {
		e := openModel(t, "stories260K.gguf", Options{Threads: threads})
		in := make([]engine.Input, len(ps))
		for i, p := range ps {
			in[i] = engine.Input{Seq: engine.SeqID(i), Tokens: p, Want: engine.WantLogits}
		}
		out := make([]engine.Output, len(in))
		if err := e.Step(context.Background(), in, out); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			if threads == 1 {
				ref = append(ref, slices.Clone(out[i].Logits))
			} else if !slices.Equal(out[i].Logits, ref[i]) {
				t.Fatalf("threads=%d: logits of prompt %d differ", threads, i)
			}
		}
	}
}

// TestRandomRuntimeWorkload drives the engine as a runtime does: batches
// mixing new sequences, extends and decodes, with truncations and releases
// in between. After every step each sequence's logits must equal, bit for
// bit, those of a fresh sequence fed its whole history in one extend.
func TestRandomRuntimeWorkload(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{Threads: 2, KVBudgetBytes: 4 << 20})
	ref := openModel(t, "stories260K.bin", Options{Threads: 1})
	rng := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	hist := map[engine.SeqID][]int32{}
	next := engine.SeqID(1)
	steps := 60
	if testing.Short() {
		steps = 20
	}
	for step := range steps {
		// Occasionally truncate or release.
		for id, h := range hist {
			switch rng.IntN(10) {
			case 0:
				n := rng.IntN(len(h) + 1)
				if err := e.Truncate(id, n); err != nil {
					t.Fatal(err)
				}
				hist[id] = h[:n]
			case 1:
				e.Release(id)
				delete(hist, id)
			}
		}
		for len(hist) < 6 {
			hist[next] = nil
			next++
		}
		var in []engine.Input
		for id, h := range hist {
			if rng.IntN(4) == 0 {
				continue // not in this batch
			}
			n := 1
			if len(h) == 0 || rng.IntN(3) == 0 {
				n = 1 + rng.IntN(6)
			}
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(3 + rng.IntN(509))
			}
			in = append(in, engine.Input{Seq: id, Tokens: toks, Want: engine.WantLogits})
		}
		if len(in) == 0 {
			continue
		}
		out := make([]engine.Output, len(in))
		if err := e.Step(ctx, in, out); err != nil {
			t.Fatal(err)
		}
		for i, ip := range in {
			hist[ip.Seq] = append(hist[ip.Seq], ip.Tokens...)
			if e.seqLen(ip.Seq) != len(hist[ip.Seq]) {
				t.Fatalf("step %d: seq %d holds %d tokens, history %d", step, ip.Seq, e.seqLen(ip.Seq), len(hist[ip.Seq]))
			}
			ro := make([]engine.Output, 1)
			if err := ref.Step(ctx, []engine.Input{{Seq: 1, Tokens: hist[ip.Seq], Want: engine.WantLogits}}, ro); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out[i].Logits, ro[0].Logits) || out[i].Token != ro[0].Token {
				t.Fatalf("step %d: seq %d (len %d) logits differ from a fresh run", step, ip.Seq, len(hist[ip.Seq]))
			}
			ref.Release(1)
		}
	}
	for id := range hist {
		e.Release(id)
	}
	if n := e.KVBlocksInUse(); n != 0 {
		t.Fatalf("%d KV blocks in use after releasing everything", n)
	}
}

// TestCloseUnmapsTheFile closes an engine on a mapped GGUF file: the
// mapping is released (Close reports the unmap) and nothing reads the
// weights afterwards.
func TestCloseUnmapsTheFile(t *testing.T) {
	e := openModel(t, "stories260K.gguf", Options{Threads: 2})
	greedy(t, e, 1, []int32{1}, 4)
	if e.w.file == nil || e.w.file.Data == nil {
		t.Fatal("the engine does not hold the mapped file")
	}
	f := e.w.file
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Data != nil {
		t.Fatal("the file is still mapped after Close")
	}
	dst := []float32{1, 2}
	e.Embed(3, dst)
	if dst[0] != 0 || dst[1] != 0 || e.WeightBytesPerToken() != 0 {
		t.Fatal("a closed engine still reads its weights")
	}
	if err := e.Step(context.Background(), []engine.Input{{Seq: 2, Tokens: []int32{1}}}, make([]engine.Output, 1)); err == nil {
		t.Fatal("Step on a closed engine succeeded")
	}
}
