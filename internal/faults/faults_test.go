package faults_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

func TestParse(t *testing.T) {
	f, err := faults.Parse("route-panic=666, step-panic=667,step-hang=668,entry-panic=669")
	if err != nil || f.RoutePanic != 666 || f.StepPanic != 667 || f.StepHang != 668 || f.EntryPanic != 669 || !f.Active() {
		t.Fatalf("Parse: %+v, %v", f, err)
	}
	if f.String() != "route-panic=666,entry-panic=669,step-panic=667,step-hang=668" {
		t.Fatalf("String: %q", f.String())
	}
	if f, err := faults.Parse(""); err != nil || f.Active() {
		t.Fatalf("empty spec: %+v, %v", f, err)
	}
	for _, bad := range []string{"route-panic", "route-panic=0", "route-panic=x", "crash=1"} {
		if _, err := faults.Parse(bad); err == nil || !strings.Contains(err.Error(), "faults:") {
			t.Errorf("Parse(%q): %v, want an error", bad, err)
		}
	}
}

// panicked runs f and returns what it panicked with.
func panicked(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestInjection(t *testing.T) {
	f, _ := faults.Parse("route-panic=5,step-panic=6,step-hang=7,entry-panic=8")
	reg := f.Registry(builtin.Registry())
	alg, err := reg.New("single", route.Spec{Model: 0, Models: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	req := func(seed uint64) *route.Request {
		return &route.Request{ID: 1, Tokens: []int32{1}, PromptLen: 1, Params: route.Params{Sampling: engine.Sampling{Seed: seed}}}
	}
	out := []engine.Output{{Token: 3}}
	d := []route.Decision{{}}
	if v := panicked(func() { alg.Route(&route.Step{Requests: []*route.Request{req(1)}, Outputs: out}, d) }); v != nil {
		t.Fatalf("Route panicked for another seed: %v", v)
	}
	if v := panicked(func() { alg.Route(&route.Step{Requests: []*route.Request{req(5)}, Outputs: out}, d) }); v == nil {
		t.Fatal("Route did not panic for the route-panic seed")
	}
	if v := panicked(func() { alg.(route.Entrant).Entry(req(8)) }); v == nil {
		t.Fatal("Entry did not panic for the entry-panic seed")
	}
	if v := panicked(func() { alg.(route.Entrant).Entry(req(5)) }); v != nil {
		t.Fatalf("Entry panicked for the route-panic seed: %v", v)
	}
	e := f.Engine(enginetest.NewFake(64))
	in := func(seed uint64) []engine.Input {
		return []engine.Input{{Seq: 1, Tokens: []int32{1}, Sampling: engine.Sampling{Seed: seed}}}
	}
	if err := e.Step(context.Background(), in(1), out); err != nil {
		t.Fatal(err)
	}
	if v := panicked(func() { _ = e.Step(context.Background(), in(6), out) }); v == nil {
		t.Fatal("Step did not panic for the step-panic seed")
	}
	done := make(chan error, 1)
	go func() { done <- e.Step(context.Background(), in(7), out) }()
	select {
	case <-done:
		t.Fatal("Step returned for the step-hang seed")
	case <-time.After(50 * time.Millisecond):
	}
	f.Release()
	if err := <-done; err != nil {
		t.Fatalf("released step: %v", err)
	}
}
