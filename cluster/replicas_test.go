package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// runMany submits n requests, at most conc at a time, calls mid once half
// of them completed, and returns every result (in submission order) and
// the errors.
func runMany(t *testing.T, l *cluster.Local, n, conc int, prompt func(int) []int32, p route.Params, mid func()) ([]stream.Result, []error) {
	t.Helper()
	res, errs := make([]stream.Result, n), make([]error, n)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			pp := p
			pp.Seed = uint64(i)
			s, err := l.Submit(context.Background(), prompt(i), pp)
			if err != nil {
				errs[i] = err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res[i], errs[i] = s.Wait(ctx)
			mu.Lock()
			done++
			call := done == n/2 && mid != nil
			mu.Unlock()
			if call {
				mid()
			}
		}()
	}
	wg.Wait()
	return res, errs
}

// TestReplicaKilledMidRun: a deployment whose models run two replicas each
// as child processes places requests on both replicas of the entry model;
// when one small-model replica is killed (SIGKILL) in the middle of a
// 200-request run, every request completes with exactly the tokens the
// models compute (the replacement replica re-prefills from the committed
// tokens), and the killed replica comes back and takes requests again.
func TestReplicaKilledMidRun(t *testing.T) {
	const hb = 100 * time.Millisecond
	l, out := startWith(t, "paper-r2r", hb, "0.35", func(c *cluster.LocalConfig) {
		c.Spec.Models[0].Replicas, c.Spec.Models[1].Replicas = 2, 2
	})
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	if n := len(l.Front().Members()); n != 4 {
		t.Fatalf("%d members, want 4 (2 replicas of 2 models)", n)
	}
	prompt := func(i int) []int32 { return []int32{1, int32(i%50 + 3), int32(i / 50)} }
	victim := l.PID(1) // slot 1: replica 1 of the small model
	var held int
	res, errs := runMany(t, l, 200, 16, prompt, route.Params{MaxTokens: 24}, func() {
		ld := l.Front().Members()[1].Last.Load
		held = ld.Queued + ld.Runnable + ld.KV
		if err := kill(victim); err != nil {
			t.Error(err)
		}
	})
	for i, err := range errs {
		if err != nil || len(res[i].Tokens) != 24 {
			t.Fatalf("request %d: %d tokens, %v\nchildren:\n%s", i, len(res[i].Tokens), err, out)
		}
		replay(t, prompt(i), res[i])
	}
	r := l.Deployment()
	pl := r.Placements(0)
	t.Logf("small model placements: %+v; the killed replica held %d requests at its last heartbeat", pl, held)
	if pl.Placed < 200 || held == 0 {
		t.Fatalf("placements %+v, %d requests on the killed replica: the kill did not hit a replica at work", pl, held)
	}
	for k, m := range l.Front().Members() {
		if k != 1 && m.Last.Stats.Losses == 0 {
			t.Fatalf("member %d (model %d, replica %d) did not take the loss in", k, m.Model, m.Replica)
		}
	}
	// The killed replica is restarted, rejoins, and takes new requests.
	waitMembers(t, l, 15*time.Second, func(m []cluster.Member) bool { return m[1].Up && m[1].Restarts == 1 })
	before := l.Front().Members()[1].Last.Stats.Steps
	res, errs = runMany(t, l, 16, 8, prompt, route.Params{MaxTokens: 24}, nil)
	for i, err := range errs {
		if err != nil || len(res[i].Tokens) != 24 {
			t.Fatalf("after the restart, request %d: %d tokens, %v\nchildren:\n%s", i, len(res[i].Tokens), err, out)
		}
	}
	waitMembers(t, l, 5*time.Second, func(m []cluster.Member) bool { return m[1].Last.Stats.Steps > before })
}

// TestReplicaMembersSpread: with two replicas of the small model, new
// requests go to both (power of two choices on the reported loads plus
// the placements made since).
func TestReplicaMembersSpread(t *testing.T) {
	l, out := startWith(t, "paper-r2r", 100*time.Millisecond, "0.35", func(c *cluster.LocalConfig) {
		c.Spec.Models[0].Replicas = 2
	})
	defer l.Close()
	prompt := func(i int) []int32 { return []int32{1, int32(i + 3)} }
	_, errs := runMany(t, l, 40, 8, prompt, route.Params{MaxTokens: 16}, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v\nchildren:\n%s", i, err, out)
		}
	}
	m := waitMembers(t, l, 5*time.Second, func(m []cluster.Member) bool {
		return m[0].Last.Stats.Steps > 0 && m[1].Last.Stats.Steps > 0
	})
	if m[0].Model != 0 || m[1].Model != 0 || m[1].Replica != 1 || m[2].Model != 1 {
		t.Fatalf("members %v", fmt.Sprint(m[0].Model, m[0].Replica, m[1].Model, m[1].Replica, m[2].Model))
	}
	// With no failure, the hand-offs back to the small model (placed by
	// the large model's process, reported in its heartbeats) return to the
	// replica holding the request's KV.
	var pl deploy.Placements
	testkit.Until(t, 5*time.Second, func() error {
		if pl = l.Deployment().Placements(0); pl.Affine == 0 {
			return fmt.Errorf("placements %+v: no hand-off reported yet", pl)
		}
		return nil
	})
	t.Logf("small model placements: %+v", pl)
	if share := float64(pl.Affine) / float64(pl.Affine+pl.Replaced); share < 0.99 || pl.NoReplica > 0 {
		t.Fatalf("placements %+v: %.3f of the hand-offs were KV-affine, want at least 0.99", pl, share)
	}
}

