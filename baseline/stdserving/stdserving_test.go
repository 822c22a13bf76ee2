package stdserving_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/tokenrouter/tokenrouter/baseline/stdserving"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/stream"
)

// watch is an engine that counts the steps that append several tokens to
// a sequence it already holds (resuming from kept KV).
type watch struct {
	engine.Engine
	mu      sync.Mutex
	held    map[engine.SeqID]int
	resumed int
}

func (w *watch) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	w.mu.Lock()
	for _, x := range in {
		if w.held[x.Seq] > 0 && len(x.Tokens) > 1 {
			w.resumed++
		}
		w.held[x.Seq] += len(x.Tokens)
	}
	w.mu.Unlock()
	return w.Engine.Step(ctx, in, out)
}

func (w *watch) Truncate(seq engine.SeqID, n int) error {
	w.mu.Lock()
	w.held[seq] = min(w.held[seq], n)
	w.mu.Unlock()
	return w.Engine.Truncate(seq, n)
}

func (w *watch) Release(seq engine.SeqID) {
	w.mu.Lock()
	delete(w.held, seq)
	w.mu.Unlock()
	w.Engine.Release(seq)
}

// serve runs r2r-random (p = 0.4) over two watched sim models with reg and
// returns the outputs and how often a model resumed a sequence it held.
func serve(t *testing.T, reg *route.Registry) ([]stream.Result, int) {
	t.Helper()
	ws := []*watch{
		{Engine: sim.New(sim.Config{Seed: 1}), held: map[engine.SeqID]int{}},
		{Engine: sim.New(sim.Config{Seed: 2}), held: map[engine.SeqID]int{}},
	}
	r, err := deploy.New(deploy.Config{Models: []deploy.Model{{Name: "slm", Engine: ws[0]}, {Name: "llm", Engine: ws[1]}},
		Algorithm: "r2r-random", Params: map[string]string{"p": "0.4"}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	var res []stream.Result
	for i := range 4 {
		s, err := r.Submit(context.Background(), []int32{1, int32(5 + i), 9}, route.Params{MaxTokens: 40, Seed: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, out)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return res, ws[0].resumed + ws[1].resumed
}

// TestForgetReextendsEverything: with the wrapper no model resumes from
// the KV it kept for a request that left it (every return extends the
// whole sequence anew), while the routed runtime does; the output is the
// same.
func TestForgetReextendsEverything(t *testing.T) {
	base := builtin.Registry()
	kept, resumedKept := serve(t, base)
	forgot, resumedForgot := serve(t, stdserving.Registry(base, "r2r-random"))
	if resumedKept == 0 {
		t.Fatal("the routed runtime never resumed from kept KV: the test does not hand requests back")
	}
	if resumedForgot != 0 {
		t.Fatalf("std-serving resumed %d times from KV it should not reuse", resumedForgot)
	}
	for i := range kept {
		if !slices.Equal(kept[i].Tokens, forgot[i].Tokens) || !slices.Equal(kept[i].By, forgot[i].By) {
			t.Fatalf("request %d: output differs:\n%v\n%v", i, kept[i].Tokens, forgot[i].Tokens)
		}
	}
}
