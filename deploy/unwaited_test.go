package deploy

import (
	"context"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/deploy/timeshare"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

type lastStep struct{ d time.Duration }

func (l *lastStep) Step(_, _, _ int, d time.Duration) { l.d = d }
func (l *lastStep) Routed(int, []int)                 {}

// TestUnwaited checks that observers of a time-shared deployment see a
// step's time without its wait for the gate.
func TestUnwaited(t *testing.T) {
	ms := timeShare([]Model{{Name: "a", Engine: enginetest.NewFake(64)}, {Name: "b", Engine: enginetest.NewFake(64)}})
	gated := ms[0].Engine.(timeshare.Engine)
	// Hold the gate with model 1's engine inside a step.
	hold, inside := make(chan struct{}), make(chan struct{}, 1)
	f1 := ms[1].Engine.(timeshare.Engine).Unwrap().(*enginetest.Fake)
	f1.StepHook = func(context.Context, []engine.Input) error {
		inside <- struct{}{}
		<-hold
		return nil
	}
	out := make([]engine.Output, 1)
	done := make(chan error, 2)
	go func() {
		done <- ms[1].Engine.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{1}}}, out)
	}()
	testkit.Receive(t, inside, 5*time.Second)
	go func() {
		done <- gated.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: []int32{1}}}, make([]engine.Output, 1))
	}()
	time.AfterFunc(20*time.Millisecond, func() { close(hold) })
	for range 2 {
		if err := testkit.Receive(t, done, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	w := gated.Waited()
	if w <= 0 {
		t.Fatalf("model 0 waited %v", w)
	}
	var l lastStep
	unwaited{&l, ms}.Step(0, 1, 1, w+3*time.Millisecond)
	if l.d != 3*time.Millisecond {
		t.Fatalf("observer saw %v, want the 3 ms the step itself took", l.d)
	}
}
