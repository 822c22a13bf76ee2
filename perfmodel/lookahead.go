package perfmodel

import (
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
)

// Policy is one model's launch rule in the model: the runtime's
// sched.Policy, optionally with the expected-wait lookahead rule, which
// only the model runs. The runtime does not know how many requests a
// running upstream step will send a model (it would need every peer to
// announce its step starts over the bus), so the rule stays here, where it
// bounds what a smarter launch rule could gain (docs/results/routing-throughput.md, "Beyond the
// paper").
type Policy struct {
	sched.Policy
	// Lookahead, when true, also launches below the threshold once waiting
	// for the next expected arrivals costs more request-time than it saves
	// (LookaheadLaunch). The threshold still launches at or above B, so B
	// acts as an upper bound.
	Lookahead bool
	// Step is this model's step latency, used by Lookahead.
	Step time.Duration
}

// decide is sched.Decide plus the lookahead rule: incoming requests are
// expected at this model in incomingIn.
func (p Policy) decide(s sched.State, now time.Duration, incoming float64, incomingIn time.Duration) sched.Decision {
	d := sched.Decide(p.Policy, s, now)
	if !d.Launch && p.Lookahead && s.Runnable > 0 && LookaheadLaunch(s.Runnable, incoming, incomingIn, p.Step) {
		return sched.Decision{Launch: true}
	}
	return d
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
