package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/system"
)

// member runs replica rep of model i of spec on the NATS server at url
// until the returned function stops it.
func member(t *testing.T, spec system.Spec, i, rep int, url string, sec cluster.Secrets, prefix string, hb time.Duration) func() {
	t.Helper()
	ms, err := spec.Member(i, rep)
	if err != nil {
		t.Fatal(err)
	}
	m, err := system.OpenMember(context.Background(), ms.Spec(spec), i, rep)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cluster.RunMember(ctx, cluster.MemberConfig{URL: url, Secrets: sec, Prefix: prefix, Member: m, Heartbeat: hb})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestReplicaJoinsMidRun: a front end whose small model declares two
// replicas starts with one of them (each model has one), and the second,
// started while requests run, takes load within two of its heartbeats of
// joining.
func TestReplicaJoinsMidRun(t *testing.T) {
	ns, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const hb, prefix = 100 * time.Millisecond, "tr.join"
	sec := cluster.Secrets{Auth: ns.ClientAuth(), Key: busnats.NewKey()}
	preset, err := sim.LookupPreset("paper-r2r")
	if err != nil {
		t.Fatal(err)
	}
	models := make([]config.Model, 2)
	for i, name := range []string{"slm", "llm"} {
		models[i] = config.Model{Name: name, Engine: loader.KindSim, Profile: "paper-r2r/" + preset.Models[i], Seed: uint64(i + 1), NoSpin: true}
	}
	models[0].Replicas = 2
	spec := system.Spec{Models: models, Registry: builtin.Registry(), Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"},
		Launch: sched.Launch{MaxWait: 20 * time.Millisecond}}
	defer member(t, spec, 0, 0, ns.URL(), sec, prefix, hb)()
	defer member(t, spec, 1, 0, ns.URL(), sec, prefix, hb)()
	f, err := cluster.Join(context.Background(), cluster.FrontConfig{URL: ns.URL(), Secrets: sec, Prefix: prefix, Spec: spec,
		Heartbeat: hb, JoinTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r := f.Deployment().ReplicasUp(0); r != 1 {
		t.Fatalf("small-model replicas up at the start: %d, want 1", r)
	}
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				s, err := f.Submit(context.Background(), []int32{1, int32(w + 3), int32(n % 50)}, route.Params{MaxTokens: 16})
				if err == nil {
					_, err = s.Wait(context.Background())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(3 * hb)
	defer member(t, spec, 0, 1, ns.URL(), sec, prefix, hb)()
	var upSeq uint64
	testkit.Until(t, 10*time.Second, func() error {
		m := f.Members()[1]
		if !m.Up {
			return fmt.Errorf("replica 1 not up yet")
		}
		if upSeq == 0 {
			upSeq = m.Last.Seq
		}
		if m.Last.Stats.Steps == 0 {
			return fmt.Errorf("replica 1 up since its beat %d, no step by beat %d", upSeq, m.Last.Seq)
		}
		t.Logf("replica 1 came up at its heartbeat %d and had stepped by its heartbeat %d", upSeq, m.Last.Seq)
		if m.Last.Seq > upSeq+2 {
			return fmt.Errorf("replica 1 took load %d heartbeats after joining, want at most 2", m.Last.Seq-upSeq)
		}
		return nil
	})
	stopLoad()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a request failed: %v", err)
	}
}
