package loader

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/steptime"
)

func TestCheck(t *testing.T) {
	ks := Builtin()
	for _, c := range []struct {
		m    config.Model
		want string
	}{
		{config.Model{Name: "a", Engine: "gpu"}, `engine "gpu": want sim or cpu`},
		{config.Model{Name: "a", Engine: KindSim}, "needs profile"},
		{config.Model{Name: "a", Engine: KindSim, Profile: "nope/a"}, "unknown profile"},
		{config.Model{Name: "a", Engine: KindSim, Profile: "paper-r2r"}, "preset paper-r2r has models slm, llm"},
		{config.Model{Name: "a", Engine: KindSim, Profile: "paper-r2r/slm", VocabSize: 100}, "vocab_size 100"},
		{config.Model{Name: "a", Engine: KindSim, Profile: "paper-r2r/slm", Latency: &config.Latency{}}, "not both"},
		{config.Model{Name: "a", Engine: KindSim, Latency: &config.Latency{Base: -1}}, "negative"},
		{config.Model{Name: "a", Engine: KindCPU}, "needs path"},
		{config.Model{Name: "a", Engine: KindCPU, Path: "x", Profile: "paper-r2r/slm"}, "sim only"},
		{config.Model{Name: "a", Engine: KindCPU, Path: "x", NoSpin: true}, "no_spin apply to engine sim only"},
		{config.Model{Name: "a", Engine: KindCPU, Path: "x", Threads: -1}, "must not be negative"},
	} {
		err := ks.Check(c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.m, err, c.want)
		}
	}
	d := config.Default()
	if err := ks.CheckAll(&d); err != nil {
		t.Fatal(err)
	}
}

func TestSimProfile(t *testing.T) {
	p, err := SimProfile(config.Model{Name: "llm", Profile: "paper-r2r"})
	if err != nil || p.Latency(4, 4, 0) != 27900*time.Microsecond {
		t.Fatalf("bare preset: %v %v", p, err)
	}
	p, err = SimProfile(config.Model{Name: "x", Profile: "paper-r2r-batched/slm"})
	if err != nil || p.Latency(2, 2, 0)-p.Latency(1, 1, 0) != 50*time.Microsecond {
		t.Fatalf("preset/model: %v %v", p, err)
	}
	// An explicit curve, and the linear form.
	c := steptime.Curve{Knots: []steptime.Knot{{Rows: 1, MS: 2}, {Rows: 8, MS: 9}}}
	p, err = SimProfile(config.Model{Name: "x", Latency: &config.Latency{Curve: &c, Interference: 1.5}})
	if err != nil || p.Latency(8, 8, 0) != 13500*time.Microsecond {
		t.Fatalf("curve: %v %v", p, err)
	}
	p, err = SimProfile(config.Model{Name: "x", Latency: &config.Latency{Base: time.Millisecond, PerSeq: 100 * time.Microsecond, PerToken: 10 * time.Microsecond}})
	if err != nil || p.Latency(2, 5, 0) != 1230*time.Microsecond {
		t.Fatalf("linear: %v %v", p, err)
	}
	if _, err := SimProfile(config.Model{Name: "x", Latency: &config.Latency{Base: time.Millisecond, Curve: &c}}); err == nil {
		t.Fatal("curve and base accepted together")
	}
}

