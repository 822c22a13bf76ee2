package perfmodel

import (
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
)

func TestLookaheadLaunch(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		k        int
		incoming float64
		h, step  time.Duration
		want     bool
	}{
		{0, 1, ms, 28 * ms, false},     // nothing to run
		{1, 0, ms, 28 * ms, true},      // nothing expected: launch
		{1, 1, 28 * ms, 28 * ms, true}, // arrival no sooner than a step
		{1, 1.05, 6 * ms, 28 * ms, false},
		{3, 0.35, 6 * ms, 28 * ms, true},    // 18 ≥ 0.35·22
		{2, 0.7, 6 * ms, 28 * ms, false},    // 12 < 15.4: wait
		{1, 3, 2 * ms, 6 * ms, false},       // 2 < 12
		{2, 1, 3 * ms, 6 * ms, true},        // 6 ≥ 3
		{1, 1, 3 * ms, 6 * ms, true},        // tie launches
		{1, 1, -time.Second, 6 * ms, false}, // negative wait clamps to 0
	}
	for _, c := range cases {
		if got := LookaheadLaunch(c.k, c.incoming, c.h, c.step); got != c.want {
			t.Errorf("LookaheadLaunch(%d, %v, %v, %v) = %v, want %v", c.k, c.incoming, c.h, c.step, got, c.want)
		}
	}
}

func TestDecideLookahead(t *testing.T) {
	ms := time.Millisecond
	p := Policy{Policy: sched.Policy{B: sched.Static(4)}, Step: 28 * ms}
	s := sched.State{Runnable: 3, Active: 4}
	// Off by default: the threshold alone decides.
	if d := p.decide(s, 0, 0.35, 6*ms); d.Launch {
		t.Errorf("lookahead off: launched below the threshold")
	}
	p.Lookahead = true
	if d := p.decide(s, 0, 0.35, 6*ms); !d.Launch {
		t.Errorf("lookahead on, 3·6 ≥ 0.35·22: want launch")
	}
	s.Runnable = 1
	if d := p.decide(s, 0, 1.05, 6*ms); d.Launch || d.Wake {
		t.Errorf("lookahead on, 1·6 < 1.05·22, no max-wait: %+v, want wait without wake", d)
	}
	// The threshold still launches regardless of the lookahead.
	s.Runnable = 4
	if d := p.decide(s, 0, 1.05, 6*ms); !d.Launch {
		t.Errorf("at the threshold: want launch")
	}
	// The max-wait guard still applies while the lookahead waits.
	p.MaxWait = 5 * ms
	s = sched.State{Runnable: 1, Active: 4, ReadySince: 10 * ms}
	if d := p.decide(s, 12*ms, 1.05, 6*ms); d.Launch || !d.Wake || d.WakeAt != 15*ms {
		t.Errorf("waiting under max-wait: %+v, want wake at 15ms", d)
	}
	if d := p.decide(s, 15*ms, 1.05, 6*ms); !d.Launch {
		t.Errorf("max-wait reached: want launch")
	}
}
