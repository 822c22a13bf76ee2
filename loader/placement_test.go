package loader

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

func tinyPair(t *testing.T) []config.Model {
	dir := testmodels.Dir(t)
	return []config.Model{
		{Name: "slm", Engine: KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: filepath.Join(dir, "tok512.bin")},
		{Name: "llm", Engine: KindCPU, Path: filepath.Join(dir, "stories260K.gguf")},
	}
}

func TestPlaceGiven(t *testing.T) {
	ms := append(tinyPair(t), config.Model{Name: "sim", Engine: KindSim, Profile: "paper-r2r/slm"})
	ms[1].Threads = 3
	ctx := context.Background()
	p, err := Builtin().Place(ctx, ms, config.Partitioned, PlaceOptions{Cores: 4})
	if err != nil || p.TimeShared() || p.Models[0].Threads != 2 || p.Models[1].Threads != 3 || p.Models[2].Threads != 0 || p.Reason != "" {
		t.Fatalf("partitioned: %+v, %v", p, err)
	}
	if ms[0].Threads != 0 {
		t.Fatal("Place changed its argument")
	}
	p, err = Builtin().Place(ctx, ms, config.TimeShared, PlaceOptions{Cores: 4})
	if err != nil || !p.TimeShared() || p.Models[0].Threads != 4 || p.Models[1].Threads != 3 {
		t.Fatalf("time-shared: %+v, %v", p, err)
	}
	ms[0].CPUs = []int{0, 1, 2}
	if p, _ = Builtin().Place(ctx, ms, config.Partitioned, PlaceOptions{Cores: 4}); p.Models[0].Threads != 3 {
		t.Fatalf("three CPUs: %d threads", p.Models[0].Threads)
	}
	if _, err := Builtin().Place(ctx, ms, "spread", PlaceOptions{}); err == nil {
		t.Fatal("placement spread accepted")
	}
	p, err = Builtin().Place(ctx, ms[2:], config.PlacementAuto, PlaceOptions{})
	if err != nil || p.Placement != config.Partitioned || p.Measurement != nil || !strings.Contains(p.Reason, "no model computes") {
		t.Fatalf("auto over a simulated model: %+v, %v", p, err)
	}
}

