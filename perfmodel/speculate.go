package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Speculation describes speculative continuation at routed positions
// (DESIGN §6b) for an R2R-shaped model (Model.checkR2R): at a routed
// position the small model keeps its token t as an unresolved draft and
// decodes on, while the large model verifies; the large model's token t′
// equals t with probability Agree. Tokens after an unresolved position are
// drafts; a disagreement rolls back every token after its position and
// continues from t′; only committed tokens count toward throughput.
type Speculation struct {
	// Agree is the probability that the large model's token at a routed
	// position equals the small model's.
	Agree float64
	// Depth bounds the tokens a request may run past its oldest
	// unresolved routed position; at the bound it waits for the verify
	// result. Depth 0 is the system without speculation.
	Depth int
	// BusDelay is a one-way delay in milliseconds added to every message
	// between the models: each hand-off or verify job and each result.
	BusDelay float64
}

// Off reports whether sp is the system without speculation and without a
// bus delay, which the exact chain and Simulate describe.
func (sp Speculation) Off() bool { return sp.Depth == 0 && sp.BusDelay == 0 }

// validate checks sp's ranges.
func (sp Speculation) validate() error {
	if !(sp.Agree >= 0 && sp.Agree <= 1) {
		return fmt.Errorf("%w: agreement %v is not a probability", ErrInvalidModel, sp.Agree)
	}
	if sp.Depth < 0 {
		return fmt.Errorf("%w: speculation depth %d", ErrInvalidModel, sp.Depth)
	}
	if !(sp.BusDelay >= 0) || math.IsInf(sp.BusDelay, 0) {
		return fmt.Errorf("%w: bus delay %v ms", ErrInvalidModel, sp.BusDelay)
	}
	return nil
}

// checkR2R reports whether m has R2R's pattern, the one speculation
// applies to: two models, the small one routing to the large one with
// probability p and committing its token when it keeps the request, the
// large one always handing back and committing its token.
func (m Model) checkR2R() error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.M() != 2 || m.P[1][0] != 1 || m.C[0][0] != 1 || m.C[0][1] != 0 || m.C[1][0] != 1 {
		return fmt.Errorf("%w: speculation needs R2R's pattern (two models, P = [[1−p, p], [1, 0]], C = [[1, 0], [1, 0]]), got P = %v, C = %v", ErrNoFormula, m.P, m.C)
	}
	return nil
}

// SpecResult is a prediction of a speculative system: the throughput
// (committed tokens per second) and, from a simulation, what the
// speculation did.
type SpecResult struct {
	Result
	// Speculation is the setting predicted.
	Speculation Speculation
	// Drafted is the tokens the small model produced past an unresolved
	// routed position, per second of simulated time.
	Drafted float64
	// RolledBack is the tokens discarded by disagreements (drafts and
	// steps whose output a result made void), per second.
	RolledBack float64
	// Verified and Agreed count the routed positions the large model
	// checked and the ones it agreed with, per second.
	Verified, Agreed float64
}

// where a request of the speculative simulation is.
const (
	specQueued  = iota // queued at the small model
	specRunning        // in the small model's running batch
	specWaiting        // at the depth bound, outside the batch
)

// specReq is one request of the speculative simulation: the small model's
// view (tokens produced, committed prefix, unresolved routed positions)
// and the large model's (its epoch, the tokens it holds and its running
// and queued verify jobs). Positions are absolute.
type specReq struct {
	at        int
	stale     bool // the running small-model step's output is void
	length    int
	committed int
	unres     []int
	epoch0    int
	epoch1    int
	seen1     int
	run       []int // routed positions of the running verify job
	queued    []int // routed positions of the queued verify job
}

// specMsg is a message between the models: a verify request (toLarge)
// for the routed position pos, sent in the small model's epoch; or the
// result of a verify job of n positions, the last at pos, whose first
// disagreement is at index k (−1: none).
type specMsg struct {
	due     int64
	toLarge bool
	req     int
	epoch   int
	pos     int
	n, k    int
}

