package deploy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func builtinRegistry() *route.Registry { return builtin.Registry() }

func simModels(lat ...time.Duration) []deploy.Model {
	var ms []deploy.Model
	for i, l := range lat {
		ms = append(ms, deploy.Model{
			Name:   []string{"slm", "llm", "xl"}[i],
			Engine: sim.New(sim.Config{Name: "m", Seed: uint64(i + 1), Profile: sim.Constant(l)}),
		})
	}
	return ms
}

func newRouter(t *testing.T, bc busCase, ms []deploy.Model, p string, launch ...sched.Launch) *deploy.Deployment {
	t.Helper()
	var l sched.Launch
	if len(launch) > 0 {
		l = launch[0]
	}
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: map[string]string{"p": p}, Registry: builtin.Registry(),
		Bus: bc.bus(t), Launch: l})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// replay checks that each committed token is exactly what the model that
// produced it computes for the committed prefix before it.
func replay(t *testing.T, prompt []int32, res stream.Result, seeds []uint64) {
	t.Helper()
	engines := make([]*sim.Engine, len(seeds))
	for i, s := range seeds {
		engines[i] = sim.New(sim.Config{Seed: s})
	}
	seq := append([]int32(nil), prompt...)
	out := make([]engine.Output, 1)
	for k, tok := range res.Tokens {
		m := res.By[k]
		if m < 0 || int(m) >= len(engines) {
			t.Fatalf("token %d attributed to model %d", k, m)
		}
		e := engines[m]
		id := engine.SeqID(k + 1)
		if err := e.Step(context.Background(), []engine.Input{{Seq: id, Tokens: seq}}, out); err != nil {
			t.Fatal(err)
		}
		e.Release(id)
		if out[0].Token != tok {
			t.Fatalf("output position %d: committed %d by model %d, a single engine computes %d", k, tok, m, out[0].Token)
		}
		seq = append(seq, tok)
	}
}

func TestRoutedOutputEqualsReplay(t *testing.T) { forEachBus(t, testRoutedOutputEqualsReplay) }

