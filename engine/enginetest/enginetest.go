// Package enginetest is the conformance suite for engine.Engine: one set of
// checks of the contract documented in package engine, run against every
// implementation (each hooks it in with a small test that calls Run).
//
// The suite observes an engine only through Step, Truncate, Release and
// the optional interfaces: a sequence holds exactly the tokens it was given
// when appending a token to it yields the same outputs as a fresh sequence
// fed that whole history in one extend, on a second engine built the same
// way (the reference). What an engine promises beyond the interface, or
// legitimately lacks, is stated in Options; nothing is skipped silently.
package enginetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Options describe the engine under test.
type Options struct {
	// New returns a fresh engine; every instance built by New must compute
	// the same outputs for the same inputs (same weights, same seeds). The
	// suite closes it. Its context length should be short (the suite fills
	// a sequence to it), between MinContext and MaxContext.
	New func(t testing.TB) engine.Engine
	// Simulated is the value Info().Simulated must report.
	Simulated bool
	// Tolerance is the largest difference allowed between logits (and
	// hidden states) that the contract says are equal: batched and alone,
	// one extend and several decodes, truncated and fresh. 0 demands
	// bit-identical values. Sampled tokens must always be equal.
	Tolerance float32
	// RejectsUnknownTokens is true when a token id outside
	// [0, Info().VocabSize) is ErrBadInput. An engine whose outputs are a
	// function of any id (sim) accepts them.
	RejectsUnknownTokens bool
	// SamplesLogits is true when sampled tokens are drawn from the logits
	// the engine returns: top-k 1 is greedy, and top-k k never yields a
	// token outside the k largest logits. A simulated engine whose tokens
	// and logits are separate synthetic functions of the prefix lacks it.
	SamplesLogits bool
	// Embedder is true when the engine implements engine.Embedder.
	Embedder bool
	// AllocFree is true when a steady-state decode step allocates nothing.
	AllocFree bool
	// InUse, when set, reports the resources sequences hold (KV blocks,
	// sequence records), so the suite checks that Release frees them and
	// that reuse does not grow them. Nil leaves that
	// unchecked (the subtest says so).
	InUse func(engine.Engine) int
	// Slow, when set, returns an engine computing what New's does, on
	// which a step appending Info().ContextLength/2 tokens to one sequence
	// takes at least SlowStep while a one-token decode is quick, so the
	// suite can cancel a step while it runs. Nil leaves mid-step
	// cancellation unchecked (the subtest says so).
	Slow func(t testing.TB) engine.Engine
}

// MinContext and MaxContext bound the context lengths the suite accepts.
const (
	MinContext = 64
	MaxContext = 1 << 15
)

// SlowStep is how long a slow extend (Options.Slow) must take at least.
const SlowStep = 5 * time.Second

// Run runs the suite as subtests of t.
func Run(t *testing.T, o Options) {
	if o.New == nil {
		t.Fatal("enginetest: Options.New is required")
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, Options)
	}{
		{"Info", testInfo},
		{"EmptyBatch", testEmptyBatch},
		{"WantShapes", testWantShapes},
		{"BatchedEqualsSeparate", testBatchedEqualsSeparate},
		{"ExtendEqualsDecodes", testExtendEqualsDecodes},
		{"TruncateThenExtend", testTruncateThenExtend},
		{"TruncateBounds", testTruncateBounds},
		{"ReleaseFreesAndReuses", testRelease},
		{"BadInput", testBadInput},
		{"ContextFull", testContextFull},
		{"SeededSampling", testSeededSampling},
		{"SamplingFollowsLogits", testSamplingFollowsLogits},
		{"AllowRestricts", testAllowRestricts},
		{"PenaltiesAsShared", testPenalties},
		{"Logprobs", testLogprobs},
		{"Cancelled", testCancelled},
		{"CancelledMidStep", testCancelledMidStep},
		{"Embedder", testEmbedder},
		{"SteadyStateAllocs", testAllocs},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, o) })
	}
}

