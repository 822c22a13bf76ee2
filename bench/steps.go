package bench

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// stepShape is one step's shape as a sub-server reports it: the requests
// in the batch and the tokens they appended.
type stepShape struct{ batch, appended int }

// StepTally is a subserver.Observer that counts every model's steps by
// shape and sums their measured time, so that a run's steps can be priced
// on a calibrated curve afterwards (StepTally.OverCurve): how much slower
// or faster the engines stepped during the run than when they were
// calibrated.
type StepTally struct {
	mu     sync.Mutex
	shapes []map[stepShape]int
	nanos  []time.Duration
}

// Step counts one step.
func (t *StepTally) Step(model, batch, appended int, d time.Duration) {
	if model < 0 || batch <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grow(model)
	t.shapes[model][stepShape{batch, appended}]++
	t.nanos[model] += d
}

// Routed ignores hand-offs.
func (t *StepTally) Routed(int, []int) {}

// Add merges another tally's steps into t.
func (t *StepTally) Add(o *StepTally) {
	if o == nil || o == t {
		return
	}
	o.mu.Lock()
	shapes, nanos := make([]map[stepShape]int, len(o.shapes)), slices.Clone(o.nanos)
	for m := range o.shapes {
		shapes[m] = maps.Clone(o.shapes[m])
	}
	o.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	for m := range shapes {
		t.grow(m)
		for s, n := range shapes[m] {
			t.shapes[m][s] += n
		}
		t.nanos[m] += nanos[m]
	}
}

// grow makes room for model m; t.mu is held.
func (t *StepTally) grow(m int) {
	for len(t.shapes) <= m {
		t.shapes, t.nanos = append(t.shapes, map[stepShape]int{}), append(t.nanos, 0)
	}
}

// Steps returns the number of steps counted for model i.
func (t *StepTally) Steps(i int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < 0 || i >= len(t.shapes) {
		return 0
	}
	n := 0
	for _, c := range t.shapes[i] {
		n += c
	}
	return n
}

// OverCurve returns, per model of m, the measured time of its counted
// steps over what m's step curve (perfmodel.Model.Curve, at the model's
// mean context) gives for the same steps; 0 for a model without steps.
// When only one model stepped, nothing stepped beside it: its steps are
// priced without the interference of partitioned placement, as the
// one-model prediction (perfmodel.Alone) prices them.
func (t *StepTally) OverCurve(m perfmodel.Model) ([]float64, error) {
	x, err := m.Extends()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if stepped := slices.IndexFunc(t.shapes, func(s map[stepShape]int) bool { return len(s) > 0 }); stepped >= 0 &&
		!slices.ContainsFunc(t.shapes[stepped+1:], func(s map[stepShape]int) bool { return len(s) > 0 }) {
		m.Interference = nil
	}
	out := make([]float64, m.M())
	for i := range out {
		if i >= len(t.shapes) {
			continue
		}
		c, ctx := m.Curve(i), m.StepContext(i, x)
		want := 0.0
		for s, n := range t.shapes[i] {
			want += float64(n) * c.At(s.batch, float64(max(s.appended-s.batch, 0)), ctx)
		}
		if want > 0 {
			out[i] = t.nanos[i].Seconds() * 1000 / want
		}
	}
	return out, nil
}

// Observers forwards steps and hand-offs to every observer that is
// set.
type Observers []subserver.Observer

// Step forwards a step.
func (o Observers) Step(model, batch, appended int, d time.Duration) {
	for _, x := range o {
		if x != nil {
			x.Step(model, batch, appended, d)
		}
	}
}

// Routed forwards hand-offs.
func (o Observers) Routed(model int, moved []int) {
	for _, x := range o {
		if x != nil {
			x.Routed(model, moved)
		}
	}
}