// specSim is the state of one speculative simulation.
type specSim struct {
	m       Model
	sp      Speculation
	env     *launchEnv
	rng     *rand.Rand
	reqs    []specReq
	queue   [2][]int // requests queued at the small model, jobs at the large
	running [2][]int
	end     [2]int64 // absolute end of each running step, in quanta
	msgs    []specMsg
	head    int
	delay   int64           // bus delay in quanta
	ctx1    float64         // mean context of a large-model row
	s       []int           // the launch environment's state vector
	ready   []time.Duration // when each queue last became non-empty
	now     int64           // quanta
	err     error           // a broken invariant
	// per event
	tok                             float64
	drafted, rolled, verified, kept float64
}

// SimulateSpeculative runs a seeded discrete-event simulation of the
// speculative system of m (R2R's pattern) at concurrency n under launch
// policies pols (one per model, as Simulate: sched.Decide with max-wait
// guards; the lookahead rule is not supported), following the rules of
// DESIGN §6b:
//
//   - A small-model step gives each request of its batch a token, routed
//     with probability p = P[0][1]. A routed token becomes an unresolved
//     draft and a verify message for its position goes to the large model
//     (after the bus delay). With no unresolved position, a non-routed
//     token commits at once.
//   - A request runs at most Depth tokens past its oldest unresolved
//     position; at the bound it waits outside the batch until a result
//     resolves that position.
//   - At the large model a verify message joins the request's queued
//     job, or starts a queued job when there is none (also when one is
//     running). A launch takes every queued job; a job of a request whose
//     suffix the large model has not seen is an extend of that suffix (its
//     step time takes the jobs' extends on batch-dependent curves).
//   - A finished job checks its positions in order, each agreeing with
//     probability Agree. At the first disagreement the large model drops
//     the request's queued job and any later verify message of it. The
//     result reaches the small model after the bus delay: agreement
//     commits up to the next unresolved position; disagreement commits the
//     prefix and the large model's token and discards every later token
//     (a step running for the request then produces nothing).
//
// Events are processed per time quantum: small-model completions, then
// large-model completions, then messages due, then launches. Throughput is
// committed tokens per second with a 95% batch-means interval over events
// (batch completions and message arrivals).
func SimulateSpeculative(ctx context.Context, m Model, n int, pols []Policy, sp Speculation, o SimOptions) (SpecResult, error) {
	o = o.withDefaults()
	if err := m.checkR2R(); err != nil {
		return SpecResult{}, err
	}
	if err := sp.validate(); err != nil {
		return SpecResult{}, err
	}
	if n < 1 {
		return SpecResult{}, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	if len(pols) != 2 {
		return SpecResult{}, fmt.Errorf("perfmodel: %d policies for 2 models", len(pols))
	}
	res := SpecResult{Result: Result{N: n, B: policyThresholds(pols, n), Feasible: true, Method: MethodSimulation}, Speculation: sp}
	env, err := newLaunchEnv(m, n, pols)
	if err != nil {
		return res, err
	}
	if env.lookahead {
		return res, fmt.Errorf("perfmodel: the lookahead rule is not modelled with speculation")
	}
	x, err := m.Extends()
	if err != nil {
		return res, err
	}
	sim := &specSim{m: m, sp: sp, env: env, rng: rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15)),
		reqs: make([]specReq, n), delay: int64(math.Round(sp.BusDelay / m.delta())), ctx1: m.StepContext(1, x),
		s: make([]int, env.stateLen()), ready: make([]time.Duration, 2)}
	for r := range n {
		sim.enqueue(0, r)
	}
	wake := make([]time.Duration, 2)
	sim.launch(-1, wake)
	meter := newBatchMeter(o)
	var drafted, rolled, verified, kept float64
	for ev := 0; ev < meter.total(); ev++ {
		if ev%8192 == 0 {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("perfmodel: speculative simulation: %w", err)
			}
		}
		next := sim.nextEvent(wake)
		if next == math.MaxInt64 {
			return res, fmt.Errorf("%w: speculative simulation deadlocked at N=%d", ErrInfeasible, n)
		}
		step := next - sim.now
		sim.now = next
		sim.tok, sim.drafted, sim.rolled, sim.verified, sim.kept = 0, 0, 0, 0, 0
		fin := -1
		for i := range 2 {
			if len(sim.running[i]) > 0 && sim.end[i] == sim.now {
				sim.complete(i)
				fin = i
			}
		}
		sim.deliver()
		if sim.err != nil {
			return res, sim.err
		}
		sim.launch(fin, wake)
		meter.add(ev, sim.tok, float64(step)*m.delta())
		if ev >= o.Warmup {
			drafted, rolled, verified, kept = drafted+sim.drafted, rolled+sim.rolled, verified+sim.verified, kept+sim.kept
		}
	}
	meter.finish(&res.Result)
	per := 1000 / meter.timeAll
	res.Drafted, res.RolledBack, res.Verified, res.Agreed = drafted*per, rolled*per, verified*per, kept*per
	return res, nil
}