// open builds an engine with mk and closes it when the test ends.
func open(t *testing.T, mk func(testing.TB) engine.Engine) engine.Engine {
	t.Helper()
	e := mk(t)
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// refSeq is the sequence the reference engine computes expectations on.
const refSeq engine.SeqID = 1 << 62

// harness drives the engine under test, records each sequence's history
// and computes expected outputs on the reference engine.
type harness struct {
	t    *testing.T
	o    Options
	e    engine.Engine
	ref  engine.Engine
	info engine.Info
	hist map[engine.SeqID][]int32
	salt int
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	e := open(t, o.New)
	h := &harness{t: t, o: o, e: e, ref: open(t, o.New), info: e.Info(), hist: map[engine.SeqID][]int32{}}
	if h.info.VocabSize < 4 {
		t.Fatalf("vocabulary of %d tokens is too small for the suite", h.info.VocabSize)
	}
	if c := h.info.ContextLength; c < MinContext || c > MaxContext {
		t.Fatalf("context length %d: the suite needs %d..%d (configure one in Options.New)", c, MinContext, MaxContext)
	}
	return h
}

// tokens returns n valid token ids in [3, VocabSize), different on each
// call (special ids 0-2 are avoided).
func (h *harness) tokens(n int) []int32 {
	v := h.info.VocabSize - 3
	out := make([]int32, n)
	for i := range out {
		h.salt++
		out[i] = int32(3 + (h.salt*7919+h.salt/v)%v)
	}
	return out
}

// clone copies an output out of the engine's buffers.
func clone(o engine.Output) engine.Output {
	o.Tokens = slices.Clone(o.Tokens)
	o.Logits = slices.Clone(o.Logits)
	o.Hidden = slices.Clone(o.Hidden)
	return o
}

// step runs one step on the engine under test, failing the test on error,
// records the appended tokens and returns copies of the outputs.
func (h *harness) step(in ...engine.Input) []engine.Output {
	h.t.Helper()
	out := make([]engine.Output, len(in))
	if err := h.e.Step(context.Background(), in, out); err != nil {
		h.t.Fatalf("step: %v", err)
	}
	for i := range in {
		h.hist[in[i].Seq] = append(h.hist[in[i].Seq], in[i].Tokens...)
		out[i] = clone(out[i])
	}
	return out
}

// fail runs a step that must fail with want and leaves the histories as
// they were.
func (h *harness) fail(ctx context.Context, what string, want error, in []engine.Input, out []engine.Output) {
	h.t.Helper()
	if out == nil {
		out = make([]engine.Output, len(in))
	}
	if err := h.e.Step(ctx, in, out); !errors.Is(err, want) {
		h.t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// expect returns the outputs of a fresh sequence fed hist in one extend on
// the reference engine; with WantAllTokens, Tokens keeps only the last
// appended entries, as a step appending that many tokens returns them.
func (h *harness) expect(hist []int32, appended int, want engine.Want, sp engine.Sampling) engine.Output {
	h.t.Helper()
	out := make([]engine.Output, 1)
	if err := h.ref.Step(context.Background(), []engine.Input{{Seq: refSeq, Tokens: hist, Want: want, Sampling: sp}}, out); err != nil {
		h.t.Fatalf("reference step over %d tokens: %v", len(hist), err)
	}
	o := clone(out[0])
	if o.Tokens != nil {
		o.Tokens = o.Tokens[len(o.Tokens)-appended:]
	}
	h.ref.Release(refSeq)
	return o
}

// probe appends one token to seq and checks that the outputs are those of
// a fresh sequence holding seq's recorded history and that token: seq held
// exactly its recorded history (nothing for a sequence never stepped).
func (h *harness) probe(what string, seqs ...engine.SeqID) {
	h.t.Helper()
	for _, seq := range seqs {
		got := h.step(engine.Input{Seq: seq, Tokens: h.tokens(1), Want: engine.WantLogits | engine.WantHidden})
		want := h.expect(h.hist[seq], 1, engine.WantLogits|engine.WantHidden, engine.Sampling{})
		h.same(fmt.Sprintf("%s: seq %d (history of %d tokens)", what, seq, len(h.hist[seq])-1), got[0], want)
	}
}

// forget releases seqs and their recorded histories.
func (h *harness) forget(seqs ...engine.SeqID) {
	for _, s := range seqs {
		h.e.Release(s)
		delete(h.hist, s)
	}
}

// same checks that got equals want (tokens exactly; logits and hidden
// states within Options.Tolerance).
func (h *harness) same(what string, got, want engine.Output) {
	h.t.Helper()
	if got.Token != want.Token || !slices.Equal(got.Tokens, want.Tokens) {
		h.t.Errorf("%s: token %d tokens %v, want %d %v", what, got.Token, got.Tokens, want.Token, want.Tokens)
	}
	for _, p := range []struct {
		name      string
		got, want []float32
	}{{"logits", got.Logits, want.Logits}, {"hidden state", got.Hidden, want.Hidden}} {
		if d, ok := maxDiff(p.got, p.want); !ok || d > h.o.Tolerance {
			h.t.Errorf("%s: %s differ (lengths %d and %d, largest difference %g, tolerance %g)", what, p.name, len(p.got), len(p.want), d, h.o.Tolerance)
		}
	}
}

// maxDiff returns the largest absolute difference of a and b; ok is false
// when their lengths differ or a value is not finite.
func maxDiff(a, b []float32) (d float32, ok bool) {
	if len(a) != len(b) {
		return 0, false
	}
	for i := range a {
		if !finite(a[i]) || !finite(b[i]) {
			return float32(math.Inf(1)), false
		}
		d = max(d, float32(math.Abs(float64(a[i]-b[i]))))
	}
	return d, true
}

func finite(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// argmax returns the index of the first largest value.
func argmax(x []float32) int32 { return int32(slices.Index(x, slices.Max(x))) }

// seeded is a sampling setting with randomness.
func seeded(seed uint64) engine.Sampling {
	return engine.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: seed}
}

func testInfo(t *testing.T, o Options) {
	e := open(t, o.New)
	in := e.Info()
	switch {
	case in.Name == "" || in.Arch == "":
		t.Errorf("Info %+v: name and architecture must be set", in)
	case in.VocabSize <= 0 || in.HiddenSize <= 0 || in.ContextLength <= 0:
		t.Errorf("Info %+v: vocabulary, hidden size and context length must be positive", in)
	case in.BOS < -1 || int(in.BOS) >= in.VocabSize || in.EOS < -1 || int(in.EOS) >= in.VocabSize:
		t.Errorf("Info %+v: BOS and EOS must be -1 or token ids", in)
	case in.Simulated != o.Simulated:
		t.Errorf("Info %+v: Simulated is %v, want %v", in, in.Simulated, o.Simulated)
	}
	if again := e.Info(); !reflect.DeepEqual(again, in) {
		t.Errorf("Info changed between calls: %+v then %+v", in, again)
	}
}

func testEmptyBatch(t *testing.T, o Options) {
	h := newHarness(t, o)
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(3)})
	if err := h.e.Step(context.Background(), nil, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	h.probe("after an empty batch", 1)
}

// TestWantShapes: each optional output is present exactly when asked for,
// with the documented shape, and asking for it changes nothing else.
func testWantShapes(t *testing.T, o Options) {
	h := newHarness(t, o)
	p := h.tokens(3)
	wants := []engine.Want{0, engine.WantLogits, engine.WantHidden, engine.WantAllTokens,
		engine.WantLogits | engine.WantHidden | engine.WantAllTokens}
	var in []engine.Input
	for i, w := range wants {
		in = append(in, engine.Input{Seq: engine.SeqID(i + 1), Tokens: p, Want: w})
	}
	out := h.step(in...)
	for i, w := range wants {
		g := out[i]
		if g.Token != out[0].Token {
			t.Errorf("want %b: token %d, but %d without optional outputs", w, g.Token, out[0].Token)
		}
		if g.Token < 0 || int(g.Token) >= h.info.VocabSize {
			t.Errorf("want %b: token %d outside the vocabulary", w, g.Token)
		}
		if (g.Logits != nil) != (w&engine.WantLogits != 0) || g.Logits != nil && len(g.Logits) != h.info.VocabSize {
			t.Errorf("want %b: %d logits (nil %v), want %d when asked, nil otherwise", w, len(g.Logits), g.Logits == nil, h.info.VocabSize)
		}
		if (g.Hidden != nil) != (w&engine.WantHidden != 0) || g.Hidden != nil && len(g.Hidden) != h.info.HiddenSize {
			t.Errorf("want %b: hidden state of %d (nil %v), want %d when asked, nil otherwise", w, len(g.Hidden), g.Hidden == nil, h.info.HiddenSize)
		}
		if (g.Tokens != nil) != (w&engine.WantAllTokens != 0) || g.Tokens != nil && (len(g.Tokens) != len(p) || g.Tokens[len(p)-1] != g.Token) {
			t.Errorf("want %b: tokens %v, want %d ending in the sampled token when asked, nil otherwise", w, g.Tokens, len(p))
		}
		if g.Logits != nil {
			if _, ok := maxDiff(g.Logits, g.Logits); !ok {
				t.Errorf("want %b: logits are not finite", w)
			}
			if a := argmax(g.Logits); a != g.Token {
				t.Errorf("want %b: greedy token %d is not the largest logit's %d", w, g.Token, a)
			}
		}
		if g.Hidden != nil {
			ss := 0.0
			for _, v := range g.Hidden {
				ss += float64(v) * float64(v)
			}
			if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
				t.Errorf("want %b: hidden state has squared norm %g", w, ss)
			}
		}
	}
	// Outputs of one step do not share memory.
	if out := make([]engine.Output, 2); h.e.Step(context.Background(), []engine.Input{
		{Seq: 1, Tokens: h.tokens(1), Want: engine.WantLogits | engine.WantHidden},
		{Seq: 2, Tokens: h.tokens(1), Want: engine.WantLogits | engine.WantHidden},
	}, out) == nil {
		if &out[0].Logits[0] == &out[1].Logits[0] || &out[0].Hidden[0] == &out[1].Hidden[0] {
			t.Error("two sequences' outputs share a buffer")
		}
	} else {
		t.Error("decode step after the shapes step failed")
	}
}

// TestBatchedEqualsSeparate runs sequences that join, extend, decode and
// leave at different steps in shuffled batches, then replays each one
// alone on the reference engine: every output must be the same.
func testBatchedEqualsSeparate(t *testing.T, o Options) {
	h := newHarness(t, o)
	const nSeq, steps = 8, 10
	wants := []engine.Want{0, engine.WantLogits, engine.WantHidden, engine.WantLogits | engine.WantHidden | engine.WantAllTokens}
	type track struct {
		in   []engine.Input
		out  []engine.Output
		next []int32
	}
	tr := make([]track, nSeq)
	for step := range steps {
		var in []engine.Input
		var idx []int
		for k := range nSeq {
			i := (k + step*3) % nSeq // a different order every step
			join, leave := i%3, 6+i%4
			var toks []int32
			switch {
			case step == join:
				toks = h.tokens(1 + i%5)
			case step > join && step < leave && step%4 == i%4:
				toks = append(tr[i].next, h.tokens(2)...) // an extend mid-stream
			case step > join && step < leave:
				toks = tr[i].next
			case step == leave:
				h.e.Release(engine.SeqID(i))
				continue
			default:
				continue
			}
			sp := engine.Sampling{}
			if i%2 == 1 {
				sp = seeded(uint64(i))
			}
			in = append(in, engine.Input{Seq: engine.SeqID(i), Tokens: toks, Want: wants[i%len(wants)], Sampling: sp})
			idx = append(idx, i)
		}
		out := h.step(in...)
		for k, i := range idx {
			tr[i].in = append(tr[i].in, in[k])
			tr[i].out = append(tr[i].out, out[k])
			tr[i].next = []int32{out[k].Token}
		}
	}
	for i := range tr {
		for k, ip := range tr[i].in {
			got := make([]engine.Output, 1)
			if err := h.ref.Step(context.Background(), []engine.Input{ip}, got); err != nil {
				t.Fatal(err)
			}
			h.same(fmt.Sprintf("seq %d step %d: batched vs alone", i, k), tr[i].out[k], clone(got[0]))
		}
	}
}

// TestExtendEqualsDecodes: appending k tokens in one extend gives, at each
// position, what k one-token decodes give, whether the prompt came first
// or everything came in one step.
func testExtendEqualsDecodes(t *testing.T, o Options) {
	h := newHarness(t, o)
	const all = engine.WantLogits | engine.WantHidden | engine.WantAllTokens
	for n, sp := range []engine.Sampling{{}, seeded(9)} {
		a, b, c := engine.SeqID(10*n+1), engine.SeqID(10*n+2), engine.SeqID(10*n+3)
		p, x := h.tokens(4), h.tokens(6)
		lh := engine.WantLogits | engine.WantHidden
		first := h.step(engine.Input{Seq: a, Tokens: p, Want: lh, Sampling: sp})[0]
		dec := make([]engine.Output, len(x))
		for j := range x {
			dec[j] = h.step(engine.Input{Seq: a, Tokens: x[j : j+1], Want: lh, Sampling: sp})[0]
		}
		last := dec[len(x)-1]
		h.same("prompt extend", h.step(engine.Input{Seq: b, Tokens: p, Want: lh, Sampling: sp})[0], first)
		want := last
		for _, d := range dec {
			want.Tokens = append(want.Tokens, d.Token)
		}
		h.same(fmt.Sprintf("sampling %+v: extend of %d after the prompt vs decodes", sp, len(x)),
			h.step(engine.Input{Seq: b, Tokens: x, Want: all, Sampling: sp})[0], want)
		want.Tokens = append([]int32{first.Token}, want.Tokens...)
		want.Tokens = append(make([]int32, len(p)-1), want.Tokens...)
		got := h.step(engine.Input{Seq: c, Tokens: append(slices.Clone(p), x...), Want: all, Sampling: sp})[0]
		if len(got.Tokens) == len(p)+len(x) {
			copy(got.Tokens, make([]int32, len(p)-1)) // positions inside the prompt have no decode to compare with
		}
		h.same(fmt.Sprintf("sampling %+v: one extend of prompt and tokens vs decodes", sp), got, want)
	}
}

// TestTruncateThenExtend: after Truncate(n) a sequence continues exactly
// like a fresh one fed its first n tokens, down to n = 0.
func testTruncateThenExtend(t *testing.T, o Options) {
	h := newHarness(t, o)
	const seq = 1
	h.step(engine.Input{Seq: seq, Tokens: h.tokens(5)})
	for range 20 {
		h.step(engine.Input{Seq: seq, Tokens: h.tokens(1)})
	}
	for _, keep := range []func(n int) int{
		func(n int) int { return n - 1 },  // drop the last token
		func(n int) int { return n - 9 },  // across several positions
		func(n int) int { return n / 2 },  //
		func(n int) int { return 1 },      // keep only the first
		func(n int) int { return 0 },      // empty
		func(n int) int { return n },      // no-op
		func(n int) int { return n - 17 }, // over a long stretch
	} {
		n := keep(len(h.hist[seq]))
		if err := h.e.Truncate(seq, n); err != nil {
			t.Fatalf("Truncate(%d) of %d tokens: %v", n, len(h.hist[seq]), err)
		}
		h.hist[seq] = h.hist[seq][:n]
		x := h.tokens(3)
		got := h.step(engine.Input{Seq: seq, Tokens: x, Want: engine.WantLogits | engine.WantAllTokens})
		want := h.expect(h.hist[seq], len(x), engine.WantLogits|engine.WantAllTokens, engine.Sampling{})
		h.same(fmt.Sprintf("truncate to %d then extend by %d", n, len(x)), got[0], want)
		for range 4 {
			h.step(engine.Input{Seq: seq, Tokens: h.tokens(3)})
		}
	}
}

// TestTruncateBounds: a negative length is ErrBadInput; a length at or
// beyond the sequence's is a no-op (or ErrBadInput); either way the
// sequence is unchanged. Truncating an unknown sequence to 0 succeeds.
func testTruncateBounds(t *testing.T, o Options) {
	h := newHarness(t, o)
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(6)})
	if err := h.e.Truncate(1, -1); !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("Truncate(-1): %v, want ErrBadInput", err)
	}
	h.probe("after a negative truncate", 1)
	n := len(h.hist[1])
	if err := h.e.Truncate(1, n); err != nil {
		t.Errorf("Truncate to the length %d: %v", n, err)
	}
	if err := h.e.Truncate(1, n+5); err != nil && !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("Truncate beyond the length: %v, want nil or ErrBadInput", err)
	}
	h.probe("after truncates at and beyond the length", 1)
	if err := h.e.Truncate(2, 0); err != nil {
		t.Errorf("Truncate(0) of an unknown sequence: %v", err)
	}
	if err := h.e.Truncate(3, 4); err != nil && !errors.Is(err, engine.ErrBadInput) {
		t.Errorf("Truncate(4) of an unknown sequence: %v, want nil or ErrBadInput", err)
	}
	h.probe("unknown sequences after truncates", 2, 3)
}

