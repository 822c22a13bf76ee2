// Package routetest is the conformance suite every routing algorithm
// passes on the runtime (package deploy), on any engines: each committed
// token is counted once and attributed to one model; the same seeds give
// the same output; cancelling requests right after hand-offs leaves nothing
// held in any sub-server; per-request state survives a binary round trip
// on every hand-off without changing the output; two replicas of every
// model give the same output, also when one of them is lost mid-run
// (DESIGN §9); and the deployment
// neither deadlocks nor misbehaves with two or three models (an algorithm that does not support a model count must
// refuse it at construction). It also writes the small random router
// weight files the learned algorithms (r2r, citer, co-llm) load.
package routetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/stream"
)

// Case is one algorithm configuration under test.
type Case struct {
	// Algorithm is the registry name; Params its parameters.
	Algorithm string
	Params    map[string]string
	// Models lists the model counts the algorithm supports among 2 and 3
	// (default {2}); the other count must be refused by the factory.
	Models []int
}

// Engines returns n fresh engines (model 0 first).
type Engines func(t *testing.T, n int) []engine.Engine

// Options size the runs.
type Options struct {
	// Prompts are submitted concurrently in every run.
	Prompts [][]int32
	// MaxTokens is each request's output length (EOS is ignored).
	MaxTokens int
	// Timeout bounds each run; exceeding it is reported as a deadlock.
	Timeout time.Duration
	// Bus, if set, returns a fresh bus for each deployment (bus/nats with
	// an embedded server, say); nil runs on the deployment's in-memory bus.
	Bus func(t *testing.T) bus.Bus
}

// Run checks one case on the engines mk returns.
func Run(t *testing.T, reg *route.Registry, c Case, mk Engines, o Options) {
	t.Helper()
	counts := c.Models
	if len(counts) == 0 {
		counts = []int{2}
	}
	for _, n := range []int{2, 3} {
		if !slices.Contains(counts, n) {
			if _, err := reg.New(c.Algorithm, route.Spec{Model: 0, Models: make([]string, n), Params: c.Params}); err == nil {
				t.Errorf("%s: accepts %d models, but the case does not list that count", c.Algorithm, n)
			}
			continue
		}
		t.Run(fmt.Sprintf("%dmodels", n), func(t *testing.T) {
			first := run(t, reg, c, mk(t, n), o, false)
			again := run(t, reg, c, mk(t, n), o, false)
			var tripErr atomic.Pointer[error]
			trip := run(t, TripRegistry(reg, c.Algorithm, func(err error) { tripErr.CompareAndSwap(nil, &err) }), c, mk(t, n), o, true)
			if e := tripErr.Load(); e != nil {
				t.Errorf("state round trip: %v", *e)
			}
			for i := range first {
				if !slices.Equal(first[i].Tokens, again[i].Tokens) || !slices.Equal(first[i].By, again[i].By) {
					t.Errorf("request %d: same seeds, different output:\n %v %v\n %v %v", i, first[i].Tokens, first[i].By, again[i].Tokens, again[i].By)
				}
				if !slices.Equal(first[i].Tokens, trip[i].Tokens) || !slices.Equal(first[i].By, trip[i].By) {
					t.Errorf("request %d: output changed when the state made a binary round trip on every hand-off:\n %v %v\n %v %v", i, first[i].Tokens, first[i].By, trip[i].Tokens, trip[i].By)
				}
			}
			cancelMidHandoff(t, reg, c, mk(t, n), o)
			replicas(t, reg, c, mk, n, o, first)
		})
	}
}

