package perfmodel

import (
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
)

// launchEnv applies the runtime's launch rule (sched.Decide) to a system
// state laid out as (k_i, b_i, r_i) at indices 3i, 3i+1, 3i+2, with r_i in
// time quanta. The exact chain and the simulator share it.
type launchEnv struct {
	pols      []Policy
	n         int
	quanta    []int
	p         [][]float64
	quantum   time.Duration
	lookahead bool
}

func newLaunchEnv(m Model, n int, pols []Policy) *launchEnv {
	e := &launchEnv{pols: pols, n: n, quanta: m.Quanta(), p: m.P, quantum: time.Duration(m.delta() * float64(time.Millisecond))}
	for _, p := range pols {
		e.lookahead = e.lookahead || p.Lookahead
	}
	return e
}

// incoming returns the expected arrivals at idle model i from the next
// upstream completion and the quanta until it (0, 0 when none is running).
func (e *launchEnv) incoming(s []int, i int) (float64, int) {
	h := -1
	for j := range e.quanta {
		if j != i && s[3*j+1] > 0 && e.p[j][i] > 0 && (h < 0 || s[3*j+2] < h) {
			h = s[3*j+2]
		}
	}
	if h < 0 {
		return 0, 0
	}
	inc := 0.0
	for j := range e.quanta {
		if j != i && s[3*j+1] > 0 && e.p[j][i] > 0 && s[3*j+2] == h {
			inc += float64(s[3*j+1]) * e.p[j][i]
		}
	}
	return inc, h
}

// launchAll launches every idle model whose decision says so, repeating
// until no further model launches (a launch can change what the others
// expect to receive). ready, when non-nil, holds each model's ReadySince;
// wake, when non-nil, receives each waiting model's wake-up time (or -1).
func (e *launchEnv) launchAll(s []int, now time.Duration, ready, wake []time.Duration) {
	for range e.quanta {
		launched := false
		for i, pol := range e.pols {
			if s[3*i+1] != 0 || s[3*i] == 0 {
				if wake != nil {
					wake[i] = -1
				}
				continue
			}
			st := sched.State{Runnable: s[3*i], Active: e.n}
			if ready != nil {
				st.ReadySince = ready[i]
			}
			var inc float64
			var in time.Duration
			if e.lookahead {
				var h int
				inc, h = e.incoming(s, i)
				in = time.Duration(h) * e.quantum
			}
			d := pol.decide(st, now, inc, in)
			if d.Launch {
				s[3*i+1], s[3*i], s[3*i+2] = s[3*i], 0, e.quanta[i]
				launched = true
				if wake != nil {
					wake[i] = -1
				}
				continue
			}
			if wake != nil {
				wake[i] = -1
				if d.Wake {
					wake[i] = d.WakeAt
				}
			}
		}
		if !launched || !e.lookahead {
			return
		}
	}
}
