package perfmodel

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
)

// launchEnv applies the runtime's launch rule (sched.Decide) to a system
// state laid out as (k_i, b_i, r_i) at indices 3i, 3i+1, 3i+2, with r_i in
// time quanta; under time-shared placement the state has one more entry,
// s[3M], the queue of models waiting for the turn (encodeQueue). The exact
// chain and the simulator share it.
type launchEnv struct {
	pols      []Policy
	n         int
	quanta    [][]int // per model, per launched batch size 0..n
	p         [][]float64
	quantum   time.Duration
	lookahead bool
	shared    bool
	queue     []int // scratch for the waiting queue
}

func newLaunchEnv(m Model, n int, pols []Policy) (*launchEnv, error) {
	q, err := m.StepQuanta(n)
	if err != nil {
		return nil, err
	}
	e := &launchEnv{pols: pols, n: n, quanta: q, p: m.P, quantum: time.Duration(m.delta() * float64(time.Millisecond)),
		shared: m.timeShared()}
	for _, p := range pols {
		e.lookahead = e.lookahead || p.Lookahead
	}
	if e.lookahead && e.shared {
		return nil, errors.New("perfmodel: the lookahead rule is not defined for time-shared placement")
	}
	return e, nil
}

// stateLen returns the length of a state vector.
func (e *launchEnv) stateLen() int {
	if e.shared {
		return 3*len(e.quanta) + 1
	}
	return 3 * len(e.quanta)
}

// maxQuanta returns each model's longest step in quanta (for the codec).
func (e *launchEnv) maxQuanta() []int {
	out := make([]int, len(e.quanta))
	for i, q := range e.quanta {
		out[i] = slices.Max(q)
	}
	return out
}

// launch starts model i's step with every request in its queue.
func (e *launchEnv) launch(s []int, i int) {
	k := s[3*i]
	s[3*i+1], s[3*i], s[3*i+2] = k, 0, e.quanta[i][min(k, e.n)]
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

// launchAll applies the launch rule after an event: fin is the model whose
// step just ended (−1 for none: the start or a max-wait wake-up). ready,
// when non-nil, holds each model's ReadySince; wake, when non-nil,
// receives each waiting model's wake-up time (or -1).
func (e *launchEnv) launchAll(s []int, fin int, now time.Duration, ready, wake []time.Duration) {
	if e.shared {
		e.launchShared(s, fin, now, ready, wake)
		return
	}
	// Partitioned: every idle model whose decision says so launches, until
	// no further model launches (a launch can change what the others expect
	// to receive).
	for range e.quanta {
		launched := false
		for i := range e.pols {
			if e.decide(s, i, now, ready, wake) {
				e.launch(s, i)
				launched = true
			}
		}
		if !launched || !e.lookahead {
			return
		}
	}
}

// decide reports whether idle model i launches now, setting wake[i].
func (e *launchEnv) decide(s []int, i int, now time.Duration, ready, wake []time.Duration) bool {
	if wake != nil {
		wake[i] = -1
	}
	if s[3*i+1] != 0 || s[3*i] == 0 {
		return false
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
	d := e.pols[i].decide(st, now, inc, in)
	if !d.Launch && wake != nil && d.Wake {
		wake[i] = d.WakeAt
	}
	return d.Launch
}

// launchShared is TimeSharedRule: models that became eligible join the
// waiting queue (fin first, then in model order), and when no model runs
// the front of the queue launches.
func (e *launchEnv) launchShared(s []int, fin int, now time.Duration, ready, wake []time.Duration) {
	M := len(e.quanta)
	q := decodeQueue(s[3*M], M, e.queue[:0])
	running := false
	for i := range M {
		running = running || s[3*i+1] > 0
	}
	for k := -1; k < M; k++ {
		i := k
		switch {
		case k < 0 && fin < 0, k == fin:
			continue
		case k < 0:
			i = fin
		}
		if slices.Contains(q, i) {
			if wake != nil {
				wake[i] = -1
			}
			continue
		}
		if e.decide(s, i, now, ready, wake) {
			q = append(q, i)
		}
	}
	if !running && len(q) > 0 {
		e.launch(s, q[0])
		q = q[1:]
	}
	s[3*M] = encodeQueue(q, M)
	e.queue = q
}

// encodeQueue packs a queue of distinct model indices (front first) into
// one number: Σ_k (q_k + 1)·(M + 1)^k.
func encodeQueue(q []int, m int) int {
	x := 0
	for k := len(q) - 1; k >= 0; k-- {
		x = x*(m+1) + q[k] + 1
	}
	return x
}

// decodeQueue unpacks encodeQueue's number into dst.
func decodeQueue(x, m int, dst []int) []int {
	for ; x > 0; x /= m + 1 {
		dst = append(dst, x%(m+1)-1)
	}
	return dst
}

// queueRadix returns the number of queue codes of m models: (m+1)^m, or
// an error when it does not fit.
func queueRadix(m int) (uint64, error) {
	r := uint64(1)
	for range m {
		if r > (1<<62)/uint64(m+1) {
			return 0, fmt.Errorf("%w: the waiting queue of %d time-shared models does not fit 64 bits", ErrTooLarge, m)
		}
		r *= uint64(m + 1)
	}
	return r, nil
}
