package eval

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "d.jsonl")
	os.WriteFile(good, []byte("{\"prompt\":\"a\",\"answer\":\"b\"}\n\n{\"prompt\":\"c\"}\n"), 0o644)
	ex, err := Load(good)
	if err != nil || len(ex) != 2 || ex[0].Answer != "b" {
		t.Fatalf("Load = %v, %v", ex, err)
	}
	for name, body := range map[string]string{"empty": "", "bad json": "{", "no prompt": `{"answer":"x"}`} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := Load(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestScorersAndPareto(t *testing.T) {
	a := Agreement([][]int32{{1, 2, 3, 4}})
	if a(0, []int32{1, 2, 9, 4}) != 0.5 || a(0, []int32{1, 2, 3, 4, 5}) != 1 {
		t.Fatal("agreement counts the matching prefix")
	}
	e := Exact([]Example{{Answer: " yes"}}, func([]int32) string { return "yes, it is" })
	if e(0, nil) != 1 {
		t.Fatal("exact is a trimmed prefix match")
	}
	pts := []Point{{Quality: 1, TokensPerSecond: 10}, {Quality: 0.5, TokensPerSecond: 20}, {Quality: 0.4, TokensPerSecond: 15}}
	MarkPareto(pts)
	if !pts[0].Pareto || !pts[1].Pareto || pts[2].Pareto {
		t.Fatalf("pareto %+v", pts)
	}
}

// TestSweepOnSim sweeps r2r-random's p on simulated models: quality
// (agreement with the large model alone) and the large model's share both
// rise with p.
func TestSweepOnSim(t *testing.T) {
	prompts := [][]int32{{1, 10}, {1, 11}, {1, 12}, {1, 13}}
	ref := make([][]int32, len(prompts))
	for i, p := range prompts {
		sys := build(t, "single", map[string]string{"model": "1"})
		s, err := sys.Submit(context.Background(), p, paramsFor(20))
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ref[i] = r.Tokens
		sys.Close()
	}
	pts, err := Sweep(context.Background(), []string{"0", "0.5", "1"}, func(v string) (bench.System, error) {
		return build(t, "r2r-random", map[string]string{"p": v}), nil
	}, prompts, Agreement(ref), Options{MaxTokens: 20, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if pts[0].LargeShare != 0 || pts[2].LargeShare != 1 || pts[2].Quality != 1 || pts[0].Quality >= 0.5 {
		t.Fatalf("sweep %+v", pts)
	}
	if !(pts[0].LargeShare < pts[1].LargeShare && pts[1].LargeShare < pts[2].LargeShare) {
		t.Fatalf("large share not increasing with p: %+v", pts)
	}
}

func build(t *testing.T, alg string, params map[string]string) *deploy.Deployment {
	t.Helper()
	r, err := deploy.New(deploy.Config{Models: []deploy.Model{
		{Name: "slm", Engine: sim.New(sim.Config{Seed: 1})}, {Name: "llm", Engine: sim.New(sim.Config{Seed: 2})},
	}, Algorithm: alg, Params: params, Registry: builtin.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func paramsFor(n int) route.Params { return route.Params{MaxTokens: n} }
