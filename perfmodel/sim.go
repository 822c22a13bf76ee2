package perfmodel

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// SimOptions controls the discrete-event simulation.
type SimOptions struct {
	// Seed seeds the random number generator; equal seeds give equal
	// results.
	Seed uint64
	// Warmup is the number of batch-completion events discarded first
	// (default 2000).
	Warmup int
	// Batches is the number of batches for the batch-means confidence
	// interval (default 20).
	Batches int
	// BatchEvents is the number of events per batch (default 5000).
	BatchEvents int
}

func (o SimOptions) withDefaults() SimOptions {
	if o.Warmup <= 0 {
		o.Warmup = 2000
	}
	if o.Batches < 2 {
		o.Batches = 20
	}
	if o.BatchEvents <= 0 {
		o.BatchEvents = 5000
	}
	return o
}

// Simulate runs a seeded discrete-event simulation of the same transition
// rules as the exact chain: time advances in quanta, the running batches
// with the least remaining time finish, each finishing request draws its
// destination from P and commits C, and idle models launch when sched.Decide
// (with each model's policy) says so, including any max-wait guard, with
// the placement's rule (under time-shared placement, TimeSharedRule) and
// steps as long as the model's step time for the launched batch. The
// result is the overall tokens per second with a 95% confidence interval
// from batch means.
func Simulate(ctx context.Context, m Model, n int, pols []Policy, o SimOptions) (Result, error) {
	o = o.withDefaults()
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	if n < 1 {
		return Result{}, fmt.Errorf("perfmodel: concurrency %d must be at least 1", n)
	}
	M := m.M()
	if len(pols) != M {
		return Result{}, fmt.Errorf("perfmodel: %d policies for %d models", len(pols), M)
	}
	res := Result{N: n, B: policyThresholds(pols, n), Feasible: true, Method: MethodSimulation}
	env, err := newLaunchEnv(m, n, pols)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	cum := cumulativeRouting(m.P)
	s := make([]int, env.stateLen())
	ready := make([]time.Duration, M)
	wake := make([]time.Duration, M)
	s[0] = n
	var nowQ int64
	env.launchAll(s, -1, 0, ready, wake)

	meter := newBatchMeter(o)
	for ev := 0; ev < meter.total(); ev++ {
		if ev%8192 == 0 {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("perfmodel: simulation: %w", err)
			}
		}
		step := nextEventStep(s, wake, env.quantum, nowQ)
		if step == math.MaxInt64 {
			return res, fmt.Errorf("%w: simulation deadlocked at N=%d", ErrInfeasible, n)
		}
		nowQ += step
		now := time.Duration(nowQ) * env.quantum
		tok, fin := advanceBatches(s, int(step), now, ready, rng, cum, m.C)
		env.launchAll(s, fin, now, ready, wake)
		meter.add(ev, tok, float64(step)*m.delta())
	}
	meter.finish(&res)
	return res, nil
}

// cumulativeRouting returns the cumulative rows of routing matrix p, the
// last entry of each set to +Inf, for drawing destinations.
func cumulativeRouting(p [][]float64) [][]float64 {
	M := len(p)
	cum := make([][]float64, M)
	for i := range M {
		cum[i] = make([]float64, M)
		acc := 0.0
		for j, v := range p[i] {
			acc += v
			cum[i][j] = acc
		}
		cum[i][M-1] = math.Inf(1)
	}
	return cum
}

// nextEventStep returns the quanta until the next event in state s at time
// nowQ: the earliest batch completion or max-wait wake-up (math.MaxInt64 if
// there is none).
func nextEventStep(s []int, wake []time.Duration, quantum time.Duration, nowQ int64) int64 {
	step := int64(math.MaxInt64)
	for i := range wake {
		if s[3*i+1] > 0 {
			step = min(step, int64(s[3*i+2]))
		}
		if wake[i] >= 0 {
			w := int64(math.Ceil(float64(wake[i])/float64(quantum))) - nowQ
			step = min(step, max(w, 0))
		}
	}
	return step
}

// advanceBatches advances every running batch in s by step quanta; each
// batch that finishes routes its requests to destinations drawn from cum
// (marking newly non-empty queues ready at now). It returns the tokens
// committed (per c) and the last model that finished, or -1.
func advanceBatches(s []int, step int, now time.Duration, ready []time.Duration, rng *rand.Rand, cum, c [][]float64) (float64, int) {
	tok, fin := 0.0, -1
	for i := range cum {
		if s[3*i+1] == 0 {
			continue
		}
		s[3*i+2] -= step
		if s[3*i+2] > 0 {
			continue
		}
		fin = i
		for range s[3*i+1] {
			u := rng.Float64()
			j := 0
			for u >= cum[i][j] {
				j++
			}
			tok += c[i][j]
			if s[3*j] == 0 {
				ready[j] = now
			}
			s[3*j]++
		}
		s[3*i+1], s[3*i+2] = 0, 0
	}
	return tok, fin
}

// batchMeter accumulates a simulation's committed tokens and time per
// event, discarding the warm-up, and turns them into the throughput with a
// 95% batch-means confidence interval.
type batchMeter struct {
	o               SimOptions
	tokB, timeB     float64 // the current batch
	tokAll, timeAll float64
	means           []float64
}

// newBatchMeter returns a meter for options o (with defaults applied).
func newBatchMeter(o SimOptions) *batchMeter {
	return &batchMeter{o: o, means: make([]float64, 0, o.Batches)}
}

// total returns the number of events to simulate, warm-up included.
func (b *batchMeter) total() int { return b.o.Warmup + b.o.Batches*b.o.BatchEvents }

// add records event ev, which committed tok tokens over dt milliseconds.
func (b *batchMeter) add(ev int, tok, dt float64) {
	if ev < b.o.Warmup {
		return
	}
	b.tokB += tok
	b.timeB += dt
	b.tokAll += tok
	b.timeAll += dt
	if (ev-b.o.Warmup+1)%b.o.BatchEvents == 0 {
		b.means = append(b.means, b.tokB/b.timeB*1000)
		b.tokB, b.timeB = 0, 0
	}
}

// finish sets res's throughput, confidence interval and events.
func (b *batchMeter) finish(res *Result) {
	res.TokensPerSecond = b.tokAll / b.timeAll * 1000
	res.Events = b.o.Batches * b.o.BatchEvents
	mean, sd := 0.0, 0.0
	for _, x := range b.means {
		mean += x
	}
	mean /= float64(len(b.means))
	for _, x := range b.means {
		sd += (x - mean) * (x - mean)
	}
	sd = math.Sqrt(sd / float64(len(b.means)-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(b.means) - 1)}.Quantile(0.975)
	res.CIHalfWidth = t * sd / math.Sqrt(float64(len(b.means)))
}
