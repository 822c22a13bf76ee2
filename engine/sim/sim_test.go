package sim

import (
	"context"
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
