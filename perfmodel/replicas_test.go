package perfmodel

import (
	"context"
	"testing"

	"github.com/tokenrouter/tokenrouter/steptime"
)

// TestReplicasStepAndThroughput: a model with r replicas prices a launch
// of b requests as one replica's step of ⌈b/r⌉, and with the small model
// the bottleneck (its steps grow with the batch), more small-model
// replicas predict more throughput at proportional concurrency; replica
// counts are validated.
func TestReplicasStepAndThroughput(t *testing.T) {
	m := R2R(0.1, 0, 0)
	m.L = nil
	m.Steps = []steptime.Curve{steptime.Linear(10, 10, 0), steptime.Constant(20)}
	one := m
	m.Replicas = []int{4, 1}
	for b := 1; b <= 9; b++ {
		if got, want := m.StepMS(0, b, nil), one.StepMS(0, (b+3)/4, nil); got != want {
			t.Fatalf("step of %d on 4 replicas: %v ms, want one replica's step of %d, %v ms", b, got, (b+3)/4, want)
		}
	}
	pl := NewPlanner(Options{})
	var last float64
	for _, r := range []int{1, 2, 4} {
		mr := one
		mr.Replicas = []int{r, 1}
		res, err := pl.Optimize(context.Background(), mr, 4*r, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d small-model replicas, N=%d: %.1f tokens/s", r, 4*r, res.TokensPerSecond)
		if res.TokensPerSecond <= last {
			t.Fatalf("%d replicas: %.1f tokens/s, not above %.1f with fewer", r, res.TokensPerSecond, last)
		}
		last = res.TokensPerSecond
	}
	bad := one
	bad.Replicas = []int{1}
	if err := bad.Validate(); err == nil {
		t.Fatal("replicas for one model of two: no error")
	}
}