// TestReplicaKilledTinyGreedy: on the real tiny pair (cpu engine, greedy
// under r-stitch), 200 requests over two replicas of each model produce
// the same text when one small-model replica is killed in the middle of
// the run as when nothing happens.
func TestReplicaKilledTinyGreedy(t *testing.T) {
	tiny := config.Tiny()
	l, out := startWith(t, "paper-r2r", 100*time.Millisecond, "0", func(c *cluster.LocalConfig) {
		c.Spec.Models = slices.Clone(tiny.Models)
		for i := range c.Spec.Models {
			c.Spec.Models[i].Replicas, c.Spec.Models[i].Threads = 2, 1
		}
		c.Spec.Algorithm, c.Spec.Params = config.TinyAlgorithm, map[string]string{"tau": config.TinyTau}
	})
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	prompt := func(i int) []int32 { return []int32{1, int32(100 + i%60), int32(200 + i/60)} }
	p := route.Params{MaxTokens: 48, IgnoreEOS: true} // greedy: Sampling.Temperature 0
	want, errs := runMany(t, l, 200, 16, prompt, p, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("undisturbed request %d: %v\nchildren:\n%s", i, err, out)
		}
	}
	victim := l.PID(1)
	var held int
	got, errs := runMany(t, l, 200, 16, prompt, p, func() {
		ld := l.Front().Members()[1].Last.Load
		held = ld.Queued + ld.Runnable + ld.KV
		if err := kill(victim); err != nil {
			t.Error(err)
		}
	})
	t.Logf("the killed replica held %d requests at its last heartbeat", held)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d with a replica killed: %v\nchildren:\n%s", i, err, out)
		}
		if len(got[i].Tokens) != 48 || !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Fatalf("request %d: %v with a replica killed, %v undisturbed", i, got[i].Tokens, want[i].Tokens)
		}
	}
	if alive(victim) {
		t.Fatalf("process %d still runs", victim)
	}
}

// TestReplicaDrained: a small-model replica asked to stop (SIGTERM) in
// the middle of a run drains: its heartbeats say so, it takes no new
// request, the requests pinned to it move on their next hand-off, and it
// leaves once it holds none; every request completes with the tokens the
// models compute.
func TestReplicaDrained(t *testing.T) {
	l, out := startWith(t, "paper-r2r", 100*time.Millisecond, "0.35", func(c *cluster.LocalConfig) {
		c.Spec.Models[0].Replicas, c.NoRestart, c.Drain = 2, true, 20*time.Second
	})
	defer l.Close()
	prompt := func(i int) []int32 { return []int32{1, int32(i%50 + 3), int32(i / 50)} }
	victim := l.PID(1)
	var held int
	res, errs := runMany(t, l, 120, 16, prompt, route.Params{MaxTokens: 32}, func() {
		ld := l.Front().Members()[1].Last.Load
		held = ld.Queued + ld.Runnable + ld.KV
		if err := askStop(victim); err != nil {
			t.Error(err)
		}
	})
	for i, err := range errs {
		if err != nil || len(res[i].Tokens) != 32 {
			t.Fatalf("request %d: %d tokens, %v\nchildren:\n%s", i, len(res[i].Tokens), err, out)
		}
		replay(t, prompt(i), res[i])
	}
	waitMembers(t, l, 25*time.Second, func(m []cluster.Member) bool { return !m[1].Up && m[1].Last.Leaving })
	testkit.Until(t, 5*time.Second, func() error {
		if alive(victim) {
			return fmt.Errorf("process %d still runs", victim)
		}
		return nil
	})
	pl := l.Deployment().Placements(0)
	t.Logf("the drained replica held %d requests when asked to stop; small model placements %+v", held, pl)
	if held == 0 || pl.Replaced == 0 {
		t.Fatalf("held %d, placements %+v: no request moved off the draining replica", held, pl)
	}
}
