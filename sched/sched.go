// Package sched holds TokenRouter's delayed-batching scheduler as pure
// decisions: given a sub-server's state and the current time it says whether
// to launch a step now and, if not, when to look again. The runtime
// (subserver), the throughput model's simulator (perfmodel) and golden tests
// all call the same Decide, so what the model predicts is what the runtime
// does.
package sched

import (
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

// Policy is one model's launch rule.
type Policy struct {
	// B is the threshold table.
	B Table
	// MaxWait launches anyway once the oldest runnable request has waited
	// this long, so no threshold can deadlock or starve. 0 disables the
	// guard (used to validate the throughput model, which has none).
	MaxWait time.Duration
	// Lookahead, when true, also launches below the threshold once waiting
	// for the next expected arrivals costs more request-time than it saves
	// (see LookaheadLaunch). The threshold still launches at or above B, so
	// B acts as an upper bound; set it to the concurrency for a pure
	// lookahead rule. Off by default.
	Lookahead bool
	// Step is this model's step latency, used by Lookahead.
	Step time.Duration
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
	// Incoming is the expected number of requests that arrive at this model
	// when the next upstream step that can route here completes; 0 when no
	// such step is running. Used only by Policy.Lookahead.
	Incoming float64
	// IncomingIn is the time from now until that upstream step completes.
	// Used only by Policy.Lookahead.
	IncomingIn time.Duration
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
// requests are runnable, when Policy.Lookahead is set and LookaheadLaunch
// says waiting does not pay, or when the oldest has waited MaxWait.
func Decide(p Policy, s State, now time.Duration) Decision {
	if s.Runnable <= 0 {
		return Decision{}
	}
	if s.Runnable >= p.B.At(s.Active) {
		return Decision{Launch: true}
	}
	if p.Lookahead && LookaheadLaunch(s.Runnable, s.Incoming, s.IncomingIn, p.Step) {
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

// LookaheadLaunch is the expected-wait rule. With k requests runnable on an
// idle model whose step takes step, and incoming requests expected to arrive
// after a wait h, launching now delays the arrivals by step − h (they miss
// this batch and wait for it to finish) while waiting delays the k runnable
// requests by h. It reports whether to launch now: when nothing is expected
// (incoming ≤ 0), when the arrival comes no sooner than a whole step, or when
// k·h ≥ incoming·(step − h).
func LookaheadLaunch(k int, incoming float64, h, step time.Duration) bool {
	if k <= 0 {
		return false
	}
	if incoming <= 0 || h >= step {
		return true
	}
	if h < 0 {
		h = 0
	}
	return float64(k)*float64(h) >= incoming*float64(step-h)
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
