package bench

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func fastSetup(t *testing.T) Setup {
	t.Helper()
	return Setup{
		Models: SimModels(sim.Preset{Name: "fast", Models: []string{"slm", "llm"},
			Profiles: []sim.Profile{{Curve: steptime.Constant(0.2)}, {Curve: steptime.Constant(1)}}}, 0),
		Algorithm: "r2r-random", Params: map[string]string{"p": "0.3"}, Registry: builtin.Registry(),
		Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(2)}, MaxWait: 5 * time.Millisecond},
	}
}

func TestRunMeasuresTokensAndLatency(t *testing.T) {
	sys, err := fastSetup(t).Build(context.Background(), "tokenrouter")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	var ticks []Tick
	res, err := Run(context.Background(), sys, Options{Concurrency: 4, MaxTokens: 40, Warmup: 50 * time.Millisecond, Duration: 400 * time.Millisecond,
		Label: "fast", Progress: func(k Tick) { ticks = append(ticks, k) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tokens == 0 || res.Requests == 0 || len(res.TTFT) == 0 || len(res.TPOT) == 0 {
		t.Fatalf("nothing measured: %+v", res)
	}
	// The run's end is reported: the whole run elapsed, the window's
	// tokens so far.
	if len(ticks) == 0 {
		t.Fatal("no progress")
	}
	if k := ticks[len(ticks)-1]; k.Label != "fast" || k.Elapsed != k.Total || k.Total != 450*time.Millisecond || k.Warmup ||
		k.Tokens == 0 || k.Tokens > int64(res.Tokens) || k.Requests > int64(res.Requests) || k.TokensPerSecond <= 0 {
		t.Fatalf("last progress %+v, result %+v", k, res)
	}
	if res.RoutedFraction < 0.1 || res.RoutedFraction > 0.5 {
		t.Fatalf("routed fraction %.2f for p = 0.3", res.RoutedFraction)
	}
	if p50, p99 := res.TPOT.Quantile(0.5), res.TPOT.Quantile(0.99); p50 <= 0 || p99 < p50 {
		t.Fatalf("TPOT p50 %v p99 %v", p50, p99)
	}
}

func TestEverySystemServes(t *testing.T) {
	systems := append(Systems(), "tokenrouter-auto")
	var order []string
	rows, err := Compare(context.Background(), fastSetup(t), systems,
		[]int{2}, Options{MaxTokens: 30, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond}, 2,
		func(_, _ int, r Row) { order = append(order, r.System) })
	if err != nil {
		t.Fatal(err)
	}
	// Round 0 runs the systems as listed, round 1 from the second on and
	// the first last.
	want := append(slices.Clone(systems), systems[1:]...)
	want = append(want, systems[0])
	if !slices.Equal(order, want) {
		t.Errorf("run order %v, want %v", order, want)
	}
	for _, r := range rows {
		if r.Tokens == 0 {
			t.Errorf("%s: no tokens", r.System)
		}
		if len(r.PerRound) != 2 || math.Abs((r.PerRound[0]+r.PerRound[1])/2-r.TokensPerSecond) > 1e-9 {
			t.Errorf("%s: per-round %v for %.3f tok/s overall", r.System, r.PerRound, r.TokensPerSecond)
		}
		switch r.System {
		case "query-level":
			if r.RoutedFraction < 0.05 || r.RoutedFraction > 0.6 {
				t.Errorf("query-level: large-model share %.2f for p = 0.3", r.RoutedFraction)
			}
		case "slm-only":
			if r.RoutedFraction != 0 {
				t.Errorf("slm-only routed %.2f", r.RoutedFraction)
			}
		case "llm-only":
			if r.RoutedFraction != 1 {
				t.Errorf("llm-only: large-model share %.2f", r.RoutedFraction)
			}
		}
	}
}

func TestQuantile(t *testing.T) {
	s := Samples{5, 1, 3, 2, 4}
	if s.Quantile(0.5) != 3 || s.Quantile(0.99) != 5 || s.Quantile(0) != 1 || (Samples{}).Quantile(0.5) != 0 {
		t.Fatal("nearest-rank quantiles wrong")
	}
}