// nextEvent returns the time of the next event in quanta: a step's end, a
// message's arrival or a max-wait wake-up.
func (sim *specSim) nextEvent(wake []time.Duration) int64 {
	next := int64(math.MaxInt64)
	for i := range 2 {
		if len(sim.running[i]) > 0 {
			next = min(next, sim.end[i])
		}
		if wake[i] >= 0 {
			w := int64(math.Ceil(float64(wake[i]) / float64(sim.env.quantum)))
			next = min(next, max(w, sim.now))
		}
	}
	if sim.head < len(sim.msgs) {
		next = min(next, sim.msgs[sim.head].due)
	}
	return next
}

// enqueue queues request r at the small model (i = 0) or its job at the
// large model (i = 1).
func (sim *specSim) enqueue(i, r int) {
	if len(sim.queue[i]) == 0 {
		sim.ready[i] = time.Duration(sim.now) * sim.env.quantum
	}
	sim.queue[i] = append(sim.queue[i], r)
	if i == 0 {
		sim.reqs[r].at = specQueued
	}
}

// send posts a message that arrives after the bus delay.
func (sim *specSim) send(msg specMsg) {
	if sim.head > 0 && 2*sim.head >= len(sim.msgs) {
		// Drop the delivered half: the queue stays as long as the
		// messages in flight.
		sim.msgs, sim.head = sim.msgs[:copy(sim.msgs, sim.msgs[sim.head:])], 0
	}
	msg.due = sim.now + sim.delay
	sim.msgs = append(sim.msgs, msg)
}

// complete ends model i's running step.
func (sim *specSim) complete(i int) {
	batch := sim.running[i]
	sim.running[i] = batch[:0]
	for _, r := range batch {
		if i == 0 {
			sim.decoded(r)
		} else {
			sim.verify(r)
		}
	}
}

// decoded applies a small-model step's token to request r.
func (sim *specSim) decoded(r int) {
	q := &sim.reqs[r]
	if q.stale {
		q.stale = false
		sim.rolled++
		sim.enqueue(0, r)
		return
	}
	pos := q.length
	q.length++
	if len(q.unres) > 0 {
		sim.drafted++
	}
	switch {
	case sim.rng.Float64() < sim.m.P[0][1]:
		q.unres = append(q.unres, pos)
		sim.send(specMsg{toLarge: true, req: r, epoch: q.epoch0, pos: pos})
	case len(q.unres) == 0:
		q.committed = q.length
		sim.tok++
	}
	if len(q.unres) > 0 && q.length-1-q.unres[0] >= sim.sp.Depth {
		q.at = specWaiting
		return
	}
	sim.enqueue(0, r)
}

// verify finishes request r's running verify job at the large model.
func (sim *specSim) verify(r int) {
	q := &sim.reqs[r]
	k := -1
	for j := range q.run {
		sim.verified++
		if sim.rng.Float64() >= sim.sp.Agree {
			k = j
			break
		}
		sim.kept++
	}
	sim.send(specMsg{req: r, pos: q.run[len(q.run)-1], n: len(q.run), k: k})
	if k < 0 {
		q.seen1 = q.run[len(q.run)-1]
	} else {
		q.seen1 = q.run[k]
		q.epoch1++
		if len(q.queued) > 0 {
			q.queued = q.queued[:0]
			sim.queue[1] = slices.DeleteFunc(sim.queue[1], func(x int) bool { return x == r })
		}
	}
	q.run = q.run[:0]
}

