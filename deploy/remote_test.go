package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// remote runs model sub-servers on their own NATS connection, as another
// process would, and returns them with their facts.
func remote(t *testing.T, url string, auth busnats.Auth, lat ...time.Duration) ([]*subserver.Server, []engine.Info) {
	t.Helper()
	b, err := busnats.Connect(url, busnats.Options{Prefix: "test", Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = b.Close()
	})
	names := []string{"slm", "llm"}
	var subs []*subserver.Server
	var infos []engine.Info
	for i, l := range lat {
		eng := sim.New(sim.Config{Name: names[i], Seed: uint64(i + 1), Profile: sim.Constant(l)})
		alg, err := builtin.Registry().New("r2r-random", route.Spec{Model: i, Models: names, Params: map[string]string{"p": "0.5"}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := subserver.New(subserver.Config{Index: i, Models: len(lat), Name: names[i], Engine: eng, Algorithm: alg,
			Policy: sched.Launch{}.Policy(i), Bus: b})
		if err != nil {
			t.Fatal(err)
		}
		subs, infos = append(subs, s), append(infos, eng.Info())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Run(ctx)
		}()
	}
	return subs, infos
}

func TestRemoteModels(t *testing.T) {
	srv, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	subs, infos := remote(t, srv.URL(), srv.ClientAuth(), time.Millisecond, 3*time.Millisecond)
	fb, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: "test", Auth: srv.ClientAuth()})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if _, err := deploy.New(deploy.Config{Models: []deploy.Model{{Name: "slm"}}, Algorithm: "single", Registry: builtin.Registry(), Bus: fb}); err == nil {
		t.Fatal("a model with neither engine nor remote facts was accepted")
	}
	r, err := deploy.New(deploy.Config{
		Models:    []deploy.Model{{Name: "slm", Remote: &infos[0]}, {Name: "llm", Remote: &infos[1]}},
		Algorithm: "r2r-random", Params: map[string]string{"p": "0.5"}, Registry: builtin.Registry(), Bus: fb,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.SubServers()) != 0 || len(r.Models()) != 2 {
		t.Fatalf("%d local sub-servers, %d models", len(r.SubServers()), len(r.Models()))
	}
	ctx := context.Background()
	prompt := []int32{1, 9, 4}
	s, err := r.Submit(ctx, prompt, route.Params{MaxTokens: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 40 {
		t.Fatalf("%d tokens", len(res.Tokens))
	}
	replay(t, prompt, res, []uint64{1, 2})

	// Model 1 goes down: every request in flight ends with a clear error,
	// the surviving sub-server frees them, and Submit is refused.
	var streams []*stream.Stream
	for i := range 6 {
		s, err := r.Submit(ctx, []int32{1, int32(i + 5)}, route.Params{MaxTokens: 30000, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	// Both sub-servers hold them (records, and KV once they ran there).
	testkit.Until(t, 5*time.Second, func() error {
		for i, sub := range subs {
			if st := sub.Stats(); st.Records != len(streams) || st.KVSequences == 0 {
				return fmt.Errorf("model %d holds %+v, want %d records with KV", i, st, len(streams))
			}
		}
		return nil
	})
	cause := errors.New("no heartbeat for 750ms")
	if n := r.ModelDown(1, cause); n != 6 {
		t.Fatalf("ModelDown ended %d requests, want 6", n)
	}
	for _, s := range streams {
		if _, err := s.Wait(ctx); !errors.Is(err, deploy.ErrUnavailable) || !errors.Is(err, cause) {
			t.Fatalf("stream %d: err %v, want unavailable: %v", s.ID, err, cause)
		}
	}
	if _, err := r.Submit(ctx, prompt, route.Params{MaxTokens: 4}); !errors.Is(err, deploy.ErrUnavailable) {
		t.Fatalf("submit while down: %v", err)
	}
	testkit.Until(t, 5*time.Second, func() error {
		for i, sub := range subs {
			if st := sub.Stats(); st.Records+st.KVSequences != 0 {
				return fmt.Errorf("model %d still holds the ended requests: %+v", i, st)
			}
		}
		return nil
	})
	r.ModelUp(1)
	s, err = r.Submit(ctx, prompt, route.Params{MaxTokens: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Wait(ctx)
	if err != nil || len(again.Tokens) != 40 {
		t.Fatalf("after ModelUp: %d tokens, %v", len(again.Tokens), err)
	}
	replay(t, prompt, again, []uint64{1, 2})
}
