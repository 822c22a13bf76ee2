package cpu

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/gguf/synth"
)

// goldenModel is a test model of one architecture, with the length of the
// prompt it is given (beyond its sliding windows, within its context).
type goldenModel struct {
	name   string
	arch   string
	prompt int
	open   func(t *testing.T) *Engine
}

// goldenModels lists the test models: every tiny shape of package synth
// (Q8_0), every architecture's generated shape of the reference test
// (Q8_0, and F16 for the F32-activation kernels), Gemma 2 without the
// values its files may omit, and stories260K.
func goldenModels(t *testing.T, level kernels.Level) []goldenModel {
	opts := Options{Threads: 2, Kernels: level.String()}
	fromFile := func(f *gguf.File) *Engine {
		e, err := NewFromGGUF(f, opts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	var ms []goldenModel
	mix, err := quantize.Lookup("Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range synth.Shapes() {
		if !strings.HasPrefix(s.Name, "tiny-") {
			continue
		}
		ms = append(ms, goldenModel{s.Name, s.Arch, 80, func(t *testing.T) *Engine { return fromFile(writeShape(t, s, mix, 11)) }})
	}
	shape := func(name string, s tinyShape, seed uint64) goldenModel {
		return goldenModel{name, s.arch, 40, func(t *testing.T) *Engine {
			f, err := gguf.Parse(buildTiny(t, s, seed))
			if err != nil {
				t.Fatal(err)
			}
			return fromFile(f)
		}}
	}
	for i, a := range Architectures() {
		for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.F16} {
			ms = append(ms, shape(fmt.Sprintf("shape-%s-%s", a, typ), archShape(a, typ), uint64(20+i)))
		}
	}
	g2 := archShape("gemma2", gguf.Q8_0)
	g2.window, g2.attnCap, g2.finalCap = 0, 0, 0
	ms = append(ms, shape("shape-gemma2-defaults", g2, 30))
	ms = append(ms, goldenModel{"stories260K", "llama", 40, func(t *testing.T) *Engine {
		e, err := Open(filepath.Join(modelsDir(t), "stories260K.gguf"), opts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}})
	return ms
}

// goldenRun extends a fresh sequence with a fixed prompt of n tokens and
// decodes 8 more greedily; it returns the tokens chosen and an FNV-1a hash
// of the bits of every logit seen (the prompt's last position and each
// decode step).
func goldenRun(t *testing.T, e *Engine, n int) (string, uint64) {
	vocab := e.Info().VocabSize
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(3 + (i*37+i*i)%(vocab-3))
	}
	h := fnv.New64a()
	var buf [4]byte
	in := []engine.Input{{Seq: 1, Tokens: prompt, Want: engine.WantLogits}}
	out := make([]engine.Output, 1)
	var toks []string
	for range 9 {
		if err := e.Step(context.Background(), in, out); err != nil {
			t.Fatal(err)
		}
		for _, v := range out[0].Logits {
			b := math.Float32bits(v)
			buf[0], buf[1], buf[2], buf[3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
			_, _ = h.Write(buf[:])
		}
		toks = append(toks, fmt.Sprint(out[0].Token))
		in[0].Tokens = []int32{out[0].Token}
	}
	return strings.Join(toks, " "), h.Sum64()
}

// goldenOut is a model's recorded output: its greedy tokens, and the hash
// of its logits at each kernel level (indexed by kernels.Level).
type goldenOut struct {
	tokens string
	hashes []uint64
}

// TestArchitecturesGolden checks that every architecture's test models
// give, at every kernel level this CPU has, the greedy tokens and the
// logits (bit for bit, through their hash) recorded in goldenArch. The
// values are those of amd64: elsewhere the compiler may fuse
// multiply-adds, and the math functions differ.
func TestArchitecturesGolden(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("golden values are recorded on amd64")
	}
	want := goldenArch()
	seen := map[string]bool{}
	for l := kernels.Generic; l <= kernels.Detect(); l++ {
		for _, m := range goldenModels(t, l) {
			seen[m.arch] = true
			t.Run(m.name+"/"+l.String(), func(t *testing.T) {
				e := m.open(t)
				defer e.Close()
				toks, hash := goldenRun(t, e, m.prompt)
				w, ok := want[m.name]
				if !ok || int(l) >= len(w.hashes) {
					// A new model or architecture: its outputs, to record
					// in goldenArch (hashes indexed by level).
					t.Fatalf("no golden output of %s at level %s; it gives %q, %#016x", m.name, l, toks, hash)
				}
				if toks != w.tokens || hash != w.hashes[l] {
					t.Errorf("tokens %s, logits hash %#016x; want %s, %#016x", toks, hash, w.tokens, w.hashes[l])
				}
			})
		}
	}
	for _, a := range Architectures() {
		if !seen[a] {
			t.Errorf("no golden model of %s", a)
		}
	}
}

// goldenArch returns the recorded outputs of goldenRun by model.
func goldenArch() map[string]goldenOut {
	return map[string]goldenOut{
		"tiny-llama":            {"238 145 238 145 68 238 145 68 348", []uint64{0xa9a42abc5e5ac23a, 0xa9a42abc5e5ac23a, 0xc0182dabffc52da6, 0xc0182dabffc52da6}},
		"tiny-qwen2":            {"36 36 36 36 36 36 36 36 36", []uint64{0x32299d5b190641e2, 0x32299d5b190641e2, 0x48b1aac1d995ab6a, 0x48b1aac1d995ab6a}},
		"tiny-qwen3":            {"36 36 36 36 36 36 36 36 36", []uint64{0x23ffc49b8b871c4e, 0x23ffc49b8b871c4e, 0xae830296a1e8a550, 0xae830296a1e8a550}},
		"tiny-llama3":           {"36 36 36 36 36 36 36 36 36", []uint64{0x28d6d9cadc686b64, 0x28d6d9cadc686b64, 0xde2aa66c71ab07a2, 0xde2aa66c71ab07a2}},
		"tiny-gemma2":           {"108 108 108 108 108 108 108 108 108", []uint64{0xe67182ca86b53d8b, 0xe67182ca86b53d8b, 0x24d76dcd9a974a3e, 0x24d76dcd9a974a3e}},
		"tiny-gemma3":           {"386 386 386 386 386 386 386 386 386", []uint64{0x109e6b73760734a1, 0x109e6b73760734a1, 0xb4d2e7387a4dc9aa, 0xb4d2e7387a4dc9aa}},
		"tiny-phi3":             {"44 264 264 264 264 264 264 264 264", []uint64{0xf51b562e3e153476, 0xf51b562e3e153476, 0x34e3e53cafa4d467, 0x34e3e53cafa4d467}},
		"shape-llama-Q8_0":      {"31 10 13 9 75 75 75 65 53", []uint64{0xc65bc71834539a01, 0xc65bc71834539a01, 0xeb33c759760bb761, 0xeb33c759760bb761}},
		"shape-llama-F16":       {"31 10 13 9 75 75 75 13 26", []uint64{0xc4ccbf63883e7943, 0xc4ccbf63883e7943, 0xfeccbd443f1691cd, 0xfeccbd443f1691cd}},
		"shape-qwen2-Q8_0":      {"41 41 41 41 41 41 41 41 41", []uint64{0x6985d31e3bd8e7ec, 0x6985d31e3bd8e7ec, 0xaf555a61a7d4e423, 0xaf555a61a7d4e423}},
		"shape-qwen2-F16":       {"41 41 41 41 41 41 41 41 41", []uint64{0xedaf259bceeb9b44, 0xedaf259bceeb9b44, 0x891852862544a6aa, 0x891852862544a6aa}},
		"shape-qwen3-Q8_0":      {"75 13 11 53 38 65 50 0 19", []uint64{0x6a109bf9e58401cd, 0x6a109bf9e58401cd, 0x2f20f69b937a7764, 0x2f20f69b937a7764}},
		"shape-qwen3-F16":       {"75 13 11 53 38 65 50 0 19", []uint64{0x27ebcbf68a9b585a, 0x27ebcbf68a9b585a, 0xb4d386a3c06a03a6, 0xb4d386a3c06a03a6}},
		"shape-gemma2-Q8_0":     {"41 41 41 41 41 41 41 41 41", []uint64{0xfd660d0da59522a0, 0xfd660d0da59522a0, 0xb270ebb1ac7ebebe, 0xb270ebb1ac7ebebe}},
		"shape-gemma2-F16":      {"41 41 41 41 41 41 41 41 41", []uint64{0xd0222baadc4d888d, 0xd0222baadc4d888d, 0x83bc1510b67557ef, 0x83bc1510b67557ef}},
		"shape-gemma3-Q8_0":     {"41 41 41 41 41 41 41 41 41", []uint64{0xdf1ea22e02ffa0c1, 0xdf1ea22e02ffa0c1, 0xfaab26d9eea627dd, 0xfaab26d9eea627dd}},
		"shape-gemma3-F16":      {"41 41 41 41 41 41 41 41 41", []uint64{0x3bd135adb36c3106, 0x3bd135adb36c3106, 0x793c843aedea7d2b, 0x793c843aedea7d2b}},
		"shape-phi3-Q8_0":       {"32 54 12 17 45 33 76 6 2", []uint64{0x86d41a640d1d8d64, 0x86d41a640d1d8d64, 0x648ffae867fc49dd, 0x648ffae867fc49dd}},
		"shape-phi3-F16":        {"32 54 12 17 45 33 76 6 2", []uint64{0xae2072e779b7b242, 0xae2072e779b7b242, 0xc4673199d0bb9a80, 0xc4673199d0bb9a80}},
		"shape-gemma2-defaults": {"41 41 41 41 41 41 41 41 41", []uint64{0x57911dca77b6059a, 0x57911dca77b6059a, 0x9f926746c1329541, 0x9f926746c1329541}},
		"stories260K":           {"426 410 452 277 280 303 284 412 354", []uint64{0xba3ffd58626a0eff, 0xba3ffd58626a0eff, 0x7de7fa183b4a8808, 0x7de7fa183b4a8808}},
	}
}

// TestArchSpecs checks the registry: names unique, each found by
// archConventions.
func TestArchSpecs(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range archSpecs() {
		if s.name == "" || seen[s.name] {
			t.Fatalf("architecture %q registered twice or unnamed", s.name)
		}
		seen[s.name] = true
		if got, err := archConventions(s.name); err != nil || got != s {
			t.Fatalf("archConventions(%q) = %+v, %v", s.name, got, err)
		}
	}
}
