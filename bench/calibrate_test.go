package bench

import (
	"context"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine/sim"
)

func TestFitProfileRecoversCoefficients(t *testing.T) {
	want := sim.Profile{Base: 2 * time.Millisecond, PerSeq: 300 * time.Microsecond, PerToken: 40 * time.Microsecond}
	var ms []Measurement
	for _, b := range []int{1, 2, 4, 8} {
		ms = append(ms, Measurement{Batch: b, Tokens: b, Latency: want.Latency(b, b)})
	}
	for _, n := range []int{16, 64} {
		ms = append(ms, Measurement{Batch: 1, Tokens: n, Latency: want.Latency(1, n)})
	}
	got, err := FitProfile(ms)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b time.Duration) bool { return a-b < time.Microsecond && b-a < time.Microsecond }
	if !near(got.Base, want.Base) || !near(got.PerSeq, want.PerSeq) || !near(got.PerToken, want.PerToken) {
		t.Fatalf("fit %+v, want %+v", got, want)
	}
	if _, err := FitProfile(ms[:2]); err == nil {
		t.Fatal("fit from two points accepted")
	}
}

// TestCalibrateSimulatedModel calibrates a simulated engine whose profile
// is known: every point is measured, none faster than the profile allows
// (a loaded machine only makes steps longer), and the fit reproduces the
// measurements it was made from.
func TestCalibrateSimulatedModel(t *testing.T) {
	want := sim.Profile{Base: 3 * time.Millisecond, PerSeq: 200 * time.Microsecond, PerToken: 20 * time.Microsecond}
	e := sim.New(sim.Config{Profile: want})
	got, ms, err := Calibrate(context.Background(), e, CalibrateOptions{Batches: []int{1, 4, 8}, Extends: []int{16, 64}, Repeats: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 5 {
		t.Fatalf("%d measurements", len(ms))
	}
	for _, m := range ms {
		if floor := want.Latency(m.Batch, m.Tokens) * 9 / 10; m.Latency < floor {
			t.Fatalf("point %+v faster than the profile allows (%v)", m, floor)
		}
	}
	refit, err := FitProfile(ms)
	if err != nil || refit != got {
		t.Fatalf("fit %+v, refit %+v (%v)", got, refit, err)
	}
}