func testRoutedOutputEqualsReplay(t *testing.T, bc busCase) {
	r := newRouter(t, bc, simModels(0, 0), "0.35")
	defer r.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	type res struct {
		prompt []int32
		r      stream.Result
		err    error
	}
	results := make([]res, 16)
	for i := range results {
		prompt := []int32{1, int32(100 + i), int32(7 * i)}
		s, err := r.Submit(ctx, prompt, route.Params{MaxTokens: 60 + i, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := s.Wait(ctx)
			results[i] = res{prompt, out, err}
		}()
	}
	wg.Wait()
	routed, total := 0, 0
	for i, x := range results {
		if x.err != nil {
			t.Fatal(x.err)
		}
		if len(x.r.Tokens) != 60+i || x.r.Reason != stream.Length {
			t.Fatalf("request %d: %d tokens, reason %q", i, len(x.r.Tokens), x.r.Reason)
		}
		replay(t, x.prompt, x.r, []uint64{1, 2})
		for _, b := range x.r.By {
			if b == 1 {
				routed++
			}
			total++
		}
	}
	if f := float64(routed) / float64(total); f < 0.2 || f > 0.5 {
		t.Fatalf("routed fraction %.3f, want about 0.35", f)
	}
}

func TestSameSeedSameOutput(t *testing.T) { forEachBus(t, testSameSeedSameOutput) }

func testSameSeedSameOutput(t *testing.T, bc busCase) {
	run := func() stream.Result {
		r := newRouter(t, bc, simModels(0, 0), "0.5")
		defer r.Close()
		s, err := r.Submit(context.Background(), []int32{1, 5}, route.Params{MaxTokens: 50, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := run(), run()
	if len(a.Tokens) != 50 || !equal(a.Tokens, b.Tokens) || string(bytes8(a.By)) != string(bytes8(b.By)) {
		t.Fatalf("same seed gave different outputs:\n%v\n%v", a, b)
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func bytes8(b []int8) []byte {
	out := make([]byte, len(b))
	for i, x := range b {
		out[i] = byte(x)
	}
	return out
}

func TestCancelMidHandoffFreesEverywhere(t *testing.T) {
	forEachBus(t, testCancelMidHandoffFreesEverywhere)
}

func testCancelMidHandoffFreesEverywhere(t *testing.T, bc busCase) {
	// The large model is slow, so requests are pending on the small model
	// (KV kept) and running on the large one when cancelled.
	r := newRouter(t, bc, simModels(time.Millisecond, 20*time.Millisecond), "0.9")
	defer r.Close()
	var streams []*stream.Stream
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 8 {
		s, err := r.Submit(ctx, []int32{1, int32(i + 3)}, route.Params{MaxTokens: 10000, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	// Wait until some request is parked (pending) on the small model.
	testkit.Eventually(t, 5*time.Second, func() bool { return r.SubServers()[0].Stats().Pending != 0 }, "no request became pending")
	cancel()
	for _, s := range streams {
		if _, err := s.Wait(context.Background()); !errors.Is(err, stream.ErrCancelled) {
			t.Fatalf("stream %d: err %v, want cancelled", s.ID, err)
		}
	}
	routetest.WaitIdle(t, r)
}

func TestMaxWaitGuardPreventsDeadlock(t *testing.T) { forEachBus(t, testMaxWaitGuardPreventsDeadlock) }

func testMaxWaitGuardPreventsDeadlock(t *testing.T, bc busCase) {
	// B = (2, 2) with N = 2 is infeasible: Σ(B_i−1) = 2 ≥ N. Once the two
	// requests split (one routed, one stayed), each model waits for a
	// second request that never comes.
	build := func(maxWait time.Duration) *deploy.Deployment {
		return newRouter(t, bc, simModels(0, 0), "0.5", sched.Launch{Tables: []sched.Table{sched.Static(2), sched.Static(2)}, MaxWait: maxWait})
	}
	submit := func(r *deploy.Deployment, ctx context.Context) error {
		var errs []error
		var ss []*stream.Stream
		for i := range 2 {
			s, err := r.Submit(ctx, []int32{1, int32(i + 3)}, route.Params{MaxTokens: 20})
			if err != nil {
				return err
			}
			ss = append(ss, s)
		}
		for _, s := range ss {
			_, err := s.Wait(ctx)
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	// With the guard disabled the system deadlocks (nothing completes) on
	// the in-process bus. Over NATS it need not: a sub-server's threshold
	// is capped by the requests it knows of, and NATS orders nothing
	// across subjects, so a request's entry can reach the small model
	// before the other request's admission, which then launches it alone
	// (B*(1) = 1) and the two may finish before they split (seen once in
	// CI: both completed within the 300 ms).
	if bc.mk == nil {
		r := build(0)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := submit(r, ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("without the guard: err %v, want a deadlock (deadline exceeded)", err)
		}
		r.Close()
	}
	// With a 2 ms guard everything completes.
	r := build(2 * time.Millisecond)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := submit(r, ctx); err != nil {
		t.Fatalf("with the guard: %v", err)
	}
	routetest.WaitIdle(t, r)
}

func TestSubmitRejectsBadInput(t *testing.T) { forEachBus(t, testSubmitRejectsBadInput) }

func testSubmitRejectsBadInput(t *testing.T, bc busCase) {
	r := newRouter(t, bc, simModels(0, 0), "0.3")
	defer r.Close()
	ctx := context.Background()
	for name, c := range map[string]struct {
		prompt []int32
		p      route.Params
	}{
		"empty prompt": {nil, route.Params{MaxTokens: 1}},
		"zero max":     {[]int32{1}, route.Params{}},
		"too long":     {[]int32{1}, route.Params{MaxTokens: 1 << 20}},
		"bad token id": {[]int32{1, 99999}, route.Params{MaxTokens: 4}},
		"negative id":  {[]int32{-5}, route.Params{MaxTokens: 4}},
	} {
		if _, err := r.Submit(ctx, c.prompt, c.p); !errors.Is(err, deploy.ErrBadRequest) {
			t.Errorf("%s: err %v, want ErrBadRequest", name, err)
		}
	}
}