// TestRelease: Release forgets a sequence (its id then starts empty),
// leaves the others alone, ignores unknown ids, and frees what the
// sequence held.
func testRelease(t *testing.T, o Options) {
	h := newHarness(t, o)
	for s := engine.SeqID(1); s <= 3; s++ {
		h.step(engine.Input{Seq: s, Tokens: h.tokens(20)})
	}
	h.forget(2)
	h.e.Release(2)   // twice
	h.e.Release(999) // never seen
	h.probe("after releases", 1, 3, 2)
	h.forget(1, 2, 3)
	if o.InUse == nil {
		t.Log("Options.InUse is nil: that Release frees the engine's resources is not checked")
		return
	}
	if n := o.InUse(h.e); n != 0 {
		t.Fatalf("%d resources in use after releasing every sequence", n)
	}
	// Cycles of new sequences reuse what earlier ones freed.
	var peak int
	for cycle := range 3 {
		for s := range 4 {
			h.step(engine.Input{Seq: engine.SeqID(100*cycle + s), Tokens: h.tokens(20 + 3*s)})
		}
		n := o.InUse(h.e)
		if cycle == 0 {
			peak = n
		} else if n != peak {
			t.Fatalf("cycle %d holds %d resources, the first held %d", cycle, n, peak)
		}
		if n == 0 {
			t.Fatal("InUse reports 0 while sequences hold tokens")
		}
		for s := range 4 {
			h.forget(engine.SeqID(100*cycle + s))
		}
		if n := o.InUse(h.e); n != 0 {
			t.Fatalf("cycle %d: %d resources in use after freeing every sequence", cycle, n)
		}
	}
}

