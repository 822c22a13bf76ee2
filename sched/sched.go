// Package sched holds TokenRouter's delayed-batching scheduler as pure
// decisions: given a sub-server's state and the current time it says whether
// to launch a step now and, if not, when to look again. The runtime
// (subserver), the throughput model's simulator (perfmodel) and golden tests
// all call the same Decide, so what the model predicts is what the runtime
// does.
package sched

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Table gives the launch threshold B as a function of the number of active
// requests n in the whole system: Table[n] for n < len(Table), the last entry
// beyond. A table of one entry is a static threshold. Entry 0 is used when no
// request is active.
type Table []int

// At returns the threshold for n active requests, clamped to [1, max(n,1)]:
// a model never waits for more requests than exist.
func (t Table) At(n int) int {
	b := 1
	switch {
	case len(t) == 0:
	case n < len(t):
		b = t[n]
	default:
		b = t[len(t)-1]
	}
	if n < 1 {
		n = 1
	}
	if b > n {
		b = n
	}
	if b < 1 {
		b = 1
	}
	return b
}

// Static returns a table holding the single threshold b.
func Static(b int) Table { return Table{b} }

// Policy is one model's launch rule. Its JSON form is how it travels to a
// sub-server in another process: {"b":[1,1,2,3],"max_wait":"50ms"}.
type Policy struct {
	// B is the threshold table.
	B Table
	// MaxWait launches anyway once the oldest runnable request has waited
	// this long, so no threshold can deadlock or starve. 0 disables the
	// guard (used to validate the throughput model, which has none).
	MaxWait time.Duration
}

// policyJSON is Policy's JSON form, with the wait as a Go duration.
type policyJSON struct {
	B       Table  `json:"b"`
	MaxWait string `json:"max_wait"`
}

// MarshalJSON encodes the policy with its wait as a duration string.
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{B: p.B, MaxWait: p.MaxWait.String()})
}

// UnmarshalJSON decodes what MarshalJSON wrote and checks it.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var j policyJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("sched: policy: %w", err)
	}
	var w time.Duration
	if j.MaxWait != "" {
		var err error
		if w, err = time.ParseDuration(j.MaxWait); err != nil || w < 0 {
			return fmt.Errorf("sched: policy: max_wait %q: want a non-negative duration", j.MaxWait)
		}
	}
	for _, v := range j.B {
		if v < 1 {
			return fmt.Errorf("sched: policy: threshold %d: must be at least 1", v)
		}
	}
	if len(j.B) == 0 {
		return errors.New("sched: policy: no threshold table")
	}
	*p = Policy{B: j.B, MaxWait: w}
	return nil
}

// Launch is a deployment's launch policy: automatic thresholds, or one
// threshold table per model, and the max-wait guard. It is built in one
// place (config.Preset.Launch, from a threshold spec such as "auto",
// "1,3" or "@plan.json") and handed to the runtime, which gives each
// model its Policy.
type Launch struct {
	// Auto asks the runtime to estimate the routing process and the step
	// latencies while it runs and to push the throughput model's tables
	// B*(n) (autotune); every model starts at B = 1.
	Auto bool
	// Tables holds one threshold table per model when Auto is false; a
	// model without one launches at B = 1.
	Tables []Table
	// MaxWait is every model's max-wait guard (0 disables it).
	MaxWait time.Duration
}

// Policy returns model i's starting policy.
func (l Launch) Policy(i int) Policy {
	p := Policy{B: Static(1), MaxWait: l.MaxWait}
	if !l.Auto && i >= 0 && i < len(l.Tables) && len(l.Tables[i]) > 0 {
		p.B = l.Tables[i]
	}
	return p
}

// State is what the decision looks at. Times are offsets from any fixed
// epoch (wall clock in the runtime, virtual time in the simulator).
type State struct {
	// Runnable is the number of requests ready to step on this model,
	// including those that stayed after the last step.
	Runnable int
	// Active is the number of requests active in the whole system.
	Active int
	// ReadySince is when the oldest runnable request became runnable.
	ReadySince time.Duration
}

// Decision is the scheduler's answer.
type Decision struct {
	// Launch is true when a step should start now with all runnable
	// requests.
	Launch bool
	// WakeAt, when Launch is false and Wake is true, is the time at which
	// the decision changes if nothing else happens (the max-wait deadline).
	WakeAt time.Duration
	// Wake reports whether WakeAt is set.
	Wake bool
}

// Decide is the delayed-batching rule: launch when at least B(active)
// requests are runnable, or when the oldest has waited MaxWait.
func Decide(p Policy, s State, now time.Duration) Decision {
	if s.Runnable <= 0 {
		return Decision{}
	}
	if s.Runnable >= p.B.At(s.Active) {
		return Decision{Launch: true}
	}
	if p.MaxWait <= 0 {
		return Decision{}
	}
	deadline := s.ReadySince + p.MaxWait
	if now >= deadline {
		return Decision{Launch: true}
	}
	return Decision{WakeAt: deadline, Wake: true}
}

// ParseStatic parses a comma-separated threshold vector such as "1,3" into
// one static table per model.
func ParseStatic(s string) ([]Table, error) {
	parts := strings.Split(s, ",")
	out := make([]Table, 0, len(parts))
	for _, p := range parts {
		b, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("sched: threshold %q: %w", p, err)
		}
		if b < 1 {
			return nil, fmt.Errorf("sched: threshold %d: must be at least 1", b)
		}
		out = append(out, Static(b))
	}
	return out, nil
}

// Feasible reports whether a static threshold vector can never deadlock a
// closed system of n requests without a max-wait guard: Σ(B_i − 1) < n.
func Feasible(b []int, n int) bool {
	sum := 0
	for _, x := range b {
		sum += x - 1
	}
	return sum < n
}
