package loader

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
)

// PlaceOptions tune Place.
type PlaceOptions struct {
	// Cores is how many cores the deployment may use (0:
	// runtime.GOMAXPROCS(0)).
	Cores int
	// Choose decides "auto" from what was measured (nil: QuickRule). This
	// is where a prediction of the deployment's throughput under each
	// placement plugs in.
	Choose func(PlacementMeasurement) (config.Placement, string)
	// Timing sizes auto's measurement (zero: StepTiming's defaults).
	Timing StepTiming
}

// Placed is a deployment's models as a placement puts them on the machine.
type Placed struct {
	// Models are the descriptions to open: each model whose kind uses
	// cores has its thread count set.
	Models []config.Model
	// Placement is partitioned or time-shared, never auto.
	Placement config.Placement
	// Reason says how auto decided ("" when the placement was given).
	Reason string
	// Measurement is what auto measured (nil when it measured nothing).
	Measurement *PlacementMeasurement
}

// TimeShared reports whether the models' steps take turns
// (deploy.Config.TimeShared).
func (p Placed) TimeShared() bool { return p.Placement == config.TimeShared }

// PlacementMeasurement is what "auto" measured, for the models whose kind
// uses cores, in deployment order.
type PlacementMeasurement struct {
	// Models names them.
	Models []string
	// Alone[i] is model i's decode step alone on every core (as
	// time-shared runs it).
	Alone []time.Duration
	// Together[i] is its decode step on its share of the cores while every
	// model steps at once (as partitioned runs it).
	Together []time.Duration
	// Batch is the number of sequences per step.
	Batch int
	// Rounds is how many times both placements were measured, one after
	// the other; Alone and Together are each model's medians over them.
	Rounds int
}

// medians returns, per model, the median of its durations over rounds
// (rounds[r][i] is model i's in round r; the upper of the middle two for
// an even count).
func medians(rounds [][]time.Duration) []time.Duration {
	out := make([]time.Duration, len(rounds[0]))
	ds := make([]time.Duration, len(rounds))
	for i := range out {
		for r := range rounds {
			ds[r] = rounds[r][i]
		}
		slices.Sort(ds)
		out[i] = ds[len(ds)/2]
	}
	return out
}