// TestBadInput: malformed batches fail with ErrBadInput and advance no
// sequence, not even those before the bad input.
func testBadInput(t *testing.T, o Options) {
	h := newHarness(t, o)
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(4)})
	x, p := h.tokens(1), h.tokens(3)
	cases := []struct {
		name string
		in   []engine.Input
		out  []engine.Output
	}{
		{"empty tokens last", []engine.Input{{Seq: 1, Tokens: x}, {Seq: 7, Tokens: p}, {Seq: 8}}, nil},
		{"empty tokens first", []engine.Input{{Seq: 8, Tokens: []int32{}}, {Seq: 1, Tokens: x}, {Seq: 7, Tokens: p}}, nil},
		{"duplicate sequence", []engine.Input{{Seq: 1, Tokens: x}, {Seq: 7, Tokens: p}, {Seq: 1, Tokens: x}}, nil},
		{"duplicate new sequence", []engine.Input{{Seq: 1, Tokens: x}, {Seq: 7, Tokens: p}, {Seq: 7, Tokens: x}}, nil},
		{"short output slice", []engine.Input{{Seq: 1, Tokens: x}, {Seq: 7, Tokens: p}}, make([]engine.Output, 1)},
	}
	if o.RejectsUnknownTokens {
		v := int32(h.info.VocabSize)
		cases = append(cases,
			struct {
				name string
				in   []engine.Input
				out  []engine.Output
			}{"token beyond the vocabulary", []engine.Input{{Seq: 1, Tokens: x}, {Seq: 7, Tokens: []int32{p[0], v}}}, nil},
			struct {
				name string
				in   []engine.Input
				out  []engine.Output
			}{"negative token", []engine.Input{{Seq: 1, Tokens: x}, {Seq: 7, Tokens: []int32{-1}}}, nil})
	} else {
		t.Log("Options.RejectsUnknownTokens is false: token ids outside the vocabulary are not checked")
	}
	for _, c := range cases {
		h.fail(context.Background(), c.name, engine.ErrBadInput, c.in, c.out)
		h.probe("after "+c.name, 1, 7, 8)
		h.forget(7, 8)
	}
}

