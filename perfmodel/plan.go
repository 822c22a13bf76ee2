package perfmodel

import (
	"context"
	"fmt"
)

// PlanRow is one (N, B) line of a plan: the predicted throughput of
// threshold vector B at concurrency N. It is the JSON form of
// `tokenrouter plan --format json`, which serve and bench read back
// (--thresholds @plan.json).
type PlanRow struct {
	Concurrency     int      `json:"concurrency"`
	Thresholds      []int    `json:"thresholds"`
	TokensPerSecond *float64 `json:"tokens_per_second"`
	Feasible        bool     `json:"feasible"`
	Method          string   `json:"method"`
	Best            bool     `json:"best"`
	CIHalfWidth     float64  `json:"ci_half_width,omitempty"`
	States          int      `json:"states,omitempty"`
	Residual        *float64 `json:"residual,omitempty"`
	BoundFraction   float64  `json:"bound_fraction,omitempty"`
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