// QuickRule decides auto by one step of each model: time-shared runs them
// one after another on every core (the sum of Alone), partitioned at once
// on their shares (the largest of Together). It chooses the quicker, and
// partitioned on a tie. It ignores how often each model steps and how
// batches form: a prediction of the whole deployment (PlaceOptions.Choose)
// knows better.
func QuickRule(m PlacementMeasurement) (config.Placement, string) {
	var shared, parted time.Duration
	for i := range m.Alone {
		shared += m.Alone[i]
		parted = max(parted, m.Together[i])
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	why := fmt.Sprintf("one decode step of each model at batch %d: %s in turn on every core (time-shared), %s at once on shares of the cores (partitioned)",
		m.Batch, ms(shared), ms(parted))
	if m.Rounds > 1 {
		why += fmt.Sprintf(", medians of %d rounds", m.Rounds)
	}
	if shared < parted {
		return config.TimeShared, why
	}
	return config.Partitioned, why
}

// Place puts a deployment's models on the machine: it resolves "auto" and
// gives each model whose kind uses cores its threads: time-shared, every
// core; partitioned, an even share of them per engine (at least one; each
// replica of a model runs an engine of its own); a model's own
// CPUs, as many threads as CPUs; a model's own Threads stay. Auto with no
// model using cores is partitioned (simulated steps only wait); otherwise
// it measures the models both ways (TimeSteps, in o.Timing's rounds) and
// lets o.Choose decide.
// An empty placement is auto.
func (ks Kinds) Place(ctx context.Context, ms []config.Model, p config.Placement, o PlaceOptions) (Placed, error) {
	if o.Cores <= 0 {
		o.Cores = runtime.GOMAXPROCS(0)
	}
	var users []int // models whose kind uses cores
	for i, m := range ms {
		k, err := ks.Kind(m.Engine)
		if err != nil {
			return Placed{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		if k.Cores {
			users = append(users, i)
		}
	}
	switch {
	case p == config.Partitioned || p == config.TimeShared:
		return Placed{Models: threads(ms, users, p, o.Cores), Placement: p}, nil
	case p != config.PlacementAuto && p != "":
		return Placed{}, fmt.Errorf("placement %q: want %s, %s or %s", p, config.Partitioned, config.TimeShared, config.PlacementAuto)
	case len(users) == 0:
		return Placed{Models: slices.Clone(ms), Placement: config.Partitioned, Reason: "no model computes on this machine's cores"}, nil
	}
	pick := func(all []config.Model) []config.Model {
		out := make([]config.Model, len(users))
		for j, i := range users {
			out[j] = all[i]
		}
		return out
	}
	meas := PlacementMeasurement{Batch: o.Timing.batch()}
	for _, m := range pick(ms) {
		meas.Models = append(meas.Models, m.Name)
	}
	var alone, together [][]time.Duration
	for range o.Timing.rounds() {
		a, err := ks.TimeSteps(ctx, pick(threads(ms, users, config.TimeShared, o.Cores)), false, o.Timing)
		if err != nil {
			return Placed{}, fmt.Errorf("placement auto: %w", err)
		}
		t, err := ks.TimeSteps(ctx, pick(threads(ms, users, config.Partitioned, o.Cores)), true, o.Timing)
		if err != nil {
			return Placed{}, fmt.Errorf("placement auto: %w", err)
		}
		alone, together = append(alone, a), append(together, t)
	}
	meas.Alone, meas.Together, meas.Rounds = medians(alone), medians(together), len(alone)
	choose := o.Choose
	if choose == nil {
		choose = QuickRule
	}
	chosen, why := choose(meas)
	if chosen != config.Partitioned && chosen != config.TimeShared {
		return Placed{}, fmt.Errorf("placement auto: the rule chose %q", chosen)
	}
	return Placed{Models: threads(ms, users, chosen, o.Cores), Placement: chosen, Reason: why, Measurement: &meas}, nil
}

// threads sets the thread counts a placement gives the models at users:
// partitioned, an even share per engine (a model's every replica is one).
func threads(ms []config.Model, users []int, p config.Placement, cores int) []config.Model {
	out := slices.Clone(ms)
	engines := 0
	for _, i := range users {
		engines += max(ms[i].Replicas, 1)
	}
	for _, i := range users {
		m := &out[i]
		switch {
		case m.Threads > 0:
		case len(m.CPUs) > 0:
			m.Threads = len(m.CPUs)
		case p == config.TimeShared:
			m.Threads = cores
		default:
			m.Threads = max(1, cores/engines)
		}
	}
	return out
}

// StepTiming sizes a step-time measurement.
type StepTiming struct {
	// Batch is the number of sequences per decode step (default 4).
	Batch int
	// PromptLen is the tokens each sequence holds before the timed steps
	// (default 16).
	PromptLen int
	// Steps is the number of timed steps per model (default 4); one
	// untimed step comes first.
	Steps int
	// Rounds is how many times Place's auto measures both placements, one
	// after the other, taking each model's median over the rounds
	// (default 3, odd): with one round, one slow moment of the machine
	// decided once (a time-shared step of 48.4 ms against 16.2 the run
	// before, and the choice against the rows the run then measured).
	Rounds int
	// Pin, if set, is called on the goroutine that steps model i (index in
	// the measured models) before its first step, and the function it
	// returns after its last (for a measurement that pins that goroutine's
	// thread, such as a one-thread engine's, which steps on its caller).
	Pin func(i int) (undo func(), err error)
}

func (t StepTiming) rounds() int {
	if t.Rounds <= 0 {
		return 3
	}
	return t.Rounds
}

func (t StepTiming) batch() int {
	if t.Batch <= 0 {
		return 4
	}
	return t.Batch
}

// TimeSteps measures the median decode step of each model (opened as
// described) at a batch of t.Batch sequences. Alone (together false), the
// models are opened and measured one at a time; together, all are open and
// step at once, each on its own goroutine, and every model keeps stepping
// until each has taken its t.Steps timed steps, so that each step measured
// overlaps the others' steps.
func (ks Kinds) TimeSteps(ctx context.Context, ms []config.Model, together bool, t StepTiming) ([]time.Duration, error) {
	if t.PromptLen <= 0 {
		t.PromptLen = 16
	}
	if t.Steps <= 0 {
		t.Steps = 4
	}
	t.Batch = t.batch()
	out := make([]time.Duration, len(ms))
	if !together {
		for i, m := range ms {
			d, err := ks.timeAlone(ctx, m, i, t)
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	}
	es := make([]engine.Engine, 0, len(ms))
	defer func() {
		for _, e := range es {
			_ = e.Close()
		}
	}()
	for _, m := range ms {
		e, err := ks.OpenEngine(ctx, m)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	var (
		wg    sync.WaitGroup
		short atomic.Int32 // models that have not taken t.Steps timed steps yet
		errs  = make([]error, len(es))
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	short.Store(int32(len(es)))
	start := make(chan struct{})
	for i, e := range es {
		wg.Go(func() {
			counted := false
			out[i], errs[i] = timeSteps(ctx, e, i, t, start, func(n int) bool {
				if n == t.Steps && !counted {
					counted = true
					short.Add(-1)
				}
				return n >= t.Steps && short.Load() == 0
			})
			if errs[i] != nil {
				cancel() // the others would wait for this model forever
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// timeAlone opens m and measures its step alone.
func (ks Kinds) timeAlone(ctx context.Context, m config.Model, i int, t StepTiming) (time.Duration, error) {
	e, err := ks.OpenEngine(ctx, m)
	if err != nil {
		return 0, err
	}
	defer e.Close()
	var d time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := make(chan struct{})
		close(start)
		d, err = timeSteps(ctx, e, i, t, start, func(n int) bool { return n >= t.Steps })
	}()
	<-done
	return d, err
}

// timeSteps fills t.Batch sequences of e with t.PromptLen tokens, waits
// for start, then decodes until enough(timed steps so far) and returns the
// median timed step. Sequences near the context's end are cut back to
// their prompts.
func timeSteps(ctx context.Context, e engine.Engine, i int, t StepTiming, start <-chan struct{}, enough func(int) bool) (time.Duration, error) {
	if t.Pin != nil {
		undo, err := t.Pin(i)
		if err != nil {
			return 0, err
		}
		defer undo()
	}
	info := e.Info()
	if t.PromptLen+2 > info.ContextLength {
		return 0, fmt.Errorf("model %s: context of %d tokens is too short to time steps", info.Name, info.ContextLength)
	}
	in := make([]engine.Input, t.Batch)
	out := make([]engine.Output, t.Batch)
	for s := range in {
		toks := make([]int32, t.PromptLen)
		for j := range toks {
			toks[j] = int32(3 + (s*31+j*7)%max(info.VocabSize-3, 1))
		}
		in[s] = engine.Input{Seq: engine.SeqID(s + 1), Tokens: toks}
	}
	if err := e.Step(ctx, in, out); err != nil {
		return 0, fmt.Errorf("model %s: %w", info.Name, err)
	}
	next := make([]int32, t.Batch)
	held := t.PromptLen
	var times []time.Duration
	<-start
	for n := -1; !enough(len(times)); n++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if held+1 > info.ContextLength {
			for s := range in {
				if err := e.Truncate(in[s].Seq, t.PromptLen); err != nil {
					return 0, fmt.Errorf("model %s: %w", info.Name, err)
				}
			}
			held = t.PromptLen
		}
		for s := range in {
			next[s] = out[s].Token
			in[s].Tokens = next[s : s+1]
		}
		t0 := time.Now()
		if err := e.Step(ctx, in, out); err != nil {
			return 0, fmt.Errorf("model %s: %w", info.Name, err)
		}
		held++
		if n >= 0 { // the first decode warms up
			times = append(times, time.Since(t0))
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}