// TestContextFull: a sequence takes tokens up to the context length and
// no more; the failing step advances nothing.
func testContextFull(t *testing.T, o Options) {
	h := newHarness(t, o)
	c := h.info.ContextLength
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(c - 1)})
	h.step(engine.Input{Seq: 2, Tokens: h.tokens(3)})
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(1)}) // exactly full
	h.fail(context.Background(), "decode past the context", engine.ErrContextFull,
		[]engine.Input{{Seq: 2, Tokens: h.tokens(1)}, {Seq: 1, Tokens: h.tokens(1)}}, nil)
	h.fail(context.Background(), "new sequence longer than the context", engine.ErrContextFull,
		[]engine.Input{{Seq: 2, Tokens: h.tokens(1)}, {Seq: 3, Tokens: h.tokens(c + 1)}}, nil)
	h.fail(context.Background(), "extend past the context", engine.ErrContextFull,
		[]engine.Input{{Seq: 2, Tokens: h.tokens(c - 2)}}, nil)
	h.probe("after context overflows", 2, 3)
	if err := h.e.Truncate(1, c-2); err != nil {
		t.Fatal(err)
	}
	h.hist[1] = h.hist[1][:c-2]
	h.probe("full sequence truncated by two", 1)
	h.step(engine.Input{Seq: 4, Tokens: h.tokens(c)}) // a fresh sequence of exactly the context
}

