package sim

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
)

func TestStepLatencyAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	e := New(Config{Profile: Profile{Base: 6 * time.Millisecond}})
	out := make([]engine.Output, 1)
	const n = 100
	var total time.Duration
	for i := range n {
		t0 := time.Now()
		if err := e.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{int32(i + 3)}}}, out); err != nil {
			t.Fatal(err)
		}
		total += time.Since(t0)
	}
	mean := total / n
	t.Logf("mean step %v for a 6ms profile", mean)
	if mean < 6*time.Millisecond || mean > 6060*time.Microsecond {
		t.Fatalf("mean step %v, want 6ms ±1%%", mean)
	}
}

func TestPresetFileRoundTrip(t *testing.T) {
	p, err := LookupPreset("paper-r2r-batched")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/p.json"
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := LoadPreset(path)
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != p.Name || !slices.Equal(q.Models, p.Models) || !slices.Equal(q.Profiles, p.Profiles) {
		t.Fatalf("round trip %+v -> %+v", p, q)
	}
	for _, bad := range []string{`{}`, `{"models":[{"name":"a","base_ms":-1}]}`, `nope`} {
		var x Preset
		if err := json.Unmarshal([]byte(bad), &x); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := LoadPreset("no-such-profile"); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func TestTokensAreDeterministicAndTruncatable(t *testing.T) {
	a, b := New(Config{Seed: 5}), New(Config{Seed: 5})
	out := make([]engine.Output, 1)
	step := func(e *Engine, toks ...int32) int32 {
		if err := e.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: toks}}, out); err != nil {
			t.Fatal(err)
		}
		return out[0].Token
	}
	x := step(a, 1, 2, 3)
	if y := step(b, 1, 2, 3); x != y {
		t.Fatal("same seed, same prefix, different token")
	}
	step(a, x)
	if err := a.Truncate(1, 3); err != nil {
		t.Fatal(err)
	}
	if a.Len(1) != 3 || step(a, x) != step(b, x) {
		t.Fatal("truncate then extend differs from never having extended")
	}
	if err := a.Truncate(1, 99); err == nil {
		t.Fatal("truncate beyond length accepted")
	}
	if err := a.Step(context.Background(), []engine.Input{{Seq: 2}}, out); err == nil {
		t.Fatal("empty input accepted")
	}
}