// TestPlaceAuto measures the real tiny pair both ways and lets the rule
// (the default, then a hook) choose.
func TestPlaceAuto(t *testing.T) {
	ms := tinyPair(t)
	ctx := context.Background()
	timing := StepTiming{Batch: 2, Steps: 2, PromptLen: 4, Rounds: 3}
	p, err := Builtin().Place(ctx, ms, config.PlacementAuto, PlaceOptions{Cores: 2, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	m := p.Measurement
	if m == nil || len(m.Alone) != 2 || len(m.Together) != 2 || m.Batch != 2 || m.Models[1] != "llm" || m.Rounds != 3 {
		t.Fatalf("measurement %+v", m)
	}
	for i := range m.Alone {
		if m.Alone[i] <= 0 || m.Together[i] <= 0 {
			t.Fatalf("measurement %+v", m)
		}
	}
	want, why := QuickRule(*m)
	if p.Placement != want || p.Reason != why || !strings.Contains(why, "at batch 2") {
		t.Fatalf("placed %s (%s); the rule says %s (%s)", p.Placement, p.Reason, want, why)
	}
	var seen PlacementMeasurement
	p, err = Builtin().Place(ctx, ms, config.PlacementAuto, PlaceOptions{Cores: 2, Timing: timing,
		Choose: func(m PlacementMeasurement) (config.Placement, string) {
			seen = m
			return config.TimeShared, "predicted"
		}})
	if err != nil || p.Placement != config.TimeShared || p.Reason != "predicted" || p.Models[0].Threads != 2 || len(seen.Alone) != 2 {
		t.Fatalf("hook: %+v, %v", p, err)
	}
	_, err = Builtin().Place(ctx, ms, config.PlacementAuto, PlaceOptions{Timing: timing,
		Choose: func(PlacementMeasurement) (config.Placement, string) { return config.PlacementAuto, "" }})
	if err == nil || !strings.Contains(err.Error(), `the rule chose "auto"`) {
		t.Fatalf("a rule that does not decide: %v", err)
	}
}

func TestMedians(t *testing.T) {
	ms := time.Millisecond
	got := medians([][]time.Duration{{1 * ms, 9 * ms}, {48 * ms, 8 * ms}, {2 * ms, 7 * ms}})
	if len(got) != 2 || got[0] != 2*ms || got[1] != 8*ms {
		t.Fatalf("medians %v, want [2ms 8ms]", got)
	}
}

func TestQuickRule(t *testing.T) {
	ms := time.Millisecond
	if p, _ := QuickRule(PlacementMeasurement{Alone: []time.Duration{2 * ms, 5 * ms}, Together: []time.Duration{4 * ms, 8 * ms}}); p != config.TimeShared {
		t.Fatalf("7 ms in turn against 8 ms at once: %s", p)
	}
	if p, _ := QuickRule(PlacementMeasurement{Alone: []time.Duration{3 * ms, 5 * ms}, Together: []time.Duration{4 * ms, 8 * ms}}); p != config.Partitioned {
		t.Fatalf("a tie: %s", p)
	}
}

// TestTimeStepsTogether steps the pair at once past the short context of
// a model (it is cut back), pinning through the hook.
func TestTimeStepsTogether(t *testing.T) {
	ms := tinyPair(t)
	ms[0].ContextLength, ms[1].ContextLength = 8, 8
	var mu sync.Mutex
	pinned, undone := map[int]bool{}, 0
	ds, err := Builtin().TimeSteps(context.Background(), ms, true, StepTiming{Batch: 3, PromptLen: 4, Steps: 6,
		Pin: func(i int) (func(), error) {
			mu.Lock()
			defer mu.Unlock()
			pinned[i] = true
			return func() { mu.Lock(); undone++; mu.Unlock() }, nil
		}})
	if err != nil || len(ds) != 2 || ds[0] <= 0 || ds[1] <= 0 {
		t.Fatalf("%v, %v", ds, err)
	}
	if !pinned[0] || !pinned[1] || undone != 2 {
		t.Fatalf("pinned %v, undone %d", pinned, undone)
	}
	ms[1].ContextLength = 4
	if _, err := Builtin().TimeSteps(context.Background(), ms, true, StepTiming{PromptLen: 4}); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("a context too short: %v", err)
	}
}

func TestCPUs(t *testing.T) {
	m := tinyPair(t)[1]
	m.CPUs = []int{0}
	if err := Builtin().Check(m); (err == nil) != (runtime.GOOS == "linux") {
		t.Fatalf("cpus on %s: %v", runtime.GOOS, err)
	}
	if runtime.GOOS == "linux" {
		e, err := Builtin().OpenEngine(context.Background(), m)
		if err != nil {
			t.Fatalf("open pinned to CPU 0: %v", err)
		}
		_ = e.Close()
		m.CPUs = []int{1 << 20}
		if e, err := Builtin().OpenEngine(context.Background(), m); err == nil {
			_ = e.Close()
			t.Fatal("a CPU the machine does not have was accepted")
		}
	}
	m.CPUs = []int{-1}
	if err := Builtin().Check(m); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("cpus -1: %v", err)
	}
	s := config.Model{Name: "s", Engine: KindSim, Profile: "paper-r2r/slm", CPUs: []int{0}}
	if err := Builtin().Check(s); err == nil || !strings.Contains(err.Error(), "not to sim") {
		t.Fatalf("cpus on sim: %v", err)
	}
}

func TestSharedVocabulary(t *testing.T) {
	ctx := context.Background()
	v, err := Builtin().SharedVocabulary(ctx, tinyPair(t))
	if err != nil || v.Size != 512 || v.Tokenizer == nil || v.BOS != 1 || v.ContextLength <= 0 {
		t.Fatalf("tiny pair: %+v, %v", v, err)
	}
	sim := config.Model{Name: "s", Engine: KindSim, Profile: "paper-r2r/slm", VocabSize: 600}
	if _, err := Builtin().SharedVocabulary(ctx, append(tinyPair(t), sim)); err == nil || !strings.Contains(err.Error(), "512 and 600 tokens") {
		t.Fatalf("sizes differ: %v", err)
	}
	v, err = Builtin().SharedVocabulary(ctx, []config.Model{sim, sim})
	if err != nil || v.Tokenizer != nil || v.Size != 600 {
		t.Fatalf("simulated: %+v, %v", v, err)
	}
}

// TestDifferentTokenTexts changes one token's text in a copy of the
// tokenizer file: the sizes agree, the texts do not.
func TestDifferentTokenTexts(t *testing.T) {
	ms := tinyPair(t)
	b, err := os.ReadFile(ms[0].Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x20 // the last token's last letter changes case
	ms[0].Tokenizer = filepath.Join(t.TempDir(), "tok.bin")
	if err := os.WriteFile(ms[0].Tokenizer, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Builtin().SharedVocabulary(context.Background(), ms); err == nil || !strings.Contains(err.Error(), "token 511 is") {
		t.Fatalf("%v", err)
	}
}