func TestOpenSim(t *testing.T) {
	m, err := Builtin().Open(context.Background(), config.Model{Name: "slm", Engine: KindSim, Profile: "paper-r2r/slm", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Engine.Close()
	if in := m.Engine.Info(); !in.Simulated || in.Name != "slm" || m.Tokenizer != nil || Builtin().StepLatency(config.Model{Name: "slm", Engine: KindSim, Profile: "paper-r2r/slm"}) != 6*time.Millisecond {
		t.Fatalf("info %+v, text %+v", in, m.Text)
	}
}

// TestOpenCPU opens the real test models: a GGUF file with its own
// tokenizer and a llama2.c checkpoint with a tokenizer file, and checks
// that a text side opened for a remote engine refuses a vocabulary that
// does not fit.
func TestOpenCPU(t *testing.T) {
	dir := testmodels.Dir(t)
	ks := Builtin()
	ctx := context.Background()
	g, err := ks.Open(ctx, config.Model{Name: "g", Engine: KindCPU, Path: filepath.Join(dir, "stories260K.gguf"), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Engine.Close()
	if g.Tokenizer == nil || g.Tokenizer.VocabSize() != 512 || g.Engine.Info().VocabSize != 512 || ks.StepLatency(config.Model{Name: "g", Engine: KindCPU, Path: "g.gguf"}) != 0 {
		t.Fatalf("gguf: %+v %+v", g.Engine.Info(), g.Text)
	}
	ckpt := config.Model{Name: "b", Engine: KindCPU, Path: filepath.Join(dir, "stories260K.bin"), Threads: 1}
	if _, err := ks.Open(ctx, ckpt); err == nil || !strings.Contains(err.Error(), "needs tokenizer") {
		t.Fatalf("checkpoint without a tokenizer: %v", err)
	}
	ckpt.Tokenizer = filepath.Join(dir, "tok512.bin")
	b, err := ks.Open(ctx, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Engine.Close()
	if ids := b.Tokenizer.Encode("Once upon a time", false); len(ids) == 0 || ids[0] != 403 {
		t.Fatalf("tok512 encodes %v", ids)
	}
	if _, err := ks.OpenText(config.Model{Name: "g", Engine: KindCPU, Path: filepath.Join(dir, "stories260K.gguf")}, 1000); err == nil ||
		!strings.Contains(err.Error(), "512 tokens but the model has 1000") {
		t.Fatalf("vocabulary mismatch: %v", err)
	}
}

// TestWithKVArena opens a cpu engine through Kinds.WithKVArena: its KV
// cache takes its memory from the arena, which holds it for the next
// engine after Close; the sim kind is untouched.
func TestWithKVArena(t *testing.T) {
	a := cpu.NewArena()
	ks := Builtin().WithKVArena(a)
	if got, want := ks.Names(), Builtin().Names(); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	m := config.Model{Name: "m", Engine: KindCPU, Path: filepath.Join(testmodels.Dir(t), "stories260K.bin")}
	e, err := ks.OpenEngine(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{1, 2, 3}}}, make([]engine.Output, 1)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if a.Held() == 0 {
		t.Fatal("the engine's KV cache did not take its memory from the arena")
	}
	// kv_reserve_mb reaches the engine: the arena is topped up to it.
	m.KVReserveMB = 40
	if e, err = ks.OpenEngine(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	if a.Held() < 40<<20 {
		t.Fatalf("kv_reserve_mb 40: the arena holds %d bytes", a.Held())
	}
	m.KVReserveMB = -1
	if _, err := ks.OpenEngine(context.Background(), m); err == nil || !strings.Contains(err.Error(), "kv_reserve_mb") {
		t.Fatalf("kv_reserve_mb -1: %v", err)
	}
}

// TestOpenEmbedded opens the pair built into the binary (config.Tiny's
// models, embedded: paths) and the same files from disk: the same facts,
// vocabulary hash and text side, and the greedy tokens SOURCES.md lists.
// An embedded name that is not built in is refused before anything opens.
func TestOpenEmbedded(t *testing.T) {
	dir := testmodels.Dir(t)
	ks := Builtin()
	ctx := context.Background()
	want := [][]int32{
		{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322},
		{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 269},
	}
	tiny := config.Tiny()
	for i, m := range tiny.Models {
		m.Threads = 1
		emb, err := ks.Open(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		defer emb.Engine.Close()
		onDisk := m
		name, _ := config.Embedded(m.Path)
		onDisk.Path, onDisk.Tokenizer = filepath.Join(dir, name), filepath.Join(dir, "tok512.bin")
		file, err := ks.Open(ctx, onDisk)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Engine.Close()
		ei, fi := emb.Engine.Info(), file.Engine.Info()
		ei.Kernels, fi.Kernels = nil, nil // the kernel plan: measured, not read from the file
		if !reflect.DeepEqual(ei, fi) || ei.VocabHash == "" || ei.VocabSize != 512 || emb.Tokenizer.Token(403) != file.Tokenizer.Token(403) ||
			emb.Template.Name() != file.Template.Name() {
			t.Fatalf("%s: embedded %+v, file %+v", m.Name, ei, fi)
		}
		for j, e := range []engine.Engine{emb.Engine, file.Engine} {
			if got := greedy(t, e, len(want[i])); !slices.Equal(got, want[i]) {
				t.Errorf("%s (embedded %v): greedy %v, want %v", m.Name, j == 0, got, want[i])
			}
		}
	}
	for _, m := range []config.Model{
		{Name: "x", Engine: KindCPU, Path: config.EmbeddedPrefix + "nope.gguf"},
		{Name: "x", Engine: KindCPU, Path: tiny.Models[0].Path, Tokenizer: config.EmbeddedPrefix + "tok32000.bin"},
	} {
		if _, err := ks.Open(ctx, m); err == nil || !strings.Contains(err.Error(), "no such embedded file (have stories260K.bin, llama2xs-model.bin, tok512.bin)") {
			t.Errorf("%+v: %v", m, err)
		}
	}
}

// greedy decodes n tokens from BOS (token 1) at temperature 0.
func greedy(t *testing.T, e engine.Engine, n int) []int32 {
	t.Helper()
	out := make([]engine.Output, 1)
	tok := int32(1)
	var ids []int32
	for range n {
		if err := e.Step(context.Background(), []engine.Input{{Seq: 7, Tokens: []int32{tok}}}, out); err != nil {
			t.Fatal(err)
		}
		tok = out[0].Token
		ids = append(ids, tok)
	}
	return ids
}