// run serves every prompt concurrently and checks counts and attribution.
func run(t *testing.T, reg *route.Registry, c Case, es []engine.Engine, o Options, wrapped bool) []stream.Result {
	t.Helper()
	r := newRouter(t, reg, c, es, nil, o)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	res := make([]stream.Result, len(o.Prompts))
	errs := make([]error, len(o.Prompts))
	var wg sync.WaitGroup
	for i, p := range o.Prompts {
		s, err := r.Submit(ctx, p, params(i, o))
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		wg.Go(func() { res[i], errs[i] = s.Wait(ctx) })
	}
	wg.Wait()
	total := 0
	for i, x := range res {
		if errs[i] != nil {
			t.Fatalf("request %d (wrapped %v): %v (a deadlock if the deadline passed)", i, wrapped, errs[i])
		}
		if len(x.Tokens) != o.MaxTokens || len(x.By) != len(x.Tokens) {
			t.Fatalf("request %d: %d tokens, %d owners, want %d of each", i, len(x.Tokens), len(x.By), o.MaxTokens)
		}
		for _, b := range x.By {
			if b < 0 || int(b) >= len(es) {
				t.Fatalf("request %d: token attributed to model %d of %d", i, b, len(es))
			}
		}
		total += len(x.Tokens)
	}
	committed := uint64(0)
	for _, s := range r.SubServers() {
		committed += s.Stats().Tokens
	}
	if committed != uint64(total) {
		t.Fatalf("sub-servers committed %d tokens, clients received %d", committed, total)
	}
	WaitIdle(t, r)
	return res
}

// cancelMidHandoff cancels every request as soon as a hand-off between
// models has been observed (or the first token arrived, for algorithms that
// never hand off) and checks that nothing stays held.
func cancelMidHandoff(t *testing.T, reg *route.Registry, c Case, es []engine.Engine, o Options) {
	t.Helper()
	w := &watch{moved: make(chan struct{})}
	r := newRouter(t, reg, c, es, w, o)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	var streams []*stream.Stream
	for i, p := range o.Prompts {
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		s, err := r.Submit(cctx, p, params(i, o))
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		streams = append(streams, s)
		if i%2 == 1 {
			continue // odd requests are cancelled by closing their stream
		}
		go func() {
			select {
			case <-w.moved:
			case <-ctx.Done():
			}
			ccancel()
		}()
	}
	var ch stream.Chunk
	for !w.hasMoved() && streams[0].Recv(ctx, &ch) == nil && !ch.Done {
	}
	w.mark()
	for i, s := range streams {
		if i%2 == 1 {
			s.Close()
		}
	}
	WaitIdle(t, r)
}

// replicas runs the prompts on two replicas of every model and loses a
// second replica in its first step, while it holds requests: every request
// completes, with the output of the run on one replica each (first).
func replicas(t *testing.T, reg *route.Registry, c Case, mk Engines, n int, o Options, first []stream.Result) {
	t.Helper()
	g := &gate{entered: make(chan int, 1), release: make(chan struct{})}
	cfg := deploy.Config{Models: models(mk(t, n)), Algorithm: c.Algorithm, Params: c.Params, Registry: reg, PlaceSeed: 5}
	for i, e := range mk(t, n) {
		cfg.Models[i].Replicas = []engine.Engine{g.wrap(e, i)}
	}
	if o.Bus != nil {
		cfg.Bus, cfg.CloseBus = o.Bus(t), true
	}
	r, err := deploy.New(cfg)
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	streams := make([]*stream.Stream, len(o.Prompts))
	for i, p := range o.Prompts {
		if streams[i], err = r.Submit(ctx, p, params(i, o)); err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	victim := testkit.Receive(t, g.entered, o.Timeout)
	close(g.release)
	if err := r.StopReplica(ctx, victim, 1); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		res, err := s.Wait(ctx)
		if err != nil {
			t.Fatalf("replicas, replica 1 of model %d lost: request %d: %v", victim, i, err)
		}
		if !slices.Equal(res.Tokens, first[i].Tokens) || !slices.Equal(res.By, first[i].By) {
			t.Errorf("replicas, replica 1 of model %d lost: request %d differs from one replica each:\n %v %v\n %v %v",
				victim, i, res.Tokens, res.By, first[i].Tokens, first[i].By)
		}
	}
	WaitIdle(t, r)
}

// gate holds the engines of second replicas in their first step: the
// first to step (the victim) until its loop ends, the others until release
// is closed.
type gate struct {
	once    sync.Once
	entered chan int // the victim's model
	release chan struct{}
}

// wrap returns e, of model m, behind the gate (an Embedder stays one).
func (g *gate) wrap(e engine.Engine, m int) engine.Engine {
	h := &held{Engine: e, g: g, model: m}
	if em, ok := e.(engine.Embedder); ok {
		return heldEmbedder{h, em}
	}
	return h
}

// held is an engine behind a gate.
type held struct {
	engine.Engine
	g     *gate
	model int
	done  atomic.Bool
}

