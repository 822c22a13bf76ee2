package cpu

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// tinyEngine opens a generated llama model of weight type typ.
func tinyEngine(t *testing.T, typ gguf.TensorType, opts Options) *Engine {
	t.Helper()
	f, err := gguf.Parse(buildTiny(t, archShape("llama", typ), 7))
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewFromGGUF(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestKernelPlanMeasuredCachedForced opens one model again and again: the
// first start measures and caches the plan, the second reads it, a corrupt
// cache file is measured over and rewritten, Kernels forces one level and
// RemeasureKernels measures despite the cache. Every plan is reported per
// class (KernelReport, KernelChoice) and logged, one line per class.
func TestKernelPlanMeasuredCachedForced(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	opts := Options{Threads: 2, KernelCacheDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	e := tinyEngine(t, gguf.Q8_0, opts)
	r := e.KernelReport()
	if r.Source != PlanMeasured || r.Cost <= 0 || !strings.HasPrefix(r.CachePath, dir) {
		t.Fatalf("first start: %+v", r)
	}
	classes := map[string]bool{}
	for _, c := range r.Choices {
		classes[c.Class] = true
		if _, err := kernels.ParseLevel(c.Level); err != nil || len(c.Times) == 0 {
			t.Errorf("choice %+v", c)
		}
		if c.Times[c.Level] <= 0 {
			t.Errorf("%s: the level chosen has no time: %+v", c.Class, c)
		}
	}
	choice := e.KernelChoice()
	for c := range kernels.Class(kernels.NumClasses) {
		if !classes[c.String()] || choice[c.String()] == "" {
			t.Errorf("class %s missing: report %+v, choice %v", c, r, choice)
		}
	}
	if n := strings.Count(logs.String(), "cpu: kernels"); n != kernels.NumClasses {
		t.Errorf("%d log lines, want one per class:\n%s", n, logs.String())
	}
	logs.Reset()
	e2 := tinyEngine(t, gguf.Q8_0, opts)
	if strings.Contains(logs.String(), "cpu: kernels") {
		t.Errorf("a cached plan logged at Info:\n%s", logs.String())
	}
	if r2 := e2.KernelReport(); r2.Source != PlanCached || r2.Cost != r.Cost || !sameMap(e2.KernelChoice(), choice) {
		t.Fatalf("second start: %+v (first %+v)", r2, r)
	}
	if err := os.WriteFile(r.CachePath, []byte("{corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r3 := tinyEngine(t, gguf.Q8_0, opts).KernelReport(); r3.Source != PlanMeasured {
		t.Fatalf("start after corrupting the cache: %+v", r3)
	}
	if r4 := tinyEngine(t, gguf.Q8_0, opts).KernelReport(); r4.Source != PlanCached {
		t.Fatalf("the corrupt cache was not rewritten: %+v", r4)
	}
	re := opts
	re.RemeasureKernels = true
	if r5 := tinyEngine(t, gguf.Q8_0, re).KernelReport(); r5.Source != PlanMeasured {
		t.Fatalf("RemeasureKernels: %+v", r5)
	}
	forced := opts
	forced.Kernels = kernels.Generic.String()
	ef := tinyEngine(t, gguf.Q8_0, forced)
	if rf := ef.KernelReport(); rf.Source != PlanForced {
		t.Fatalf("forced: %+v", rf)
	}
	for class, l := range ef.KernelChoice() {
		if l != "generic" {
			t.Errorf("forced generic: %s runs %s", class, l)
		}
	}
	off := opts
	off.KernelCacheDir = "off"
	if r6 := tinyEngine(t, gguf.Q8_0, off).KernelReport(); r6.Source != PlanMeasured || r6.CachePath != "" {
		t.Fatalf("without a cache: %+v", r6)
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// extendLogits returns the logits after tokens fed to a new sequence in
// steps of the given sizes (the last step's last position).
func extendLogits(t *testing.T, e *Engine, seq engine.SeqID, tokens []int32, step int) []float32 {
	t.Helper()
	out := make([]engine.Output, 1)
	for i := 0; i < len(tokens); i += step {
		in := []engine.Input{{Seq: seq, Tokens: tokens[i:min(i+step, len(tokens))], Want: engine.WantLogits}}
		if err := e.Step(context.Background(), in, out); err != nil {
			t.Fatal(err)
		}
	}
	e.Release(seq)
	return slices.Clone(out[0].Logits)
}

// samePlanBits reports whether feeding tokens one at a time (Decode),
// four at a time (Batch) and all at once (Prompt) ends on the same logits,
// bit for bit.
func samePlanBits(t *testing.T, e *Engine, tokens []int32) bool {
	one := extendLogits(t, e, 1, tokens, 1)
	four := extendLogits(t, e, 2, tokens, 4)
	all := extendLogits(t, e, 3, tokens, len(tokens))
	eq := func(a, b []float32) bool {
		return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
	}
	return eq(one, four) && eq(one, all)
}

// TestKernelPlansKeepBatchExactness runs plans that give each class its
// own level and checks what the plan rule promises: levels of one
// arithmetic (generic and AVX2 for the block and float types) mixed over
// the classes leave a sequence's logits independent of how its tokens are
// batched, bit for bit; and the reason for the rule: AVX2 for one-column
// calls with AVX-512 for the others (different arithmetic) changes them.
// The prefix cache is off: blocks cached under one plan would carry its
// bits into the next (as, within one plan, they carry a prompt-class
// step's bits into sequences that decode: one more reason a plan mixes
// only levels of one arithmetic).
func TestKernelPlansKeepBatchExactness(t *testing.T) {
	tokens := make([]int32, kernels.BatchCols+8)
	for i := range tokens {
		tokens[i] = int32(1 + i*7%70)
	}
	top := kernels.Detect()
	sets := kernelSets(top, false)
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.F16, gguf.Q4_K} {
		e := tinyEngine(t, typ, Options{Threads: 2, KernelCacheDir: "off", NoPrefixCache: true})
		if !samePlanBits(t, e, tokens) {
			t.Errorf("%s: the measured plan %v gives logits that depend on the batch", typ, e.KernelChoice())
		}
		for _, mix := range [][kernels.MulClasses]kernels.Level{
			{kernels.Generic, kernels.AVX2, kernels.Generic},
			{kernels.AVX2, kernels.AVX512, kernels.AVX512},
		} {
			if slices.ContainsFunc(mix[:], func(l kernels.Level) bool { return int(l) >= len(sets) || sets[l] == nil }) {
				continue
			}
			same := sets[mix[0]].Arithmetic(typ) == sets[mix[1]].Arithmetic(typ) && sets[mix[1]].Arithmetic(typ) == sets[mix[2]].Arithmetic(typ)
			p := kernels.Uniform(top, []gguf.TensorType{typ})
			p.Mul[typ] = mix
			if err := e.applyPlan(kernelPlan{plan: p, source: "test"}, sets); err != nil {
				t.Fatal(err)
			}
			got := samePlanBits(t, e, tokens)
			switch {
			case same && !got:
				t.Errorf("%s: plan %v mixes one arithmetic, yet the logits depend on the batch", typ, mix)
			case !same && got:
				t.Errorf("%s: plan %v mixes arithmetics %s, %s, %s and the logits still agreed: the rule may be too strict", typ, mix,
					sets[mix[0]].Arithmetic(typ), sets[mix[1]].Arithmetic(typ), sets[mix[2]].Arithmetic(typ))
			}
		}
	}
}