// deliver applies every message due now, in the order sent.
func (sim *specSim) deliver() {
	for sim.head < len(sim.msgs) && sim.msgs[sim.head].due <= sim.now {
		msg := sim.msgs[sim.head]
		sim.head++
		q := &sim.reqs[msg.req]
		switch {
		case msg.toLarge && msg.epoch != q.epoch1:
			// sent before the small model learnt of a rollback: void
		case msg.toLarge:
			if len(q.queued) == 0 {
				sim.enqueue(1, msg.req)
			}
			q.queued = append(q.queued, msg.pos)
		default:
			sim.resolve(msg)
		}
	}
}

// resolve applies a verify result at the small model.
func (sim *specSim) resolve(msg specMsg) {
	q := &sim.reqs[msg.req]
	if msg.n > len(q.unres) || q.unres[msg.n-1] != msg.pos {
		sim.err = fmt.Errorf("perfmodel: speculative simulation: a result for positions up to %d met unresolved positions %v", msg.pos, q.unres)
		return
	}
	if msg.k < 0 {
		q.unres = q.unres[:copy(q.unres, q.unres[msg.n:])]
		to := q.length
		if len(q.unres) > 0 {
			to = q.unres[0]
		}
		sim.tok += float64(to - q.committed)
		q.committed = to
	} else {
		pj := q.unres[msg.k]
		sim.rolled += float64(q.length - pj - 1)
		q.length, q.unres = pj+1, q.unres[:0]
		sim.tok += float64(q.length - q.committed)
		q.committed = q.length
		q.epoch0++
		if q.at == specRunning {
			q.stale = true
		}
	}
	if q.at == specWaiting && (len(q.unres) == 0 || q.length-1-q.unres[0] < sim.sp.Depth) {
		sim.enqueue(0, msg.req)
	}
}

// launch applies the launch rule (sched.Decide through the shared launch
// environment) and starts the steps it decides; fin is the model whose
// step just ended (−1: none).
func (sim *specSim) launch(fin int, wake []time.Duration) {
	s := sim.s
	for i := range 2 {
		s[3*i], s[3*i+1], s[3*i+2] = len(sim.queue[i]), len(sim.running[i]), 0
		if len(sim.running[i]) > 0 {
			s[3*i+2] = int(sim.end[i] - sim.now)
		}
	}
	sim.env.launchAll(s, fin, time.Duration(sim.now)*sim.env.quantum, sim.ready, wake)
	for i := range 2 {
		if s[3*i+1] == 0 || len(sim.running[i]) > 0 {
			continue
		}
		sim.running[i], sim.queue[i] = append(sim.running[i], sim.queue[i]...), sim.queue[i][:0]
		q := s[3*i+2]
		if i == 0 {
			for _, r := range sim.running[0] {
				sim.reqs[r].at = specRunning
			}
		} else {
			q = sim.startJobs()
		}
		sim.end[i] = sim.now + int64(q)
	}
}

// startJobs moves each launched request's queued job to running and
// returns the large model's step time in quanta for their extends.
func (sim *specSim) startJobs() int {
	rows := 0
	for _, r := range sim.running[1] {
		q := &sim.reqs[r]
		q.run, q.queued = append(q.run[:0], q.queued...), q.queued[:0]
		rows += max(1, q.run[len(q.run)-1]-q.seen1)
	}
	b := len(sim.running[1])
	ms := sim.m.Curve(1).At(b, float64(rows-b), sim.ctx1)
	return max(1, int(math.Round(ms/sim.m.delta())))
}

// Speculative predicts TokenRouter with speculation sp at concurrency n:
// the launch thresholds are b (nil: B* of the system without speculation,
// with the entries of fixed held, as the runtime's automatic thresholds)
// and a positive maxWait adds the runtime's max-wait guard. With
// speculation off (sp.Off) it is Planner.TokenRouter, exactly; otherwise
// SimulateSpeculative with the Planner's simulation options (the exact
// chain, EvaluateSpeculativeExact, checks it on small systems). An
// infeasible b gives a Result with Feasible false and no error.
func (pl *Planner) Speculative(ctx context.Context, m Model, n int, b []int, fixed map[int]int, maxWait time.Duration, sp Speculation) (SpecResult, error) {
	if sp.Off() {
		r, err := pl.TokenRouter(ctx, m, n, b, fixed, maxWait)
		return SpecResult{Result: r, Speculation: sp}, err
	}
	if err := m.checkR2R(); err != nil {
		return SpecResult{}, err
	}
	if b == nil {
		best, err := pl.Optimize(ctx, m, n, fixed)
		if err != nil {
			return SpecResult{}, err
		}
		b = best.B
	}
	if err := checkThresholds(m, n, b); err != nil {
		if errors.Is(err, ErrInfeasible) {
			return SpecResult{Result: Result{N: n, B: slices.Clone(b), Method: MethodNone}, Speculation: sp}, nil
		}
		return SpecResult{}, err
	}
	pols := staticPolicies(b)
	for i := range pols {
		pols[i].MaxWait = maxWait
	}
	r, err := SimulateSpeculative(ctx, m, n, pols, sp, pl.opts.Sim)
	if err != nil {
		return SpecResult{}, fmt.Errorf("perfmodel: speculative N=%d B=%v %+v: %w", n, b, sp, err)
	}
	return r, nil
}