// Step waits at the gate on the first call: the victim until ctx ends,
// the others until the gate opens.
func (h *held) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	if !h.done.Swap(true) {
		victim := false
		h.g.once.Do(func() { victim = true; h.g.entered <- h.model })
		if victim {
			<-ctx.Done()
			return ctx.Err()
		}
		select {
		case <-h.g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Engine.Step(ctx, in, out)
}

// Unwrap returns the engine behind the gate.
func (h *held) Unwrap() engine.Engine { return h.Engine }

// heldEmbedder is a held engine that embeds tokens.
type heldEmbedder struct {
	*held
	engine.Embedder
}

// Step is the gated step.
func (h heldEmbedder) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	return h.held.Step(ctx, in, out)
}

// Info is the engine's.
func (h heldEmbedder) Info() engine.Info { return h.held.Info() }

// watch notes the first hand-off between models: moved is closed then.
type watch struct {
	once  sync.Once
	moved chan struct{}
}

// mark closes moved, once.
func (w *watch) mark() { w.once.Do(func() { close(w.moved) }) }

// hasMoved says whether moved is closed.
func (w *watch) hasMoved() bool {
	select {
	case <-w.moved:
		return true
	default:
		return false
	}
}

// Step ignores steps.
func (w *watch) Step(int, int, int, time.Duration) {}

// Routed notes requests that left the model.
func (w *watch) Routed(model int, moved []int) {
	for i, n := range moved {
		if i != model && n > 0 {
			w.mark()
		}
	}
}

func params(i int, o Options) route.Params {
	return route.Params{MaxTokens: o.MaxTokens, IgnoreEOS: true, Seed: uint64(1000 + i)}
}

func newRouter(t *testing.T, reg *route.Registry, c Case, es []engine.Engine, obs *watch, o Options) *deploy.Deployment {
	t.Helper()
	cfg := deploy.Config{Models: models(es), Algorithm: c.Algorithm, Params: c.Params, Registry: reg}
	if o.Bus != nil {
		cfg.Bus = o.Bus(t)
	}
	if obs != nil {
		cfg.Observer = obs
	}
	r, err := deploy.New(cfg)
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	return r
}

// WaitIdle waits until r has no request in flight and no sub-server holds
// a record, a pending hand-off or a KV sequence, and fails t when that
// takes over 10 s.
func WaitIdle(t *testing.T, r *deploy.Deployment) {
	t.Helper()
	testkit.Until(t, 10*time.Second, func() error {
		var held []string
		for i, s := range r.SubServers() {
			if st := s.Stats(); st.Records+st.Runnable+st.Pending+st.KVSequences != 0 {
				held = append(held, fmt.Sprintf("model %d: %+v", i, st))
			}
		}
		if n := r.Active(); len(held) != 0 || n != 0 {
			return fmt.Errorf("requests still held: %d active; %s", n, strings.Join(held, "; "))
		}
		return nil
	})
}

// Trip wraps an algorithm so every hand-off carries its state through
// MarshalBinary and UnmarshalBinary (into a fresh NewState), checking the
// re-encoding is identical. Errors go to fail.
type Trip struct {
	route.Wrapper
	// Fail receives round-trip errors.
	Fail func(error)
}

// Send delegates, then round-trips the state.
func (w *Trip) Send(r *route.Request, m *route.Message) {
	w.Wrapper.Send(r, m)
	if m.State == nil {
		return
	}
	b, err := m.State.MarshalBinary()
	if err != nil {
		w.Fail(fmt.Errorf("marshal state: %w", err))
		return
	}
	fresh := w.NewState(r)
	if err := fresh.UnmarshalBinary(b); err != nil {
		w.Fail(fmt.Errorf("unmarshal state: %w", err))
		return
	}
	if b2, err := fresh.MarshalBinary(); err != nil || !slices.Equal(b, b2) {
		w.Fail(fmt.Errorf("state re-encodes differently: %x then %x (%v)", b, b2, err))
	}
	m.State = fresh
}

// TripRegistry returns a registry where name builds base's algorithm
// wrapped in Trip.
func TripRegistry(base *route.Registry, name string, fail func(error)) *route.Registry {
	return route.Wrap(base, name, func(a route.Algorithm) route.Algorithm {
		return &Trip{Wrapper: route.Wrapper{Inner: a}, Fail: fail}
	})
}

