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

// TestStepNeverShorterThanProfile checks the floor of the step time: on
// average a step lasts at least its profile's latency (paying back
// earlier overshoot may shorten one step by at most a tenth). A loaded
// machine only makes steps longer, so this cannot fail because of load;
// BenchmarkStepLatency reports the accuracy.
func TestStepNeverShorterThanProfile(t *testing.T) {
	e := New(Config{Profile: Profile{Base: 2 * time.Millisecond}})
	out := make([]engine.Output, 1)
	const n = 50
	t0 := time.Now()
	for i := range n {
		if err := e.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{int32(i + 3)}}}, out); err != nil {
			t.Fatal(err)
		}
	}
	if mean := time.Since(t0) / n; mean < 1980*time.Microsecond {
		t.Fatalf("mean step %v for a 2ms profile", mean)
	}
}

// BenchmarkStepLatency measures how close simulated steps come to a 6.0 ms
// profile (the paper's small model): the mean step and its error in
// percent.
func BenchmarkStepLatency(b *testing.B) {
	e := New(Config{Profile: Profile{Base: 6 * time.Millisecond}})
	out := make([]engine.Output, 1)
	in := []engine.Input{{Seq: 1, Tokens: []int32{5}}}
	b.ResetTimer()
	for i := range b.N {
		in[0].Tokens[0] = int32(3 + i%500)
		if err := e.Step(context.Background(), in, out); err != nil {
			b.Fatal(err)
		}
	}
	mean := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(mean)/1e6, "ms/step")
	b.ReportMetric(100*(float64(mean)-6e6)/6e6, "%error")
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
	if step(a, x) != step(b, x) {
		t.Fatal("truncate then extend differs from never having extended")
	}
	if err := a.Truncate(1, 99); err == nil {
		t.Fatal("truncate beyond length accepted")
	}
	if err := a.Step(context.Background(), []engine.Input{{Seq: 2}}, out); err == nil {
		t.Fatal("empty input accepted")
	}
}
