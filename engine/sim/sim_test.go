package sim

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// TestStepNeverShorterThanProfile checks the floor of the step time: on
// average a step lasts at least its profile's latency (paying back
// earlier overshoot may shorten one step by at most a tenth). A loaded
// machine only makes steps longer, so this cannot fail because of load;
// BenchmarkStepLatency reports the accuracy.
func TestStepNeverShorterThanProfile(t *testing.T) {
	e := New(Config{Profile: Profile{Curve: steptime.Constant(2)}})
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
	e := New(Config{Profile: Profile{Curve: steptime.Constant(6)}})
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
	if q.Name != p.Name || !slices.Equal(q.Models, p.Models) || !reflect.DeepEqual(q.Profiles, p.Profiles) || q.Source != path {
		t.Fatalf("round trip %+v -> %+v", p, q)
	}
	for _, bad := range []string{`{}`, `{"models":[{"name":"a","base_ms":-1}]}`, `nope`,
		`{"models":[{"name":"a","curve":{"knots":[]}}]}`,
		`{"models":[{"name":"a","base_ms":1,"curve":{"knots":[{"rows":1,"ms":2}]}}]}`,
		`{"placement":"sideways","models":[{"name":"a","base_ms":1}]}`,
		`{"models":[{"name":"a","base_ms":1,"interference":-1}]}`} {
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

// TestLegacyProfileFile reads a profile file in the older linear form.
func TestLegacyProfileFile(t *testing.T) {
	var p Preset
	if err := json.Unmarshal([]byte(`{"name":"x","models":[{"name":"a","base_ms":2,"per_seq_ms":0.5,"per_token_ms":0.1}]}`), &p); err != nil {
		t.Fatal(err)
	}
	// 4 sequences appending 10 tokens: 2 + 0.5·4 + 0.1·6 ms.
	if got := p.Profiles[0].Latency(4, 10, 0); got != 4600*time.Microsecond {
		t.Fatalf("latency %v", got)
	}
}

// TestStepFollowsTheCurve steps a batch-dependent profile with context
// and interference: the step lasts at least the curve's time at the
// batch's size, rows and row-weighted context held before it, with the
// interference folded in.
func TestStepFollowsTheCurve(t *testing.T) {
	c := steptime.Curve{Knots: []steptime.Knot{{Rows: 1, MS: 1}, {Rows: 8, MS: 4.5}}, PerSeqMS: 0.25, PerRowContextMS: 0.01}
	e := New(Config{Profile: Profile{Curve: c, Interference: 1.5}})
	ctx := context.Background()
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(3 + i)
	}
	out := make([]engine.Output, 2)
	if err := e.Step(ctx, []engine.Input{{Seq: 1, Tokens: prompt}, {Seq: 2, Tokens: prompt[:20]}}, out); err != nil {
		t.Fatal(err)
	}
	// Sequences hold 40 and 20 tokens and append 3 and 1: 4 rows over a
	// context of (3·40 + 1·20)/4 = 35 per row.
	in := []engine.Input{{Seq: 1, Tokens: []int32{5, 6, 7}}, {Seq: 2, Tokens: []int32{8}}}
	want := time.Duration(1.5 * (c.Rows(4) + 2*0.25 + 0.01*4*35) * float64(time.Millisecond))
	t0 := time.Now()
	if err := e.Step(ctx, in, out); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < want*9/10 {
		t.Fatalf("step took %v, the curve says %v", d, want)
	}
	if got := e.Profile().Latency(2, 4, 35); got-want > time.Microsecond || want-got > time.Microsecond {
		t.Fatalf("profile latency %v, want %v", got, want)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestAgree: with Agree a, the small model's token at a position equals
// the large model's (AgreeSeed) with probability a, decided per position,
// greedy and seeded-sampled alike; the rest agree only by chance.
func TestAgree(t *testing.T) {
	const n = 4000
	for _, a := range []float64{0, 0.25, 0.5, 0.9} {
		for _, sp := range []engine.Sampling{{}, {Temperature: 0.8, Seed: 5}} {
			small := New(Config{Seed: 1, Agree: a, AgreeSeed: 2, VocabSize: 512})
			large := New(Config{Seed: 2, VocabSize: 512})
			same := 0
			outS, outL := make([]engine.Output, 1), make([]engine.Output, 1)
			tok := int32(3)
			for i := range n {
				in := []engine.Input{{Seq: 1, Tokens: []int32{tok}, Sampling: sp}}
				if err := small.Step(context.Background(), in, outS); err != nil {
					t.Fatal(err)
				}
				if err := large.Step(context.Background(), in, outL); err != nil {
					t.Fatal(err)
				}
				if outS[0].Token == outL[0].Token {
					same++
				}
				tok = int32(3 + i%500) // the next position's prefix
			}
			got := float64(same) / n
			want := a + (1-a)/509 // chance agreement over 509 drawable tokens
			if tol := 4*math.Sqrt(want*(1-want)/n) + 0.002; math.Abs(got-want) > tol {
				t.Errorf("agree %g, sampling %+v: tokens equal at %.3f of positions, want %.3f ± %.3f", a, sp, got, want, tol)
			}
		}
	}
}