// WriteWeights writes random router weights for hidden size h into dir
// (r2r.safetensors, citer.safetensors, co-llm.safetensors) and returns the
// file of each algorithm. bias shifts every router's output logit (0 gives
// routing probabilities around one half).
func WriteWeights(dir string, h int, seed uint64, bias float32) (map[string]string, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	mat := func(rows, cols int) nn.Tensor {
		t := nn.Tensor{Shape: []int{rows, cols}, Data: make([]float32, rows*cols)}
		for i := range t.Data {
			t.Data[i] = float32(rng.NormFloat64() / math.Sqrt(float64(max(cols, 1))))
		}
		return t
	}
	vec := func(n int, v float32) nn.Tensor {
		t := nn.Tensor{Shape: []int{n}, Data: make([]float32, n)}
		for i := range t.Data {
			t.Data[i] = v + float32(rng.NormFloat64())*0.01
		}
		return t
	}
	const d = 32
	citer := map[string]nn.Tensor{
		"mlp.0.weight": mat(d, h), "mlp.0.bias": vec(d, 0),
		"mlp.1.weight": mat(1, d), "mlp.1.bias": vec(1, -bias),
	}
	for i := range citer["mlp.1.weight"].Data {
		citer["mlp.1.weight"].Data[i] *= 4
	}
	colm := map[string]nn.Tensor{"defer.weight": mat(1, h), "defer.bias": vec(1, bias)}
	for i := range colm["defer.weight"].Data {
		colm["defer.weight"].Data[i] *= 3
	}
	out := map[string]string{}
	for name, ts := range map[string]map[string]nn.Tensor{"citer": citer, "co-llm": colm} {
		path := filepath.Join(dir, name+".safetensors")
		meta := map[string]string{"hidden_size": fmt.Sprint(h)}
		if err := nn.Save(path, ts, meta); err != nil {
			return nil, err
		}
		out[name] = path
	}
	r2r, meta := R2RWeights(h, seed, bias)
	out["r2r"] = filepath.Join(dir, "r2r.safetensors")
	if err := nn.Save(out["r2r"], r2r, meta); err != nil {
		return nil, err
	}
	return out, nil
}

// CountRouted runs one 32-request step of a simulated small model through
// a's Route (a is the small model's instance of a router algorithm) and
// counts the requests sent to the large model. It fails t when a routed
// token is kept. batchEqualsAlone reports whether each request's decision
// in the batch equals its decision when routed alone. With hidden false,
// the first request's hidden state is removed, as from an engine that
// could not provide it.
func CountRouted(t testing.TB, a route.Algorithm, hidden bool) (n int, batchEqualsAlone bool) {
	t.Helper()
	e := sim.New(sim.Config{Seed: 4, VocabSize: 512})
	in := make([]engine.Input, 32)
	reqs := make([]*route.Request, 32)
	var want engine.Want
	if w, ok := a.(route.Wanter); ok {
		want = w.Want(0, nil)
	}
	for i := range in {
		in[i] = engine.Input{Seq: engine.SeqID(i + 1), Tokens: []int32{1, int32(i + 3)}, Want: want}
		reqs[i] = &route.Request{ID: uint64(i)}
	}
	out := make([]engine.Output, 32)
	if err := e.Step(context.Background(), in, out); err != nil {
		t.Fatal(err)
	}
	if !hidden {
		out[0].Hidden = nil
	}
	dec := func(lo, hi int) []route.Decision {
		d := make([]route.Decision, hi-lo)
		for i := range d {
			d[i] = route.Decision{Next: 0, Cut: -1, Token: out[lo+i].Token, Commit: true}
		}
		a.Route(&route.Step{Model: 0, Requests: reqs[lo:hi], Outputs: out[lo:hi]}, d)
		return d
	}
	batchEqualsAlone = true
	for i, d := range dec(0, 32) {
		if d.Next == 1 {
			n++
			if d.Token != route.NoToken {
				t.Fatalf("routed token kept: %+v", d)
			}
		}
		batchEqualsAlone = batchEqualsAlone && dec(i, i+1)[0] == d
	}
	return n, batchEqualsAlone
}
