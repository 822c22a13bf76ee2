package cpu

import (
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// TestConformance runs the engine conformance suite on the CPU engine:
// over a real tiny model (llama) and over a generated, quantised GGUF file
// of another architecture (qwen3, Q8_0), with one and with two threads.
func TestConformance(t *testing.T) {
	const ctxLen = 64
	opts := func(mk func(testing.TB, Options) *Engine, threads int) enginetest.Options {
		return enginetest.Options{
			New: func(t testing.TB) engine.Engine {
				return mk(t, Options{Threads: threads, ContextLength: ctxLen})
			},
			RejectsUnknownTokens: true,
			SamplesLogits:        true,
			Embedder:             true,
			AllocFree:            true,
			InUse:                func(e engine.Engine) int { return e.(*Engine).KVBlocksInUse() },
			// Steps check the context between layers; a step of these
			// models is over in microseconds, too soon to cancel reliably.
			Slow: nil,
		}
	}
	file := func(name string) func(testing.TB, Options) *Engine {
		return func(t testing.TB, o Options) *Engine {
			e, err := Open(filepath.Join(modelsDir(t), name), o)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
	}
	generated := func(s tinyShape, seed uint64) func(testing.TB, Options) *Engine {
		return func(t testing.TB, o Options) *Engine {
			f, err := gguf.Parse(buildTiny(t, s, seed))
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewFromGGUF(f, o)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
	}
	base := tinyShape{dim: 64, hidden: 96, layers: 2, vocab: 80, heads: 4, kvHeads: 2, headDim: 16, ropeDim: 16, ropeBase: 10000}
	qwen3 := base
	qwen3.arch, qwen3.typ, qwen3.headDim = "qwen3", gguf.Q8_0, 32
	for _, c := range []struct {
		name string
		o    enginetest.Options
	}{
		{"stories260K", opts(file("stories260K.gguf"), 2)},
		{"qwen3-q8_0", opts(generated(qwen3, 4), 1)},
		{"gemma3-q8_0", opts(generated(archShape("gemma3", gguf.Q8_0), 5), 1)}, // sliding windows of 4
		{"phi3-q4_1", opts(generated(archShape("phi3", gguf.Q4_1), 6), 1)},
	} {
		t.Run(c.name, func(t *testing.T) { enginetest.Run(t, c.o) })
	}
}