// TestSeededSampling: with a seed, the sampled tokens depend on the seed
// and the sequence alone, not on the sequence id or the batch; another
// seed gives other tokens.
func testSeededSampling(t *testing.T, o Options) {
	h := newHarness(t, o)
	p := h.tokens(2)
	run := func(seq engine.SeqID, sp engine.Sampling, others bool) []int32 {
		in := []engine.Input{{Seq: seq, Tokens: p, Sampling: sp}}
		if others {
			in = append(in, engine.Input{Seq: seq + 1, Tokens: h.tokens(3), Sampling: seeded(7)},
				engine.Input{Seq: seq + 2, Tokens: h.tokens(1)})
		}
		var got []int32
		for range 16 {
			out := h.step(in...)
			got = append(got, out[0].Token)
			for k := range in {
				in[k].Tokens = []int32{out[k].Token}
			}
		}
		return got
	}
	a := run(1, seeded(42), false)
	if b := run(10, seeded(42), true); !slices.Equal(a, b) {
		t.Errorf("seed 42 alone %v, in a batch under another id %v", a, b)
	}
	// A high temperature, so that even a model sure of its next token
	// (random weights can be) leaves the seed something to choose.
	hot := func(seed uint64) engine.Sampling { return engine.Sampling{Temperature: 8, Seed: seed} }
	if a, c := run(20, hot(42), false), run(30, hot(43), false); slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 sampled the same %v", a)
	}
}

// TestAllowRestricts: a token drawn under an Allow set is in the set, at
// the last position and at every position of an extend, greedy or seeded.
func testAllowRestricts(t *testing.T, o Options) {
	h := newHarness(t, o)
	v := h.info.VocabSize
	set := func(ids ...int32) []uint64 {
		m := make([]uint64, (v+63)/64)
		for _, id := range ids {
			m[id/64] |= 1 << (id % 64)
		}
		return m
	}
	for k, sp := range []engine.Sampling{{}, seeded(5), {Temperature: 8, Seed: 9}} {
		seq := engine.SeqID(100 + k)
		toks := h.tokens(4)
		one, two := int32(v-1-k), []int32{int32(v / 3), int32(v/3 + 7)}
		allow := [][]uint64{set(two...), nil, set(one), set(two...)}
		out := h.step(engine.Input{Seq: seq, Tokens: toks, Want: engine.WantAllTokens, Sampling: sp, Allow: allow})
		got := out[0].Tokens
		if len(got) != 4 || got[2] != one || !slices.Contains(two, got[0]) || !slices.Contains(two, got[3]) || out[0].Token != got[3] {
			t.Fatalf("sampling %+v: extend drew %v (token %d); want positions 0 and 3 in %v, 2 = %d", sp, got, out[0].Token, two, one)
		}
		out = h.step(engine.Input{Seq: seq, Tokens: []int32{got[3]}, Sampling: sp, Allow: [][]uint64{set(one)}})
		if out[0].Token != one {
			t.Fatalf("sampling %+v: decode drew %d, the only allowed token is %d", sp, out[0].Token, one)
		}
	}
}

