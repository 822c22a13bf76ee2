package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

func TestClassOf(t *testing.T) {
	for cols, want := range map[int]Class{1: Decode, 2: Batch, BatchCols: Batch, BatchCols + 1: Prompt, 64: Prompt, 4096: Prompt} {
		if got := ClassOf(cols); got != want {
			t.Errorf("ClassOf(%d) = %s, want %s", cols, got, want)
		}
	}
	for c := range Class(NumClasses) {
		back, err := ParseClass(c.String())
		if err != nil || back != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), back, err)
		}
	}
	if _, err := ParseClass("gemv"); err == nil {
		t.Error("ParseClass accepted an unknown name")
	}
}

// allTypes lists the weight types that have kernels.
func allTypes() []gguf.TensorType {
	ts := append([]gguf.TensorType(nil), legacyTypes[:]...)
	for _, kt := range kTypes() {
		ts = append(ts, kt.t)
	}
	return ts
}

// TestArithmeticNamesBitIdenticalKernels checks the promise Decide relies
// on: kernels of two levels that Arithmetic gives the same name give the
// same bits, on random shapes (one to 2·BatchCols+1 columns, so every
// class, through Few too); and it records what makes the promise matter:
// on this CPU, which pairs of levels differ in rounding (Agree finds the
// difference), so that a plan serving the classes of one type with them
// would make a sequence's results depend on its batch.
func TestArithmeticNamesBitIdenticalKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	levels := Available()
	for _, typ := range allTypes() {
		n := 512
		if legacyBlockBytes(typ) != 0 || typ == gguf.F32 || typ == gguf.F16 || typ == gguf.BF16 {
			n = 32 * (8 + rng.IntN(24))
		}
		rows := 33 + rng.IntN(40)
		w, ws := randomWeights(rng, typ, rows, n, false)
		if isKQuant(typ) {
			w, ws = randomKWeights(rng, typ, rows, n)
		}
		for i, a := range levels {
			for _, b := range levels[i+1:] {
				sa, sb := NewSet(a), NewSet(b)
				ka, _ := sa.For(typ)
				kb, _ := sb.For(typ)
				same := sa.Arithmetic(typ) == sb.Arithmetic(typ)
				agree := Agree(n, w, ws, rows, ka, kb)
				switch {
				case same && !agree:
					t.Errorf("%s: %s and %s share the arithmetic %q but give different bits", typ, a, b, sa.Arithmetic(typ))
				case !same && agree && sa.Source(typ) != sb.Source(typ):
					t.Logf("%s: %s (%s) and %s (%s) agreed on the probe", typ, a, sa.Arithmetic(typ), b, sb.Arithmetic(typ))
				case !same:
					t.Logf("%s: %s (%s) and %s (%s) differ in rounding: not mixed", typ, a, sa.Arithmetic(typ), b, sb.Arithmetic(typ))
				}
			}
		}
	}
}

// randomKWeights returns rows of n values of K-quant type t with random
// bytes and finite half-precision scales.
func randomKWeights(rng *rand.Rand, t gguf.TensorType, rows, n int) ([]byte, int) {
	kt := kTypeOf(t)
	rb := n / 256 * kt.bytes
	w := make([]byte, rows*rb)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	offs := map[gguf.TensorType][]int{gguf.Q2_K: {80, 82}, gguf.Q3_K: {108}, gguf.Q4_K: {0, 2}, gguf.Q5_K: {0, 2}, gguf.Q6_K: {208}}[t]
	for b := 0; b < len(w); b += kt.bytes {
		for _, o := range offs {
			h := uint16(0x2000+rng.IntN(0x1800)) | uint16(rng.IntN(2))<<15
			w[b+o], w[b+o+1] = byte(h), byte(h>>8)
		}
	}
	return w, rb
}

// TestAVX2AndAVX512DifferInRounding is the finding behind Decide's rule:
// for the block types the AVX-512 kernels compute with the grouped
// arithmetic and the AVX2 ones with eight lanes, so the same product comes
// out with different bits, and a plan that ran AVX2 for one-column calls
// and AVX-512 for batches would give a decoding sequence other logits
// when it shares a step.
func TestAVX2AndAVX512DifferInRounding(t *testing.T) {
	if !supported(AVX512) {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.F16} {
		const n, rows = 1024, 64
		w, ws := randomWeights(rng, typ, rows, n, false)
		ka, _ := NewSet(AVX2).For(typ)
		kb, _ := NewSet(AVX512).For(typ)
		if Agree(n, w, ws, rows, ka, kb) {
			t.Errorf("%s: AVX2 and AVX-512 gave the same bits on the probe", typ)
		}
	}
	w, ws := randomKWeights(rng, gguf.Q4_K, 64, 1024)
	ka, _ := NewSet(AVX2).For(gguf.Q4_K)
	kb, _ := NewSet(AVX512).For(gguf.Q4_K)
	if NewSet(AVX512).Source(gguf.Q4_K) == AVX512 && Agree(1024, w, ws, 64, ka, kb) {
		t.Error("Q4_K: AVX2 and AVX-512 gave the same bits on the probe")
	}
}

