// Package faults injects failures into engines and routing algorithms, so
// that the failure boundaries (DESIGN §8.1, §8.2) can be tested end to end,
// across processes included: a routing decision that panics, an engine
// step that panics, an engine step that never returns. Each fault fires
// for the requests whose sampling seed is the one it names, so one
// deployment serves normal requests beside the hostile ones.
//
// Faults are off unless a spec is given; the commands read it from the
// TOKENROUTER_FAULTS environment variable (Env), which child sub-server
// processes inherit. A spec is a comma-separated list of fault=seed:
//
//	route-panic=666,step-panic=667,step-hang=668,entry-panic=669
package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// Env is the environment variable the commands read a spec from.
const Env = "TOKENROUTER_FAULTS"

// Faults is a parsed spec: the sampling seed that triggers each fault (0:
// never). The zero value injects nothing.
type Faults struct {
	// RoutePanic: the algorithm's Route panics on a step holding a
	// request with this seed.
	RoutePanic uint64
	// EntryPanic: the algorithm's Entry (the front end's choice of a new
	// request's first model) panics for a request with this seed.
	EntryPanic uint64
	// StepPanic: the engine's Step panics on a batch holding such a
	// request; StepHang: it never returns (until Release is called).
	StepPanic, StepHang uint64

	mu       sync.Mutex
	release  chan struct{}
	released bool
}

// Parse parses a spec; the empty spec injects nothing.
func Parse(spec string) (*Faults, error) {
	f := &Faults{}
	for _, kv := range strings.Split(spec, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		seed, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil || seed == 0 {
			return nil, fmt.Errorf("faults: %q: want fault=seed with a positive seed", kv)
		}
		switch k {
		case "route-panic":
			f.RoutePanic = seed
		case "entry-panic":
			f.EntryPanic = seed
		case "step-panic":
			f.StepPanic = seed
		case "step-hang":
			f.StepHang = seed
		default:
			return nil, fmt.Errorf("faults: unknown fault %q (have route-panic, entry-panic, step-panic, step-hang)", k)
		}
	}
	return f, nil
}

// Active reports whether any fault is set.
func (f *Faults) Active() bool {
	return f != nil && (f.RoutePanic|f.EntryPanic|f.StepPanic|f.StepHang) != 0
}

// String is the spec.
func (f *Faults) String() string {
	var parts []string
	for _, p := range []struct {
		name string
		seed uint64
	}{{"route-panic", f.RoutePanic}, {"entry-panic", f.EntryPanic}, {"step-panic", f.StepPanic}, {"step-hang", f.StepHang}} {
		if p.seed != 0 {
			parts = append(parts, p.name+"="+strconv.FormatUint(p.seed, 10))
		}
	}
	return strings.Join(parts, ",")
}

// Release returns every step hung by StepHang, and makes later ones
// return at once (for tests that end).
func (f *Faults) Release() {
	ch := f.hung()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.released {
		f.released = true
		close(ch)
	}
}

// hung is the channel a hung step waits on.
func (f *Faults) hung() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release == nil {
		f.release = make(chan struct{})
	}
	return f.release
}

// Registry returns reg with every algorithm wrapped to inject RoutePanic
// and EntryPanic, or reg itself when both are off.
func (f *Faults) Registry(reg *route.Registry) *route.Registry {
	if f == nil || f.RoutePanic|f.EntryPanic == 0 {
		return reg
	}
	out := route.NewRegistry()
	for _, name := range reg.Names() {
		w := route.Wrap(reg, name, func(a route.Algorithm) route.Algorithm {
			return panicRoute{route.Wrapper{Inner: a}, f.RoutePanic, f.EntryPanic}
		})
		_ = out.Register(name, func(s route.Spec) (route.Algorithm, error) { return w.New(name, s) })
	}
	return out
}

// panicRoute panics in Route or Entry for a request with the seed.
type panicRoute struct {
	route.Wrapper
	seed, entry uint64
}

// Entry panics for a request with the entry seed.
func (p panicRoute) Entry(r *route.Request) int {
	if p.entry != 0 && r.Params.Sampling.Seed == p.entry {
		panic(fmt.Sprintf("fault injected: entry-panic for request %d", r.ID))
	}
	return p.Wrapper.Entry(r)
}

// Route panics when a request of the step has the seed.
func (p panicRoute) Route(s *route.Step, d []route.Decision) {
	for _, q := range s.Requests {
		if p.seed != 0 && q.Params.Sampling.Seed == p.seed {
			panic(fmt.Sprintf("fault injected: route-panic for request %d", q.ID))
		}
	}
	p.Wrapper.Route(s, d)
}

// Engine returns e wrapped to inject StepPanic and StepHang, or e itself
// when both are off.
func (f *Faults) Engine(e engine.Engine) engine.Engine {
	if f == nil || (f.StepPanic == 0 && f.StepHang == 0) {
		return e
	}
	return &faultyEngine{Engine: e, f: f}
}

// faultyEngine is an engine whose Step fails as its Faults say.
type faultyEngine struct {
	engine.Engine
	f *Faults
}

// Step panics or hangs when a request of the batch has the seed.
func (e *faultyEngine) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	for _, x := range in {
		switch x.Sampling.Seed {
		case 0:
		case e.f.StepPanic:
			panic(fmt.Sprintf("fault injected: step-panic for sequence %d", x.Seq))
		case e.f.StepHang:
			<-e.f.hung() // deliberately deaf to ctx: a step that never returns
		}
	}
	return e.Engine.Step(ctx, in, out)
}

// Unwrap returns the wrapped engine (engine.Capability).
func (e *faultyEngine) Unwrap() engine.Engine { return e.Engine }
