package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
)

// Interference is how much a deployment's models slow each other when
// they step at once on their own threads (partitioned placement).
type Interference struct {
	// Models names the models; Threads are their thread counts.
	Models  []string
	Threads []int
	// Pinned is true when each model's stepping thread was pinned to a CPU
	// of its own.
	Pinned bool
	// Batch is the number of sequences per decode step.
	Batch int
	// Alone[i] is model i's median decode step with no other model open;
	// Together[i] while every model steps at once.
	Alone, Together []time.Duration
}

// Slowdown is how much slower model i steps together than alone
// (0.1: 10% slower).
func (f Interference) Slowdown(i int) float64 {
	return float64(f.Together[i])/float64(f.Alone[i]) - 1
}

// MeasureInterference measures each model's decode step alone and with
// all of them stepping at once, with the models' own thread counts
// (loader.Kinds.TimeSteps; t.Pin is set here when pin is true). With pin,
// every model must run one thread, and model i's stepping thread is pinned
// to the i-th CPU this process may use: a one-thread engine steps on its
// caller, so that pins all its work.
func MeasureInterference(ctx context.Context, ks loader.Kinds, ms []config.Model, t loader.StepTiming, pin bool) (Interference, error) {
	f := Interference{Pinned: pin, Batch: max(t.Batch, 1)}
	if t.Batch <= 0 {
		f.Batch = 4 // StepTiming's default
	}
	for _, m := range ms {
		f.Models, f.Threads = append(f.Models, m.Name), append(f.Threads, m.Threads)
	}
	if pin {
		if slices.ContainsFunc(ms, func(m config.Model) bool { return m.Threads != 1 }) {
			return f, fmt.Errorf("bench: pinning needs one thread per model (threads %v): the engine's worker threads cannot be pinned from here", f.Threads)
		}
		cpus, err := CanPin(len(ms))
		if err != nil {
			return f, err
		}
		t.Pin = func(i int) (func(), error) { return pinThread(cpus[i]) }
	}
	var err error
	if f.Alone, err = ks.TimeSteps(ctx, ms, false, t); err != nil {
		return f, fmt.Errorf("bench: interference: %w", err)
	}
	if f.Together, err = ks.TimeSteps(ctx, ms, true, t); err != nil {
		return f, fmt.Errorf("bench: interference: %w", err)
	}
	return f, nil
}

// CanPin returns a CPU of its own for each of n one-thread models, or
// why there is none (not Linux, fewer CPUs).
func CanPin(n int) ([]int, error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(cpus) < n {
		return nil, fmt.Errorf("bench: pinning %d models needs as many CPUs; this process may use %v", n, cpus)
	}
	return cpus[:n], nil
}
