package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/stream"
)

// replicated returns the simulated pair with reps[i] replicas of model i,
// each replica its own engine of the same model (seed), stepping in lat[i].
func replicated(reps []int, lat ...time.Duration) []deploy.Model {
	ms := simModels(lat...)
	for i := range ms {
		for range reps[i] - 1 {
			ms[i].Replicas = append(ms[i].Replicas, sim.New(sim.Config{Name: "m", Seed: uint64(i + 1), Profile: sim.Constant(lat[i])}))
		}
	}
	return ms
}

// newReplicated starts r2r-random (p) over ms on bc's bus.
func newReplicated(t *testing.T, bc busCase, ms []deploy.Model, p string) *deploy.Deployment {
	t.Helper()
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: map[string]string{"p": p},
		Registry: builtin.Registry(), Bus: bc.bus(t), CloseBus: true, PlaceSeed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// started is a request submitted to a deployment.
type started struct {
	prompt []int32
	s      *stream.Stream
}

// submitMany submits n requests of tokens output tokens each, seeded by
// their index.
func submitMany(t *testing.T, r *deploy.Deployment, n, tokens int) []started {
	t.Helper()
	out := make([]started, n)
	for i := range out {
		prompt := []int32{1, int32(100 + i), int32(7 * i)}
		s, err := r.Submit(context.Background(), prompt, route.Params{MaxTokens: tokens, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = started{prompt, s}
	}
	return out
}

// waitAll waits for every request and returns their results.
func waitAll(t *testing.T, reqs []started) []stream.Result {
	t.Helper()
	out := make([]stream.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, q := range reqs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out[i], errs[i] = q.s.Wait(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameOutputs fails unless every result has the tokens and producers of
// want's.
func sameOutputs(t *testing.T, got, want []stream.Result) {
	t.Helper()
	for i := range want {
		if !equal(got[i].Tokens, want[i].Tokens) || string(bytes8(got[i].By)) != string(bytes8(want[i].By)) || got[i].Reason != want[i].Reason {
			t.Fatalf("request %d differs from the run on one replica each:\n got %v %v (%s)\nwant %v %v (%s)",
				i, got[i].Tokens, got[i].By, got[i].Reason, want[i].Tokens, want[i].By, want[i].Reason)
		}
	}
}

// TestReplicasShareLoadKVAffine: with two replicas of each model, both
// replicas of each take requests, every hand-off that returns to a model
// goes back to the replica holding the request's KV (at least 99%), every
// request's tokens are what its models compute for its prefix, and the
// outputs equal those of one replica per model.
func TestReplicasShareLoadKVAffine(t *testing.T) { forEachBus(t, testReplicasShareLoadKVAffine) }

func testReplicasShareLoadKVAffine(t *testing.T, bc busCase) {
	const n, tokens = 24, 120
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond}
	one := newReplicated(t, bc, replicated([]int{1, 1}, lat...), "0.35")
	want := waitAll(t, submitMany(t, one, n, tokens))
	r := newReplicated(t, bc, replicated([]int{2, 2}, lat...), "0.35")
	reqs := submitMany(t, r, n, tokens)
	got := waitAll(t, reqs)
	for i, res := range got {
		if len(res.Tokens) != tokens || res.Reason != stream.Length {
			t.Fatalf("request %d: %d tokens (%s), want %d", i, len(res.Tokens), res.Reason, tokens)
		}
		replay(t, reqs[i].prompt, res, []uint64{1, 2})
	}
	sameOutputs(t, got, want)
	for m := range 2 {
		for k, s := range r.Replicas(m) {
			if st := s.Stats(); st.Steps == 0 || st.Tokens == 0 {
				t.Errorf("model %d replica %d took no load: %+v", m, k, st)
			}
		}
		pl := r.Placements(m)
		returned := pl.Affine + pl.Replaced
		t.Logf("model %d: %+v", m, pl)
		if pl.Placed != n || returned == 0 || float64(pl.Affine) < 0.99*float64(returned) || pl.NoReplica != 0 {
			t.Errorf("model %d placements %+v: want %d placed (one per request) and at least 99%% of returns KV-affine", m, pl, n)
		}
	}
	routetest.WaitIdle(t, r)
}

// TestStopReplicaMidRun: a replica stopped while it holds requests (as a
// failure would stop it) loses none: every request completes on the
// model's other replica, re-placed from its committed tokens, with the
// output of an undisturbed run; then the model's last replica stopping
// takes the model down.
func TestStopReplicaMidRun(t *testing.T) { forEachBus(t, testStopReplicaMidRun) }

func testStopReplicaMidRun(t *testing.T, bc busCase) {
	const n, tokens = 16, 150
	lat := []time.Duration{time.Millisecond, 3 * time.Millisecond}
	for _, victim := range []struct{ model, replica int }{{0, 1}, {1, 0}} {
		t.Run(fmt.Sprintf("model%d-replica%d", victim.model, victim.replica), func(t *testing.T) {
			one := newReplicated(t, bc, replicated([]int{1, 1}, lat...), "0.35")
			want := waitAll(t, submitMany(t, one, n, tokens))
			r := newReplicated(t, bc, replicated([]int{2, 2}, lat...), "0.35")
			reqs := submitMany(t, r, n, tokens)
			s := r.Replicas(victim.model)[victim.replica]
			testkit.Eventually(t, 10*time.Second, func() bool { st := s.Stats(); return st.KVSequences >= 3 && st.Tokens > 0 },
				"replica %d of model %d never held requests", victim.replica, victim.model)
			if err := r.StopReplica(context.Background(), victim.model, victim.replica); err != nil {
				t.Fatal(err)
			}
			if up := r.ReplicasUp(victim.model); up != 1 {
				t.Fatalf("%d replicas up after the stop, want 1", up)
			}
			got := waitAll(t, reqs)
			sameOutputs(t, got, want)
			if pl := r.Placements(victim.model); pl.Replaced == 0 || pl.NoReplica != 0 {
				t.Errorf("placements %+v: want re-placements off the stopped replica, none without a replica", pl)
			}
			if r.Unavailable(victim.model) != nil {
				t.Fatalf("model down with a replica left: %v", r.Unavailable(victim.model))
			}
			routetest.WaitIdle(t, r)
			// The last replica: the model is down, requests end with an error.
			reqs = submitMany(t, r, 4, 20000) // long enough to be in flight
			if err := r.StopReplica(context.Background(), victim.model, 1-victim.replica); err != nil {
				t.Fatal(err)
			}
			for _, q := range reqs {
				if _, err := q.s.Wait(context.Background()); !errors.Is(err, deploy.ErrUnavailable) {
					t.Fatalf("with no replica of the model left: err %v, want ErrUnavailable", err)
				}
			}
			if _, err := r.Submit(context.Background(), []int32{1}, route.Params{MaxTokens: 4}); !errors.Is(err, deploy.ErrUnavailable) {
				t.Fatalf("submit with the model down: %v, want ErrUnavailable", err)
			}
			if err := r.StopReplica(context.Background(), victim.model, victim.replica); err == nil {
				t.Fatal("stopping a stopped replica: no error")
			}
		})
	}
}

// TestReplicaEngineFailure: a replica whose engine fails for good (it
// panics and cannot be reopened) fails the requests of the step that
// panicked (DESIGN §8.1) and is lost: the requests it held otherwise go on
// on the other replica with the output of an undisturbed run, the model
// serves on, and later requests avoid the lost replica.
func TestReplicaEngineFailure(t *testing.T) {
	const n, tokens = 12, 100
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond}
	ms := replicated([]int{2, 1}, lat...)
	bomb := &failing{Engine: ms[0].Replicas[0]}
	ms[0].Replicas[0] = bomb // no Reopen: a panic takes the replica down
	r := newReplicated(t, busCase{name: "memory"}, ms, "0.35")
	one := newReplicated(t, busCase{name: "memory"}, replicated([]int{1, 1}, lat...), "0.35")
	want := waitAll(t, submitMany(t, one, 2*n, tokens))
	reqs := submitMany(t, r, n, tokens)
	testkit.Eventually(t, 10*time.Second, func() bool { st := r.Replicas(0)[1].Stats(); return st.Tokens > 0 && st.Runnable > 0 },
		"replica 1 took no requests")
	bomb.arm()
	failed := 0
	for i, q := range reqs {
		res, err := q.s.Wait(context.Background())
		switch {
		case err != nil && strings.Contains(err.Error(), "internal error: panic in engine"):
			failed++
		case err != nil:
			t.Fatalf("request %d: %v, want its output or an internal error", i, err)
		default:
			sameOutputs(t, []stream.Result{res}, want[i:i+1])
		}
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return r.ReplicasUp(0) == 1 }, "the failed replica is still up")
	if failed == 0 || failed == n || r.Unavailable(0) != nil {
		t.Fatalf("%d of %d requests failed, model unavailable: %v; want the panicking step's requests to fail, the model to serve", failed, n, r.Unavailable(0))
	}
	more := submitMany(t, r, 2*n, tokens)[n:] // the same seeds as want's second half
	sameOutputs(t, waitAll(t, more), want[n:])
}

// TestReplicaStalled: a replica whose step never returns is found by the
// watchdog and lost: every request completes on the other replica with the
// output of an undisturbed run (none ends with an error), and the replica
// comes back on a reopened engine and takes new requests.
func TestReplicaStalled(t *testing.T) {
	const n, tokens = 12, 100
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond}
	ms := replicated([]int{2, 1}, lat...)
	stuck := &failing{Engine: ms[0].Replicas[0], hang: make(chan struct{})}
	t.Cleanup(func() { close(stuck.hang) })
	ms[0].Replicas[0] = stuck
	ms[0].Reopen = func(context.Context) (engine.Engine, error) {
		return sim.New(sim.Config{Name: "m", Seed: 1, Profile: sim.Constant(lat[0])}), nil
	}
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"},
		Registry: builtin.Registry(), StallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	one := newReplicated(t, busCase{name: "memory"}, replicated([]int{1, 1}, lat...), "0.35")
	want := waitAll(t, submitMany(t, one, 2*n, tokens))
	reqs := submitMany(t, r, n, tokens)
	testkit.Eventually(t, 10*time.Second, func() bool { st := r.Replicas(0)[1].Stats(); return st.Tokens > 0 && st.Runnable > 0 },
		"replica 1 took no requests")
	stuck.arm()
	sameOutputs(t, waitAll(t, reqs), want[:n])
	testkit.Until(t, 10*time.Second, func() error {
		if stalls, restarts := r.Stalls(0); stalls != 1 || restarts != 1 || r.ReplicasUp(0) != 2 {
			return fmt.Errorf("%d stalls, %d restarts, %d replicas up; want 1, 1, 2", stalls, restarts, r.ReplicasUp(0))
		}
		return nil
	})
	if r.Unavailable(0) != nil {
		t.Fatalf("model down with a replica left: %v", r.Unavailable(0))
	}
	more := submitMany(t, r, 2*n, tokens)[n:]
	sameOutputs(t, waitAll(t, more), want[n:])
	if st := r.Replicas(0)[1].Stats(); st.Tokens == 0 {
		t.Errorf("the restarted replica took no new requests: %+v", st)
	}
}

// failing is an engine whose steps panic once armed, or hang until hang is
// closed if it is set.
type failing struct {
	engine.Engine
	hang  chan struct{}
	mu    sync.Mutex
	armed bool
}

func (f *failing) arm() { f.mu.Lock(); f.armed = true; f.mu.Unlock() }

// Step panics or hangs when armed.
func (f *failing) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	f.mu.Lock()
	armed := f.armed
	f.mu.Unlock()
	switch {
	case armed && f.hang != nil:
		<-f.hang
		return ctx.Err()
	case armed:
		panic("engine lost")
	}
	return f.Engine.Step(ctx, in, out)
}