func TestDecide(t *testing.T) {
	arith := func(t gguf.TensorType, l Level) string { return Arithmetic(l, t) }
	asked := 0
	agree := func(gguf.TensorType, Level, Level) bool { asked++; return true }
	tm := func(c Class, typ gguf.TensorType, l Level, s float64) Timing {
		return Timing{Class: c, Type: typ, Level: l, Seconds: s}
	}
	// One-column decode twice as fast at AVX2, batches and prompts four
	// times as fast at AVX-512: the levels differ in rounding, so one of
	// them takes every class (AVX-512: cost 2+1+1 against 1+4+4).
	times := []Timing{
		tm(Decode, gguf.Q8_0, AVX2, 1), tm(Batch, gguf.Q8_0, AVX2, 4), tm(Prompt, gguf.Q8_0, AVX2, 4),
		tm(Decode, gguf.Q8_0, AVX512, 2), tm(Batch, gguf.Q8_0, AVX512, 1), tm(Prompt, gguf.Q8_0, AVX512, 1),
		tm(Decode, gguf.Q8_0, Generic, 0.5), tm(Batch, gguf.Q8_0, Generic, 40), tm(Prompt, gguf.Q8_0, Generic, 40),
		{Class: Attention, Level: Generic, Seconds: 3}, {Class: Attention, Level: AVX2, Seconds: 1}, {Class: Attention, Level: AVX512, Seconds: 2},
	}
	p := Decide(times, arith, agree)
	if got := p.Mul[gguf.Q8_0]; got != [MulClasses]Level{AVX512, AVX512, AVX512} {
		t.Errorf("Q8_0 plan %v, want AVX-512 throughout", got)
	}
	if p.Attention != AVX2 {
		t.Errorf("attention %s, want the fastest (avx2)", p.Attention)
	}
	// Generic and AVX2 share Q8_0's eight-lane arithmetic: when AVX-512 is
	// slow everywhere, they mix (decode generic, the rest AVX2) once the
	// probe agrees, and not when it does not.
	times[3], times[4], times[5] = tm(Decode, gguf.Q8_0, AVX512, 9), tm(Batch, gguf.Q8_0, AVX512, 9), tm(Prompt, gguf.Q8_0, AVX512, 9)
	p = Decide(times, arith, agree)
	if got := p.Mul[gguf.Q8_0]; got != [MulClasses]Level{Generic, AVX2, AVX2} || asked == 0 {
		t.Errorf("Q8_0 plan %v (probe asked %d times), want generic, avx2, avx2", got, asked)
	}
	p = Decide(times, arith, func(gguf.TensorType, Level, Level) bool { return false })
	if got := p.Mul[gguf.Q8_0]; got != [MulClasses]Level{AVX2, AVX2, AVX2} {
		t.Errorf("Q8_0 plan %v with a disagreeing probe, want avx2 throughout", got)
	}
	// AVX512NoGather computes as AVX512 does: it may take decode alone
	// (after the probe) when it is faster there.
	asked = 0
	times = []Timing{
		tm(Decode, gguf.Q8_0, AVX512, 2), tm(Batch, gguf.Q8_0, AVX512, 1), tm(Prompt, gguf.Q8_0, AVX512, 1),
		tm(Decode, gguf.Q8_0, AVX512NoGather, 1), tm(Batch, gguf.Q8_0, AVX512NoGather, 1.1), tm(Prompt, gguf.Q8_0, AVX512NoGather, 1.2),
		tm(Decode, gguf.Q8_0, AVX2, 1.5), tm(Batch, gguf.Q8_0, AVX2, 4), tm(Prompt, gguf.Q8_0, AVX2, 4),
	}
	p = Decide(times, arith, agree)
	if got := p.Mul[gguf.Q8_0]; got != [MulClasses]Level{AVX512NoGather, AVX512, AVX512} || asked == 0 {
		t.Errorf("Q8_0 plan %v (probe asked %d times), want avx512ng, avx512, avx512", got, asked)
	}
	// K-quants: every level its own arithmetic.
	times = []Timing{
		tm(Decode, gguf.Q4_K, AVX2, 1), tm(Batch, gguf.Q4_K, AVX2, 1), tm(Prompt, gguf.Q4_K, AVX2, 3),
		tm(Decode, gguf.Q4_K, AVX512, 1.1), tm(Batch, gguf.Q4_K, AVX512, 1.1), tm(Prompt, gguf.Q4_K, AVX512, 1),
	}
	p = Decide(times, arith, agree)
	if got := p.Mul[gguf.Q4_K]; got != [MulClasses]Level{AVX512, AVX512, AVX512} {
		t.Errorf("Q4_K plan %v, want AVX-512 throughout (cost 3.2 against 5)", got)
	}
	if p.Attention != AVX512 {
		t.Errorf("attention without timings: %s, want the highest level timed", p.Attention)
	}
	if ls := Uniform(AVX2, []gguf.TensorType{gguf.Q8_0, gguf.F16}).Levels(); len(ls) != 1 || ls[0] != AVX2 {
		t.Errorf("Uniform levels %v", ls)
	}
}
