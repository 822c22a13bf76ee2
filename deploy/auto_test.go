package deploy_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/autotune"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
)

// TestAutoThresholdsConverge runs r2r-random on short sim latencies with
// automatic thresholds and checks that the tuner's routing estimate
// approaches the true process and that every sub-server runs the planner's table for it.
func TestAutoThresholdsConverge(t *testing.T) {
	const p, n = 0.35, 6
	lat := []time.Duration{2 * time.Millisecond, 8 * time.Millisecond}
	var ms []deploy.Model
	for i, l := range lat {
		ms = append(ms, deploy.Model{Name: []string{"slm", "llm"}[i],
			Engine: sim.New(sim.Config{Seed: uint64(i + 1), Profile: sim.Constant(l)})})
	}
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"},
		Registry: builtin.Registry(), Launch: sched.Launch{Auto: true, Tables: []sched.Table{sched.Static(3), sched.Static(3)}, MaxWait: 40 * time.Millisecond},
		Tuning: &autotune.Options{Window: 800 * time.Millisecond, Tick: 20 * time.Millisecond, MinInterval: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, s := range r.SubServers() {
		if pol := s.Policy(); !slices.Equal(pol.B, sched.Static(1)) || pol.MaxWait != 40*time.Millisecond {
			t.Fatalf("model %d starts with %+v, want B=1 and the guard", i, pol)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for k := range n {
		s, err := r.Submit(ctx, []int32{1, int32(10 + k)}, route.Params{MaxTokens: 30000, IgnoreEOS: true, Seed: uint64(k)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	var st autotune.Status
	testkit.Until(t, 8*time.Second, func() error {
		st = r.Tuner().Status()
		// Step latencies are wall-clock and stretch on a loaded machine
		// (other packages' tests, the race detector), so only the routing
		// estimate is checked against the truth.
		if st.Plans > 0 && math.Abs(st.Model.P[0][1]-p) < 0.08 && st.Model.Curve(0).At(1, 0, 0) >= 1.5 && st.Model.Curve(1).At(1, 0, 0) >= 6 {
			return nil
		}
		return fmt.Errorf("no converged plan: %+v (model %+v)", st, st.Model)
	})
	if st.Err != nil {
		t.Fatal(st.Err)
	}
	want, err := perfmodel.NewPlanner(perfmodel.Options{}).Table(context.Background(), *st.Model, st.MaxN, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.MaxN < n {
		t.Fatalf("planned up to n=%d with %d active", st.MaxN, n)
	}
	now := r.Tuner().Status()
	for i, s := range r.SubServers() {
		if now.Plans != st.Plans {
			break // re-planned meanwhile; the tables were checked against the older model
		}
		pol := s.Policy()
		if !slices.Equal(pol.B, want[i]) || pol.MaxWait != 40*time.Millisecond {
			t.Fatalf("model %d runs %+v, want B=%v with the guard", i, pol, want[i])
		}
	}
}

// TestAutoThresholdsPlanTheirPlacement checks that the tuner of a
// time-shared deployment plans for engines that take turns, and one of a
// deployment whose steps overlap for partitioned placement.
func TestAutoThresholdsPlanTheirPlacement(t *testing.T) {
	for _, shared := range []bool{true, false} {
		var ms []deploy.Model
		for i, l := range []time.Duration{2 * time.Millisecond, 6 * time.Millisecond} {
			ms = append(ms, deploy.Model{Name: []string{"slm", "llm"}[i],
				Engine: sim.New(sim.Config{Seed: uint64(i + 1), Profile: sim.Constant(l)})})
		}
		r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"},
			Registry: builtin.Registry(), Launch: sched.Launch{Auto: true}, TimeShared: shared,
			Tuning: &autotune.Options{Window: 400 * time.Millisecond, Tick: 20 * time.Millisecond, MinInterval: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		for k := range 3 {
			s, err := r.Submit(ctx, []int32{1, int32(10 + k)}, route.Params{MaxTokens: 30000, IgnoreEOS: true, Seed: uint64(k)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
		}
		want := map[bool]perfmodel.Placement{true: perfmodel.TimeShared, false: perfmodel.Partitioned}[shared]
		testkit.Until(t, 8*time.Second, func() error {
			if st := r.Tuner().Status(); st.Plans == 0 || st.Model == nil {
				return fmt.Errorf("no plan yet: %+v", st)
			} else if got := st.Model.Placement; got != want && (got != "" || want != perfmodel.Partitioned) {
				t.Fatalf("time-shared %v: the tuner plans for %q placement", shared, got)
			}
			return nil
		})
		cancel()
		r.Close()
	}
}
