// Package timeshare runs the engines of one deployment time-shared: they
// take turns to step, one step at a time, each step free to use every core.
// Scheduling stays asynchronous (each sub-server still decides its own
// launches, with delayed batching); only execution is serialised.
//
// A Gate admits one step at a time. Each engine joins it once (Join) and
// Wrap puts the engine behind its membership: Step waits at the gate, runs,
// and hands the gate on. Which waiting step runs next is one rule, Next:
// the first to arrive.
package timeshare

import (
	"context"
	"fmt"
	"sync"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Waiter is a step waiting at the gate, as the rule Next sees it.
type Waiter struct {
	// Model is the index its member joined with (the engine's model).
	Model int
	// Arrival numbers the arrivals at the gate, from 1.
	Arrival uint64
}

// Next is the rule that picks which waiting step runs when the gate comes
// free: the index in waiting (in arrival order, never empty) of the step
// to run. It is first come, first served.
func Next(waiting []Waiter) int { return 0 }

// Gate admits one step at a time. The zero value is not usable; call New.
type Gate struct {
	mu      sync.Mutex
	busy    bool
	queue   []*Member // waiting, in arrival order
	view    []Waiter  // Next's argument, reused
	arrived uint64
}

// New returns an open gate.
func New() *Gate { return &Gate{} }

// Member is one engine's membership of a gate. Like the engine, it is used
// by one goroutine at a time.
type Member struct {
	g       *Gate
	model   int
	arrival uint64
	ready   chan struct{} // the gate was handed to this member
}

// Join adds a member for model's engine.
func (g *Gate) Join(model int) *Member {
	return &Member{g: g, model: model, ready: make(chan struct{}, 1)}
}

// Acquire waits until the gate admits m, or ctx ends (then m holds
// nothing and Acquire returns ctx's error).
func (m *Member) Acquire(ctx context.Context) error {
	g := m.g
	g.mu.Lock()
	g.arrived++
	m.arrival = g.arrived
	if !g.busy && len(g.queue) == 0 {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	g.queue = append(g.queue, m)
	g.mu.Unlock()
	select {
	case <-m.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	for i, w := range g.queue {
		if w == m {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			g.mu.Unlock()
			return fmt.Errorf("timeshare: waiting for the gate: %w", ctx.Err())
		}
	}
	g.mu.Unlock()
	// Handed the gate as ctx ended: pass it on.
	<-m.ready
	m.Release()
	return fmt.Errorf("timeshare: waiting for the gate: %w", ctx.Err())
}

// Release hands the gate to the step Next picks, or opens it.
func (m *Member) Release() {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.busy = false
		return
	}
	g.view = g.view[:0]
	for _, w := range g.queue {
		g.view = append(g.view, Waiter{Model: w.model, Arrival: w.arrival})
	}
	i := Next(g.view)
	w := g.queue[i]
	g.queue = append(g.queue[:i], g.queue[i+1:]...)
	w.ready <- struct{}{} // buffered; a member waits for one hand-over at a time
}

// Engine is an engine behind a gate: it takes turns (engine.Turner), and a
// Step outside a turn waits for the gate. It keeps the wrapped engine's
// optional capabilities (engine.Embedder).
type Engine interface {
	engine.Engine
	engine.Turner
	// Unwrap returns the engine behind the gate.
	Unwrap() engine.Engine
}

// Wrap puts e behind m's gate. The result owns e (Close closes it).
func Wrap(e engine.Engine, m *Member) Engine {
	g := &gated{Engine: e, m: m}
	if em, ok := e.(engine.Embedder); ok {
		return gatedEmbedder{g, em}
	}
	return g
}

// gated is an engine behind a gate.
type gated struct {
	engine.Engine
	m      *Member
	inTurn bool // between Turn and its end
}

// Step steps the engine; outside a turn it waits for the gate first and
// releases it after.
func (g *gated) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	if g.inTurn {
		return g.Engine.Step(ctx, in, out)
	}
	if err := g.m.Acquire(ctx); err != nil {
		return err
	}
	defer g.m.Release()
	return g.Engine.Step(ctx, in, out)
}

// Turn waits for the gate and holds it until end is called: Steps in
// between pass straight through (engine.Turner).
func (g *gated) Turn(ctx context.Context) (end func(), err error) {
	if err := g.m.Acquire(ctx); err != nil {
		return nil, err
	}
	g.inTurn = true
	return g.endTurn, nil
}

// endTurn releases the gate Turn took.
func (g *gated) endTurn() {
	g.inTurn = false
	g.m.Release()
}

// Unwrap returns the engine behind the gate.
func (g *gated) Unwrap() engine.Engine { return g.Engine }

// gatedEmbedder is a gated engine that embeds tokens.
type gatedEmbedder struct {
	*gated
	em engine.Embedder
}

// Embed forwards to the wrapped engine.
func (g gatedEmbedder) Embed(tok int32, dst []float32) { g.em.Embed(tok, dst) }