// TestPenalties: with penalties, biases or min-p, the sampled token is the
// shared sampler's (engine.Sampler) over the step's own logits and the
// sequence's history, in every engine; a bias against the greedy token
// moves it.
func testPenalties(t *testing.T, o Options) {
	h := newHarness(t, o)
	prompt := h.tokens(6)
	prompt = append(prompt, prompt[:3]...)
	free := h.step(engine.Input{Seq: 1, Tokens: prompt, Want: engine.WantLogits})[0]
	against := engine.Sampling{Penalties: engine.Penalties{Bias: []engine.TokenBias{{Token: free.Token, Bias: -1e4}}},
		History: prompt, PromptLen: len(prompt)}
	if b := h.step(engine.Input{Seq: 2, Tokens: prompt, Want: engine.WantLogits, Sampling: against})[0]; b.Token == free.Token {
		t.Fatalf("a bias of -1e4 against token %d left it sampled", free.Token)
	}
	pen := engine.Penalties{Frequency: 0.7, Presence: 0.4, Repetition: 1.3, Bias: []engine.TokenBias{{Token: prompt[0], Bias: 2}}}
	for n, base := range []engine.Sampling{{Penalties: pen}, {Temperature: 1.5, MinP: 0.05, Seed: 11, Penalties: pen}} {
		seq := engine.SeqID(10 + n)
		var held []int32
		toks := prompt
		for range 12 {
			full := append(slices.Clone(held), toks...)
			sp := base
			sp.History, sp.PromptLen = full, len(prompt)
			out := h.step(engine.Input{Seq: seq, Tokens: toks, Want: engine.WantLogits, Sampling: sp})[0]
			var s engine.Sampler
			if want := s.Sample(out.Logits, &sp, len(full)); out.Token != want {
				t.Fatalf("sampling %d: token %d after %d tokens, the shared sampler draws %d from the step's logits", n, out.Token, len(full), want)
			}
			held, toks = full, []int32{out.Token}
		}
	}
}

// TestLogprobs: the recorded log-probability of each sampled token is the
// log-softmax of the step's own logits at it, and the top tokens are the
// most likely ones, in order; an extend that wants every token records one
// per position.
func testLogprobs(t *testing.T, o Options) {
	h := newHarness(t, o)
	var rec []engine.Logprob
	prompt := h.tokens(5)
	for n, sp := range []engine.Sampling{{}, {Temperature: 1, Seed: 4, Penalties: engine.Penalties{Presence: 1}}} {
		sp.Logprobs, sp.TopLogprobs, sp.Record = true, 3, &rec
		held, toks := []int32(nil), prompt
		for range 4 {
			rec = rec[:0]
			full := append(slices.Clone(held), toks...)
			sp.History = full
			out := h.step(engine.Input{Seq: engine.SeqID(1 + n), Tokens: toks, Want: engine.WantLogits, Sampling: sp})[0]
			if len(rec) != 1 || rec[0].Pos != int32(len(full)) || rec[0].Token != out.Token {
				t.Fatalf("sampling %d: recorded %+v for token %d at %d", n, rec, out.Token, len(full))
			}
			checkLogprob(t, out.Logits, rec[0], 3)
			held, toks = full, []int32{out.Token}
		}
	}
	rec = rec[:0]
	x := h.tokens(4)
	sp := engine.Sampling{Logprobs: true, Record: &rec}
	out := h.step(engine.Input{Seq: 9, Tokens: x, Want: engine.WantAllTokens | engine.WantLogits, Sampling: sp})[0]
	if len(rec) != len(x) {
		t.Fatalf("an extend of %d wanting every token recorded %d", len(x), len(rec))
	}
	for i, r := range rec {
		if r.Pos != int32(i+1) || r.Token != out.Tokens[i] || len(r.Top) != 0 {
			t.Fatalf("record %d: %+v, tokens %v", i, r, out.Tokens)
		}
	}
	checkLogprob(t, out.Logits, rec[len(rec)-1], 0)
}

// checkLogprob compares r with the log-softmax of logits.
func checkLogprob(t *testing.T, logits []float32, r engine.Logprob, top int) {
	t.Helper()
	mx := slices.Max(logits)
	sum := 0.0
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	ls := func(tok int32) float64 { return float64(logits[tok]-mx) - math.Log(sum) }
	if d := math.Abs(float64(r.Logprob) - ls(r.Token)); d > 1e-4 {
		t.Fatalf("logprob of %d: %v, the log-softmax is %v", r.Token, r.Logprob, ls(r.Token))
	}
	if len(r.Top) != top {
		t.Fatalf("%d top logprobs, want %d", len(r.Top), top)
	}
	for i, x := range r.Top {
		if math.Abs(float64(x.Logprob)-ls(x.Token)) > 1e-4 || (i > 0 && x.Logprob > r.Top[i-1].Logprob) {
			t.Fatalf("top %d: %+v of %+v", i, x, r.Top)
		}
	}
	if top > 0 && logits[r.Top[0].Token] != mx {
		t.Fatalf("the most likely token is not first: %+v", r.Top)
	}
}

