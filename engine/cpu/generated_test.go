package cpu

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/gguf/synth"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// TestGeneratedShapesGenerateText writes every tiny shape of package synth
// (one per architecture, as gen-model writes it) in Q8_0, loads
// it, and generates text after a prompt longer than the shapes' sliding
// windows.
func TestGeneratedShapesGenerateText(t *testing.T) {
	mix, err := quantize.Lookup("Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	archs := map[string]bool{}
	for _, s := range synth.Shapes() {
		if !strings.HasPrefix(s.Name, "tiny-") {
			continue
		}
		archs[s.Arch] = true
		t.Run(s.Name, func(t *testing.T) {
			f := writeShape(t, s, mix, 3)
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewFromGGUF(f, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			prompt := tok.Encode(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 10), false)
			if s.Window > 0 && len(prompt) <= s.Window {
				t.Fatalf("prompt of %d tokens within the window of %d", len(prompt), s.Window)
			}
			ids := greedy(t, e, 1, prompt, 12)
			text := tok.Decode(ids)
			if len(ids) != 12 || text == "" {
				t.Fatalf("generated %v = %q", ids, text)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= s.Vocab {
					t.Fatalf("generated id %d outside the vocabulary of %d", id, s.Vocab)
				}
			}
			t.Logf("%s: %q", s.Name, text)
		})
	}
	for _, a := range Architectures() {
		if !archs[a] {
			t.Errorf("package synth has no tiny shape of %s", a)
		}
	}
}

// TestUnsupportedArchitecture checks the error names what is supported.
func TestUnsupportedArchitecture(t *testing.T) {
	s := archShape("llama", gguf.F32)
	s.arch = "gpt2"
	f, err := gguf.Parse(buildTiny(t, s, 1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewFromGGUF(f, Options{Threads: 1})
	if err == nil || !strings.Contains(err.Error(), `"gpt2"`) || !strings.Contains(err.Error(), strings.Join(Architectures(), ", ")) {
		t.Fatalf("error %v", err)
	}
}

// TestGemma2Defaults checks the values a Gemma 2 file that omits them
// gets: a window of 4096 on even layers, soft-capping at 50 and 30.
func TestGemma2Defaults(t *testing.T) {
	s := archShape("gemma2", gguf.F32)
	s.window, s.attnCap, s.finalCap = 0, 0, 0
	f, err := gguf.Parse(buildTiny(t, s, 1))
	if err != nil {
		t.Fatal(err)
	}
	c, w, err := fromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.attnCap != 50 || c.finalCap != 30 || w.layers[0].window != 4096 || w.layers[1].window != 0 {
		t.Fatalf("caps %v/%v, windows %d/%d", c.attnCap, c.finalCap, w.layers[0].window, w.layers[1].window)
	}
}

// TestThreadsGiveTheSameLogits extends fresh sequences of several lengths
// on a tiny Q8_0 shape with one and with two threads and compares the
// logits bit for bit: every split of the work (matrix rows, attention
// units, the input's rows in whole groups or, for fewer rows than a group a
// thread, its blocks) computes each value as one thread does.
func TestThreadsGiveTheSameLogits(t *testing.T) {
	mix, err := quantize.Lookup("Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	var shape synth.Shape
	for _, s := range synth.Shapes() {
		if strings.HasPrefix(s.Name, "tiny-") && s.Arch == "llama" {
			shape = s
		}
	}
	f := writeShape(t, shape, mix, 5)
	one, err := NewFromGGUF(f, Options{Threads: 1, NoPrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := NewFromGGUF(f, Options{Threads: 2, NoPrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	ctx := context.Background()
	for i, n := range []int{1, 4, 9, 16, 17, 40} {
		toks := make([]int32, n)
		for j := range toks {
			toks[j] = int32(3 + (i*31+j*7)%(shape.Vocab-3))
		}
		var logits [2][]float32
		for k, e := range []*Engine{one, two} {
			in := []engine.Input{{Seq: engine.SeqID(i), Tokens: toks, Want: engine.WantLogits}}
			out := make([]engine.Output, 1)
			if err := e.Step(ctx, in, out); err != nil {
				t.Fatal(err)
			}
			logits[k] = slices.Clone(out[0].Logits)
		}
		for j := range logits[0] {
			if math.Float32bits(logits[0][j]) != math.Float32bits(logits[1][j]) {
				t.Fatalf("%d tokens: logit %d is %v with one thread, %v with two", n, j, logits[0][j], logits[1][j])
			}
		}
	}
}

// writeShape writes random weights of shape s in mix (seeded) as package
// synth does and parses the file.
func writeShape(t *testing.T, s synth.Shape, mix quantize.Mix, seed uint64) *gguf.File {
	t.Helper()
	var b bytes.Buffer
	if err := synth.Write(context.Background(), &b, s, mix, synth.Options{Seed: seed, Threads: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}
