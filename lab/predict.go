package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// Prediction is the throughput model's prediction for one system at one
// concurrency.
type Prediction struct {
	// TokensPerSecond is the predicted throughput.
	TokensPerSecond float64
	// B holds the thresholds the prediction assumed (TokenRouter's
	// systems; nil for the baselines).
	B []int
	// Method says how it was computed: "lockstep" (perfmodel.Lockstep),
	// "alone" (perfmodel.Alone), or the chain's perfmodel.Method.
	Method string
	// CIHalfWidth is the half-width of a simulated prediction's 95%
	// confidence interval.
	CIHalfWidth float64
}

// Predict returns the throughput model's prediction for the system name at
// concurrency n, as s.Build runs it; ok is false for a system without one
// (std-serving, query-level, a server given by URL) or with thresholds
// that cannot run at n. m is the deployment's model: its routing (the
// algorithm's P and C), step curves, placement and workload.
//
//   - tokenrouter: the chain at the static thresholds of Launch, or at B*
//     with B0 = 1 when Launch is automatic; tokenrouter-auto: at B*;
//     tokenrouter-b1: at B = 1. Launch.MaxWait joins as the runtime's
//     guard (Planner.TokenRouter). With Setup.Speculation or Setup.BusDelay
//     set, the speculative model at those thresholds
//     (Planner.Speculative, simulated; depth 0 without a delay is the
//     same prediction).
//   - lockstep: perfmodel.Lockstep.
//   - slm-only, llm-only: perfmodel.Alone of the first and the last model.
func Predict(ctx context.Context, s bench.Setup, pl *perfmodel.Planner, m perfmodel.Model, name string, n int) (Prediction, bool, error) {
	var b []int
	switch name {
	case "lockstep":
		v, err := perfmodel.Lockstep(m, n)
		return Prediction{TokensPerSecond: v, Method: "lockstep"}, err == nil, err
	case "slm-only", "llm-only":
		i := 0
		if name == "llm-only" {
			i = m.M() - 1
		}
		v, err := perfmodel.Alone(m, i, n)
		return Prediction{TokensPerSecond: v, Method: "alone"}, err == nil, err
	case "tokenrouter":
		if !s.Launch.Auto {
			for i := range m.M() {
				b = append(b, s.Launch.Policy(i).B.At(n))
			}
		}
	case "tokenrouter-auto":
	case "tokenrouter-b1":
		b = slices.Repeat([]int{1}, m.M())
	default:
		return Prediction{}, false, nil
	}
	sp := s.Speculation
	sp.BusDelay = float64(s.BusDelay) / float64(time.Millisecond)
	r, err := pl.Speculative(ctx, m, n, b, map[int]int{0: 1}, s.Launch.MaxWait, sp)
	if err != nil {
		return Prediction{}, false, fmt.Errorf("bench: predicting %s at N=%d: %w", name, n, err)
	}
	if !r.Feasible {
		return Prediction{}, false, nil
	}
	return Prediction{TokensPerSecond: r.TokensPerSecond, B: r.B, Method: string(r.Method), CIHalfWidth: r.CIHalfWidth}, true, nil
}

// AddPredictions sets the prediction of every summary whose system has
// one (Predict) and its measured/predicted ratio; the others are
// left without. rows are the summaries' rows (bench.Summarize's input, same
// order; nil: no step tallies): where a row tallied its steps, the summary
// also gets the steps' measured time over m's curves (StepOverCurve) and
// the prediction again with every curve scaled by that ratio
// (PredictedAtStepSpeed): the model's prediction for the engines as fast
// as they stepped during the run, which separates the throughput model's
// error from the machine running slower or faster than at calibration.
func AddPredictions(ctx context.Context, s bench.Setup, pl *perfmodel.Planner, m perfmodel.Model, rows []bench.Row, out []bench.Summary) error {
	for i := range out {
		p, ok, err := Predict(ctx, s, pl, m, out[i].System, out[i].Concurrency)
		if err != nil {
			return err
		}
		if !ok || !(p.TokensPerSecond > 0) {
			continue
		}
		r := &out[i]
		r.Predicted, r.PredictedB, r.PredictedMethod, r.PredictedCI95 = p.TokensPerSecond, p.B, p.Method, p.CIHalfWidth
		r.MeasuredOverPredicted = r.TokensPerSecond / p.TokensPerSecond
		if i >= len(rows) || rows[i].Steps == nil {
			continue
		}
		ratio, err := rows[i].Steps.OverCurve(m)
		if err != nil {
			return fmt.Errorf("bench: pricing %s's steps at N=%d: %w", r.System, r.Concurrency, err)
		}
		if !slices.ContainsFunc(ratio, func(x float64) bool { return x > 0 }) {
			continue
		}
		at, ok, err := Predict(ctx, s, pl, atStepSpeed(m, ratio), r.System, r.Concurrency)
		if err != nil {
			return err
		}
		r.StepOverCurve = ratio
		if ok && at.TokensPerSecond > 0 {
			r.PredictedAtStepSpeed = at.TokensPerSecond
			r.MeasuredOverAtStepSpeed = r.TokensPerSecond / at.TokensPerSecond
		}
	}
	return nil
}
