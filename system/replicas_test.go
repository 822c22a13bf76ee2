package system_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/system"
)

// tinyPair is the real tiny pair (stories260K and llama2xs, tok512) on the
// cpu engine, one thread each, with slm and llm replicas, under r2r-random
// (p = 0.35: many hand-offs), launching at once.
func tinyPair(t *testing.T, slm, llm int) system.Spec {
	dir := testmodels.Dir(t)
	tok := filepath.Join(dir, "tok512.bin")
	return system.Spec{
		Models: []config.Model{
			{Name: "slm", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.bin"), Tokenizer: tok, Threads: 1, Replicas: slm},
			{Name: "llm", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: tok, Threads: 1, Replicas: llm},
		},
		Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"}, Registry: builtin.Registry(),
		Launch: sched.Launch{Tables: []sched.Table{{1}, {1}}, MaxWait: 5 * time.Millisecond},
	}
}

// tinyRequests are greedy requests of distinct prompts, each to its full
// length.
const tinyRequests, tinyTokens = 12, 200

// runTiny opens s and submits tinyRequests; before it waits for them, mid
// (if set) runs with the deployment and the requests in flight.
func runTiny(t *testing.T, s system.Spec, mid func(*deploy.Deployment)) ([]stream.Result, *deploy.Deployment) {
	t.Helper()
	r, _, err := system.Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	streams := make([]*stream.Stream, tinyRequests)
	for i := range streams {
		prompt := []int32{1, int32(20 + 7*i), int32(300 - 11*i), 42}
		p := route.Params{MaxTokens: tinyTokens, IgnoreEOS: true, Seed: uint64(i)}
		if streams[i], err = r.Submit(context.Background(), prompt, p); err != nil {
			t.Fatal(err)
		}
	}
	if mid != nil {
		mid(r)
	}
	out := make([]stream.Result, len(streams))
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, st := range streams {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out[i], errs[i] = st.Wait(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out, r
}

// sameTiny fails unless got equals want token for token, producer for
// producer.
func sameTiny(t *testing.T, got, want []stream.Result) {
	t.Helper()
	for i := range want {
		if len(want[i].Tokens) != tinyTokens || !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].By, want[i].By) {
			t.Fatalf("request %d:\n got %v\n     by %v\nwant %v\n     by %v", i, got[i].Tokens, got[i].By, want[i].Tokens, want[i].By)
		}
	}
}

// TestReplicasGreedyEqual: on the real tiny pair, greedy output with two
// replicas of each model equals the output with one of each, and both
// replicas of each model took requests.
func TestReplicasGreedyEqual(t *testing.T) {
	want, _ := runTiny(t, tinyPair(t, 1, 1), nil)
	got, r := runTiny(t, tinyPair(t, 2, 2), nil)
	sameTiny(t, got, want)
	for m := range 2 {
		for k, s := range r.Replicas(m) {
			if st := s.Stats(); st.Tokens == 0 {
				t.Errorf("model %d replica %d committed nothing: %+v", m, k, st)
			}
		}
		if pl := r.Placements(m); pl.Affine == 0 || pl.Placed != tinyRequests {
			t.Errorf("model %d placements %+v: want one placement per request, KV-affine returns", m, pl)
		}
	}
}

// TestReplicaStoppedGreedyEqual: on the real tiny pair, a replica of each
// model stopped while requests run on it loses none of them: they are
// re-placed and re-prefilled from their tokens on the other replica, and
// the greedy output equals an undisturbed run's.
func TestReplicaStoppedGreedyEqual(t *testing.T) {
	want, _ := runTiny(t, tinyPair(t, 1, 1), nil)
	got, r := runTiny(t, tinyPair(t, 2, 2), func(r *deploy.Deployment) {
		for _, m := range []int{1, 0} {
			s := r.Replicas(m)[1]
			testkit.Eventually(t, time.Minute, func() bool { st := s.Stats(); return st.KVSequences > 0 && st.Tokens > 0 },
				"replica 1 of model %d never held a request", m)
			if err := r.StopReplica(context.Background(), m, 1); err != nil {
				t.Fatal(err)
			}
		}
	})
	sameTiny(t, got, want)
	if r.ReplicasUp(0) != 1 || r.ReplicasUp(1) != 1 {
		t.Fatalf("replicas up: %d, %d; want 1, 1", r.ReplicasUp(0), r.ReplicasUp(1))
	}
	if pl0, pl1 := r.Placements(0), r.Placements(1); pl0.Replaced+pl1.Replaced == 0 {
		t.Fatalf("placements %+v, %+v: no request was re-placed off the stopped replicas", pl0, pl1)
	}
}

// TestReplicasAcrossProcesses: a member's spec carries its replica and
// every model's replica count (and refuses a replica the model does not
// run), and a front end over remote models places among their replicas;
// lockstep, one engine per model, refuses replicas.
func TestReplicasAcrossProcesses(t *testing.T) {
	s := memberSpec()
	s.Models[0].Replicas = 2
	m, err := s.Member(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Replica != 1 || !slices.Equal(m.Replicas, []int{2, 1}) {
		t.Fatalf("member spec: replica %d, replicas %v; want 1, [2 1]", m.Replica, m.Replicas)
	}
	if got := m.Spec(system.Spec{}); got.Models[0].Replicas != 2 || got.Models[1].Replicas != 1 {
		t.Fatalf("member's spec: replicas %d, %d; want 2, 1", got.Models[0].Replicas, got.Models[1].Replicas)
	}
	if _, err := s.Member(0, 2); err == nil || !strings.Contains(err.Error(), "replica 2") {
		t.Fatalf("replica 2 of 2: %v", err)
	}
	r, err := system.Remote(s, make([]engine.Info, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := len(r.RemoteReplicas(0)); got != 2 {
		t.Fatalf("remote replicas of model 0: %d, want 2", got)
	}
	if r.ReplicasUp(0) != 0 {
		t.Fatalf("replicas up before any joined: %d", r.ReplicasUp(0))
	}
	r.ReplicaUp(0, 1)
	if r.ReplicasUp(0) != 1 || !r.RemoteReplicas(0)[1].Up {
		t.Fatalf("replica 1 up: %+v", r.RemoteReplicas(0))
	}
	if _, err := system.Build(context.Background(), s, "lockstep", 0); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("lockstep with replicas: %v", err)
	}
}
