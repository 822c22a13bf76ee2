package r2r_test

import (
	"context"
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/r2r"
)

// step runs one sim step over n requests with hidden states and logits.
func step(t *testing.T, n int) *route.Step {
	t.Helper()
	e := sim.New(sim.Config{Seed: 3, VocabSize: 512})
	in := make([]engine.Input, n)
	reqs := make([]*route.Request, n)
	for i := range in {
		in[i] = engine.Input{Seq: engine.SeqID(i + 1), Tokens: []int32{1, int32(10 + i)}, Want: engine.WantHidden | engine.WantLogits}
		reqs[i] = &route.Request{ID: uint64(i + 1), Tokens: in[i].Tokens, PromptLen: 2, Committed: 2}
	}
	out := make([]engine.Output, n)
	if err := e.Step(context.Background(), in, out); err != nil {
		t.Fatal(err)
	}
	return &route.Step{Model: 0, Requests: reqs, Outputs: out, Embed: e}
}

// decisions returns the default decisions of a step.
func decisions(s *route.Step) []route.Decision {
	d := make([]route.Decision, len(s.Outputs))
	for i := range d {
		d[i] = route.Decision{Next: 0, Cut: -1, Token: s.Outputs[i].Token, Commit: true}
	}
	return d
}

func decide(t *testing.T, path, thr string, s *route.Step) []route.Decision {
	t.Helper()
	a, err := r2r.New(route.Spec{Model: 0, Models: []string{"s", "l"}, Params: map[string]string{"weights": path, "threshold": thr}})
	if err != nil {
		t.Fatal(err)
	}
	d := decisions(s)
	a.Route(s, d)
	return d
}

func TestRouterBatchedThresholdAndWeights(t *testing.T) {
	w, err := routetest.WriteWeights(t.TempDir(), 64, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := step(t, 16)
	mid := decide(t, w["r2r"], "0.5", s)
	routed := 0
	for i, d := range mid {
		// The batch decides exactly as each request alone.
		one := decide(t, w["r2r"], "0.5", &route.Step{Requests: s.Requests[i : i+1], Outputs: s.Outputs[i : i+1], Embed: s.Embed})
		if one[0] != d {
			t.Fatalf("request %d: batched %+v, alone %+v", i, d, one[0])
		}
		if d.Next == 1 {
			routed++
			if d.Token != route.NoToken {
				t.Fatalf("routed token kept: %+v", d)
			}
		}
	}
	if routed == 0 || routed == 16 {
		t.Fatalf("random router at threshold 0.5 routed %d of 16", routed)
	}
	for thr, want := range map[string]int{"0": 16, "1.01": 0} {
		n := 0
		for _, d := range decide(t, w["r2r"], thr, s) {
			n += d.Next
		}
		if n != want {
			t.Fatalf("threshold %s: routed %d, want %d", thr, n, want)
		}
	}
	// A missing hidden state defers (the router cannot read the step).
	s.Outputs[0].Hidden = nil
	if d := decide(t, w["r2r"], "1.01", s); d[0].Next != 1 || d[1].Next != 0 {
		t.Fatalf("missing hidden state: %+v", d[:2])
	}
	// The large model always hands back and keeps its token.
	a, err := r2r.New(route.Spec{Model: 1, Models: []string{"s", "l"}, Params: map[string]string{"weights": w["r2r"]}})
	if err != nil {
		t.Fatal(err)
	}
	d := []route.Decision{{Next: 1, Cut: -1, Token: 5, Commit: true}}
	a.Route(&route.Step{Model: 1, Requests: []*route.Request{{}}, Outputs: []engine.Output{{Token: 5}}}, d)
	if d[0].Next != 0 || d[0].Token != 5 {
		t.Fatalf("large model: %+v", d[0])
	}
}

// TestRouteAllocationFree: once its buffers have grown, Route allocates
// nothing.
func TestRouteAllocationFree(t *testing.T) {
	w, err := routetest.WriteWeights(t.TempDir(), 64, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r2r.New(route.Spec{Model: 0, Models: []string{"s", "l"}, Params: map[string]string{"weights": w["r2r"]}})
	if err != nil {
		t.Fatal(err)
	}
	s := step(t, 8)
	d := decisions(s)
	a.Route(s, d)
	if n := testing.AllocsPerRun(20, func() { a.Route(s, d) }); n != 0 {
		t.Fatalf("Route allocates %v times per step", n)
	}
}