// BestDepth predicts the speculative system at every depth 0..maxDepth
// (sp.Depth is ignored; the other arguments as Speculative) and returns
// the depth to run at together with every prediction, index = depth. The
// simulations share their seed, so their differences are mostly the
// depth's; the depth returned is the smallest whose throughput is within
// the best one's 95% confidence interval of it (depth 0, exact, has no
// interval): a deeper setting that the simulation cannot tell apart only
// rolls back more.
func (pl *Planner) BestDepth(ctx context.Context, m Model, n int, b []int, fixed map[int]int, maxWait time.Duration, sp Speculation, maxDepth int) (int, []SpecResult, error) {
	if maxDepth < 0 {
		return 0, nil, fmt.Errorf("perfmodel: maximum depth %d", maxDepth)
	}
	out := make([]SpecResult, 0, maxDepth+1)
	best := 0
	for d := 0; d <= maxDepth; d++ {
		sp.Depth = d
		r, err := pl.Speculative(ctx, m, n, b, fixed, maxWait, sp)
		if err != nil {
			return 0, nil, err
		}
		if !r.Feasible {
			return 0, nil, fmt.Errorf("%w: thresholds %v at N=%d", ErrInfeasible, r.B, n)
		}
		out = append(out, r)
		if r.TokensPerSecond > out[best].TokensPerSecond {
			best = d
		}
	}
	floor := out[best].TokensPerSecond - out[best].CIHalfWidth
	for d, r := range out {
		if r.TokensPerSecond >= floor {
			return d, out, nil
		}
	}
	return best, out, nil
}

// SpeculativeLimit returns the throughput, in tokens per second, that the
// speculative system of m (R2R's pattern) approaches at concurrency n when
// the depth never binds and the large model is never idle: every request
// is in every small-model step (time T0), and a verify result comes back
// K steps after its routed token, K = ⌈(2h + T1 + W)/T0⌉ with h the bus
// delay and W, the wait for the large model's running step to end,
// uniform on [0, T1). After each rollback a request commits tokens up to
// its first disagreeing routed position, J tokens with J geometric of mean
// 1/(p(1−a)), and loses the K steps its result took, so
//
//	throughput = 1000 · n / (T0 · (1 + p·(1−a)·E[K])).
//
// The plain system, for comparison, is n/(T0·(1 + p·r)) with r the mean
// hand-off in small-model steps (T1/T0 without contention). Step times are
// those of one-request steps, quantised. The limit holds where the large
// model is kept busy: on the paper's pair from agreement 0.5 on, at B* of
// the plain system, the simulation agrees within 1% for N = 4, 16, 64.
// Where the large model idles (little agreement: requests have no job
// there for a while after each rollback) the system is faster than the
// limit (8% at a = 0, N = 4); where a threshold above 1 holds verify
// jobs back (B = (1,3) with a 20 ms bus delay) it is slower.
func SpeculativeLimit(m Model, n int, sp Speculation) (float64, error) {
	if err := m.checkR2R(); err != nil {
		return 0, err
	}
	if err := sp.validate(); err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	q := m.Quanta()
	h := int(math.Round(sp.BusDelay / m.delta()))
	k := 0.0
	for w := range q[1] {
		k += math.Ceil(float64(2*h+q[1]+w) / float64(q[0]))
	}
	k /= float64(q[1])
	t0 := float64(q[0]) * m.delta()
	return 1000 * float64(n) / (t0 * (1 + m.P[0][1]*(1-sp.Agree)*k)), nil
}
