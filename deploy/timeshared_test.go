package deploy_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/stream"
)

// countSteps counts a deployment's steps and how many began while another
// was running.
type countSteps struct {
	inside, steps, overlap atomic.Int32
}

func (c *countSteps) engine() *enginetest.Fake {
	f := enginetest.NewFake(1 << 12)
	f.StepHook = func(context.Context, []engine.Input) error {
		if c.inside.Add(1) > 1 {
			c.overlap.Add(1)
		}
		c.steps.Add(1)
		c.inside.Add(-1)
		return nil
	}
	return f
}

// stepLog records the steps observers are told about.
type stepLog struct{ steps atomic.Int32 }

func (l *stepLog) Step(model, batch, appended int, d time.Duration) {
	if d >= 0 {
		l.steps.Add(1)
	}
}
func (l *stepLog) Routed(int, []int) {}

// TestTimeShared runs r2r-random over two models time-shared: no two steps
// overlap, every step is observed, and the output is what the same
// deployment computes with overlapping steps (tokens depend only on the
// sequence and the seeded routing draws).
func TestTimeShared(t *testing.T) {
	run := func(timeShared bool) ([]stream.Result, *countSteps, *stepLog) {
		var c countSteps
		var log stepLog
		d, err := deploy.New(deploy.Config{
			Models:    []deploy.Model{{Name: "slm", Engine: c.engine()}, {Name: "llm", Engine: c.engine()}},
			Algorithm: "r2r-random", Params: map[string]string{"p": "0.4"}, Registry: builtin.Registry(),
			Observer: &log, TimeShared: timeShared,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var streams []*stream.Stream
		for i := range 8 {
			s, err := d.Submit(context.Background(), []int32{1, int32(5 + i)}, route.Params{MaxTokens: 40, IgnoreEOS: true, Seed: uint64(i)})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		var out []stream.Result
		for _, s := range streams {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := s.Wait(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res)
		}
		return out, &c, &log
	}
	shared, c, log := run(true)
	overlapped, _, _ := run(false)
	if c.overlap.Load() != 0 {
		t.Fatalf("%d of %d time-shared steps began while another ran", c.overlap.Load(), c.steps.Load())
	}
	if log.steps.Load() != c.steps.Load() {
		t.Fatalf("observer saw %d steps of %d", log.steps.Load(), c.steps.Load())
	}
	for i := range shared {
		if len(shared[i].Tokens) != 40 || !slices.Equal(shared[i].Tokens, overlapped[i].Tokens) || !slices.Equal(shared[i].By, overlapped[i].By) {
			t.Fatalf("request %d: time-shared %v by %v, overlapping %v by %v", i, shared[i].Tokens, shared[i].By, overlapped[i].Tokens, overlapped[i].By)
		}
	}
}
