package perfmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/tokenrouter/tokenrouter/sched"
)

// PlanRow is one (N, B) line of a plan: the predicted throughput of
// threshold vector B at concurrency N. It is the JSON form of
// `tokenrouter plan --format json`, which serve and bench read back
// (--thresholds @plan.json).
type PlanRow struct {
	// Concurrency is N; Thresholds is B, one per model.
	Concurrency int   `json:"concurrency"`
	Thresholds  []int `json:"thresholds"`
	// TokensPerSecond is the prediction (nil when B is infeasible).
	TokensPerSecond *float64 `json:"tokens_per_second"`
	// Feasible says B cannot deadlock N requests: Σ(B_i − 1) < N.
	Feasible bool `json:"feasible"`
	// Method is "exact" (Markov chain) or "simulation".
	Method string `json:"method"`
	// Best marks the best B at this N.
	Best bool `json:"best"`
	// CIHalfWidth is a simulated prediction's 95% half-width.
	CIHalfWidth float64 `json:"ci_half_width,omitempty"`
	// States and Residual describe an exact solve: the chain's size and
	// the stationary solution's residual.
	States   int      `json:"states,omitempty"`
	Residual *float64 `json:"residual,omitempty"`
	// BoundFraction is the prediction over the no-contention bound.
	BoundFraction float64 `json:"bound_fraction,omitempty"`
}

// Plan evaluates every threshold vector at each concurrency in ns (fixed
// pins some models' thresholds) and marks the best per concurrency.
func (pl *Planner) Plan(ctx context.Context, m Model, ns []int, fixed map[int]int) ([]PlanRow, error) {
	var rows []PlanRow
	for _, n := range ns {
		rs, err := pl.Search(ctx, m, n, fixed)
		if err != nil {
			return nil, fmt.Errorf("perfmodel: plan N=%d: %w", n, err)
		}
		bound, err := m.NoContentionBound(n)
		if err != nil {
			return nil, err
		}
		best := Best(rs)
		for k, r := range rs {
			row := PlanRow{Concurrency: n, Thresholds: r.B, Feasible: r.Feasible, Method: string(r.Method), Best: k == best}
			if r.Feasible {
				tps, res := r.TokensPerSecond, r.Residual
				row.TokensPerSecond = &tps
				row.CIHalfWidth = r.CIHalfWidth
				row.BoundFraction = tps / bound
				if r.Method == MethodExact {
					row.States, row.Residual = r.States, &res
				}
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// ReadPlan reads the JSON rows `tokenrouter plan --format json` wrote.
func ReadPlan(path string) ([]PlanRow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("perfmodel: %w", err)
	}
	var rows []PlanRow
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("perfmodel: plan %s: %w", path, err)
	}
	return rows, nil
}

// PlanTables turns a plan's best rows into one threshold table per model:
// entry n is the best B at the largest planned concurrency not above n
// (the smallest planned one below it), and the table's last entry holds
// beyond the largest.
func PlanTables(rows []PlanRow, models int) ([]sched.Table, error) {
	best := map[int][]int{}
	maxN := -1
	for _, r := range rows {
		if !r.Best || !r.Feasible {
			continue
		}
		if len(r.Thresholds) != models {
			return nil, fmt.Errorf("perfmodel: plan row N=%d has %d thresholds for %d models", r.Concurrency, len(r.Thresholds), models)
		}
		if _, dup := best[r.Concurrency]; dup || r.Concurrency < 1 {
			return nil, fmt.Errorf("perfmodel: plan has %s best row for N=%d", map[bool]string{true: "a second", false: "a"}[dup], r.Concurrency)
		}
		best[r.Concurrency] = r.Thresholds
		maxN = max(maxN, r.Concurrency)
	}
	if maxN < 0 {
		return nil, errors.New("perfmodel: plan has no best row")
	}
	tabs := make([]sched.Table, models)
	for i := range tabs {
		tabs[i] = make(sched.Table, maxN+1)
	}
	var cur []int
	for n := range maxN + 1 {
		if b, ok := best[n]; ok {
			cur = b
		}
		for i := range tabs {
			tabs[i][n] = -1
			if cur != nil {
				tabs[i][n] = cur[i]
			}
		}
	}
	first := best[slices.Min(slices.Collect(maps.Keys(best)))]
	for i, t := range tabs {
		for n := range t {
			if t[n] < 0 {
				t[n] = first[i]
			}
			if t[n] < 1 {
				return nil, fmt.Errorf("perfmodel: plan threshold %d for model %d: must be at least 1", t[n], i)
			}
		}
	}
	return tabs, nil
}
