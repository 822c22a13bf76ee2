package deploy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// faultyDeployment runs the sim pair behind the faults of spec: engines
// wrapped, reopened the same way, and the algorithm wrapped.
func faultyDeployment(t *testing.T, spec string, stall time.Duration) (*deploy.Deployment, *faults.Faults, *panicLog) {
	t.Helper()
	f, err := faults.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Release) // after the deployment's Close: a hung step returns
	var log panicLog
	ms := make([]deploy.Model, 2)
	for i := range ms {
		open := func(context.Context) (engine.Engine, error) {
			return f.Engine(sim.New(sim.Config{Name: "m", Seed: uint64(i + 1), Profile: sim.Constant(time.Millisecond)})), nil
		}
		e, _ := open(context.Background())
		ms[i] = deploy.Model{Name: []string{"slm", "llm"}[i], Engine: e, Reopen: open}
	}
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: map[string]string{"p": "0.4"},
		Registry: f.Registry(builtin.Registry()), StallTimeout: stall, OnPanic: log.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, f, &log
}

// panicLog records reported panics.
type panicLog struct {
	mu  sync.Mutex
	got []*subserver.Panic
}

func (l *panicLog) add(p *subserver.Panic) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, p)
}

func (l *panicLog) wheres() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.got {
		out = append(out, p.Where)
	}
	return out
}

// outcome is one request's end.
type outcome struct {
	res summary
	err error
}

type summary = struct {
	tokens int
	reason string
}

// runAll submits one request per seed at once and waits for them all.
func runAll(t *testing.T, r *deploy.Deployment, seeds ...uint64) []outcome {
	t.Helper()
	out := make([]outcome, len(seeds))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p := route.Params{MaxTokens: 24, Seed: seed, Sampling: engine.Sampling{Seed: seed}}
			s, err := r.Submit(ctx, []int32{1, 2, 3, 4}, p)
			if err != nil {
				out[i].err = err
				return
			}
			res, err := s.Wait(ctx)
			out[i] = outcome{summary{len(res.Tokens), res.Reason}, err}
		}()
	}
	wg.Wait()
	return out
}

// TestPanickingAlgorithm: a routing decision that panics for one request
// fails that request with an internal error; the requests stepped beside
// it finish, and the deployment serves on.
func TestPanickingAlgorithm(t *testing.T) {
	r, _, log := faultyDeployment(t, "route-panic=66", -1)
	out := runAll(t, r, 1, 2, 66, 3, 4, 5)
	for i, o := range out {
		if i == 2 {
			if o.err == nil || !strings.Contains(o.err.Error(), "internal error: panic in route") {
				t.Errorf("the panicking request: %+v, want an internal error naming the panic", o)
			}
			continue
		}
		if o.err != nil || o.res.reason != "length" || o.res.tokens != 24 {
			t.Errorf("request %d: %+v, want 24 tokens (length)", i, o)
		}
	}
	if w := log.wheres(); len(w) == 0 || w[0] != "route" {
		t.Errorf("reported panics %v, want route first", w)
	}
	if o := runAll(t, r, 7)[0]; o.err != nil || o.res.reason != "length" {
		t.Fatalf("after the panic: %+v", o)
	}
}

// TestPanickingEngineStep: an engine step that panics fails that step's
// requests only; the model's engine is reopened and serves on, and no
// model is reported down.
func TestPanickingEngineStep(t *testing.T) {
	r, _, log := faultyDeployment(t, "step-panic=67", -1)
	out := runAll(t, r, 67)
	if out[0].err == nil || !strings.Contains(out[0].err.Error(), "panic in engine") {
		t.Fatalf("the request whose step panicked: %+v, want an internal error", out[0])
	}
	for i, o := range runAll(t, r, 1, 2, 3) {
		if o.err != nil || o.res.reason != "length" {
			t.Errorf("request %d after the restart: %+v", i, o)
		}
	}
	restarts := uint64(0)
	for _, s := range r.SubServers() {
		restarts += s.Stats().Restarts
	}
	if restarts != 1 || r.Unavailable(0) != nil || r.Unavailable(1) != nil {
		t.Fatalf("%d engine restarts (want 1); unavailable: %v, %v", restarts, r.Unavailable(0), r.Unavailable(1))
	}
	if w := log.wheres(); len(w) != 1 || w[0] != "engine" {
		t.Errorf("reported panics %v, want one in the engine", w)
	}
}

// TestStalledEngineStep: a step that never returns is found by the
// watchdog: the requests in flight end with an error naming the stall, the
// model is restarted on a new engine, and new requests are served.
func TestStalledEngineStep(t *testing.T) {
	r, _, _ := faultyDeployment(t, "step-hang=68", 300*time.Millisecond)
	out := runAll(t, r, 68)
	if !errors.Is(out[0].err, subserver.ErrStalled) || !errors.Is(out[0].err, deploy.ErrUnavailable) {
		t.Fatalf("the hung request: %+v, want an error wrapping ErrStalled and ErrUnavailable", out[0])
	}
	testkit.Until(t, 10*time.Second, func() error {
		if stalls, restarts := r.Stalls(0); stalls != 1 || restarts != 1 {
			return errors.New("not restarted yet")
		}
		return nil
	})
	for i, o := range runAll(t, r, 1, 2, 3) {
		if o.err != nil || o.res.reason != "length" {
			t.Errorf("request %d after the restart: %+v", i, o)
		}
	}
}