// TestSamplingFollowsLogits: sampled tokens come from the returned logits.
func testSamplingFollowsLogits(t *testing.T, o Options) {
	if !o.SamplesLogits {
		t.Skip("Options.SamplesLogits is false: the engine's sampled tokens are not drawn from its logits")
	}
	h := newHarness(t, o)
	const k = 5
	in := []engine.Input{
		{Seq: 1, Tokens: h.tokens(2), Want: engine.WantLogits, Sampling: engine.Sampling{Temperature: 1, TopK: 1, Seed: 3}},
		{Seq: 2, Tokens: h.tokens(2), Want: engine.WantLogits, Sampling: engine.Sampling{Temperature: 2, TopK: k, Seed: 4}},
	}
	for range 24 {
		out := h.step(in...)
		if a := argmax(out[0].Logits); out[0].Token != a {
			t.Fatalf("top-k 1 sampled %d, the largest logit is %d's", out[0].Token, a)
		}
		l := out[1].Logits
		above := 0
		for _, v := range l {
			if v > l[out[1].Token] {
				above++
			}
		}
		if above >= k {
			t.Fatalf("top-k %d sampled token %d with %d larger logits", k, out[1].Token, above)
		}
		for i := range in {
			in[i].Tokens = []int32{out[i].Token}
		}
	}
}

// TestCancelled: a step under a context that has ended fails with the
// context's error and advances nothing.
func testCancelled(t *testing.T, o Options) {
	h := newHarness(t, o)
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(4)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.fail(ctx, "cancelled context", context.Canceled, []engine.Input{{Seq: 1, Tokens: h.tokens(1)}, {Seq: 9, Tokens: h.tokens(3)}}, nil)
	h.probe("after a cancelled step", 1, 9)
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	h.fail(dctx, "expired deadline", context.DeadlineExceeded, []engine.Input{{Seq: 1, Tokens: h.tokens(1)}, {Seq: 10, Tokens: h.tokens(3)}}, nil)
	h.probe("after a step past its deadline", 1, 10)
}

// TestCancelledMidStep: cancelling a running step ends it early with the
// context's error, and advances nothing.
func testCancelledMidStep(t *testing.T, o Options) {
	if o.Slow == nil {
		t.Skip("Options.Slow is nil: no engine slow enough to cancel a step while it runs")
	}
	h := newHarness(t, o)
	h.e = open(t, o.Slow)
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(1)})
	h.step(engine.Input{Seq: 1, Tokens: h.tokens(1)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := []engine.Input{{Seq: 1, Tokens: h.tokens(1)}, {Seq: 2, Tokens: h.tokens(h.info.ContextLength / 2)}}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- h.e.Step(ctx, in, make([]engine.Output, len(in))) }()
	// Cancel once the step is under way. Should the goroutine not have
	// started by then, the step sees a cancelled context at its start,
	// which must fail the same way.
	time.Sleep(50 * time.Millisecond)
	cancel()
	err := <-done
	if took := time.Since(start); took >= SlowStep {
		t.Fatalf("cancelled step took %v, as long as an uncancelled one", took)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled step: %v, want context.Canceled", err)
	}
	h.probe("after a step cancelled while it ran", 1, 2)
}

func testEmbedder(t *testing.T, o Options) {
	e := open(t, o.New)
	em, ok := e.(engine.Embedder)
	if ok != o.Embedder {
		t.Fatalf("implements engine.Embedder: %v, Options.Embedder: %v", ok, o.Embedder)
	}
	if !ok {
		t.Skip("Options.Embedder is false: the engine has no token embeddings")
	}
	n := e.Info().HiddenSize
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	em.Embed(3, a)
	em.Embed(3, b)
	em.Embed(4, c)
	if d, ok := maxDiff(a, b); !ok || d != 0 {
		t.Errorf("two embeddings of token 3 differ (or are not finite)")
	}
	if d, ok := maxDiff(a, c); !ok || d == 0 {
		t.Errorf("tokens 3 and 4 have the same embedding (or it is not finite)")
	}
}

// TestSteadyStateAllocs: once warm, decode steps allocate nothing.
func testAllocs(t *testing.T, o Options) {
	if !o.AllocFree {
		t.Skip("Options.AllocFree is false: the engine allocates in steady state")
	}
	h := newHarness(t, o)
	ctx := context.Background()
	const B = 4
	in := make([]engine.Input, B)
	out := make([]engine.Output, B)
	lens := make([]int, B)
	for i := range in {
		in[i] = engine.Input{Seq: engine.SeqID(i + 1), Tokens: h.tokens(2), Want: engine.Want(i % 4)}
		if i%2 == 1 {
			in[i].Sampling = seeded(uint64(i))
		}
	}
	toks := make([]int32, B)
	step := func() {
		if err := h.e.Step(ctx, in, out); err != nil {
			t.Fatal(err)
		}
		for i := range in {
			lens[i] += len(in[i].Tokens)
			if lens[i] > h.info.ContextLength/2 {
				if err := h.e.Truncate(in[i].Seq, 2); err != nil {
					t.Fatal(err)
				}
				lens[i] = 2
			}
			toks[i] = out[i].Token
			in[i].Tokens = toks[i : i+1]
		}
	}
	for range h.info.ContextLength/2 + 2 {
		step() // through one truncation per sequence
	}
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("a steady-state decode step allocates %v times", n)
	}
}
