package routetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

// TestRealPairCounts runs each algorithm on the real pair (llama2xs small,
// stories260K large) and logs how many tokens each model produced; every
// algorithm that routes must use both models.
func TestRealPairCounts(t *testing.T) {
	files := []string{"llama2xs-model.bin", "stories260K.gguf"}
	modelsDir := testmodels.Dir(t)
	w, err := routetest.WriteWeights(t.TempDir(), 64, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		alg    string
		params map[string]string
	}{
		{"r-stitch", map[string]string{"tau": "0.25"}},
		{"ensemble", map[string]string{"weights": "1,1"}},
		{"ensemble", map[string]string{"weights": "3,1"}},
		{"r2r", map[string]string{"weights": w["r2r"]}},
		{"citer", map[string]string{"weights": w["citer"]}},
		{"co-llm", map[string]string{"weights": w["co-llm"]}},
		{"query-level", map[string]string{"strong": "0.5"}},
		{"r2r-random", map[string]string{"p": "0.3"}},
	}
	prompts := [][]int32{{1, 403, 407, 261, 378}, {1, 426}, {1, 416, 439}, {1, 281}, {1}, {1, 261, 378}}
	for _, c := range runs {
		var ms []deploy.Model
		for i, f := range files {
			e, err := cpu.Open(filepath.Join(modelsDir, f), cpu.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, deploy.Model{Name: []string{"llama2xs", "stories260K"}[i], Engine: e})
		}
		r, err := deploy.New(deploy.Config{Models: ms, Algorithm: c.alg, Params: c.params, Registry: builtin.Registry()})
		if err != nil {
			t.Fatal(err)
		}
		var by [2]int
		for i, p := range prompts {
			s, err := r.Submit(context.Background(), p, route.Params{MaxTokens: 32, IgnoreEOS: true, Seed: uint64(i)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range res.By {
				by[b]++
			}
		}
		r.Close()
		if by[0] == 0 || by[1] == 0 {
			t.Errorf("%s %v: one model produced nothing: %v", c.alg, c.params, by)
		}
		ps := fmt.Sprint(c.params)
		if wf, ok := c.params["weights"]; ok && filepath.IsAbs(wf) {
			ps = "weights=" + filepath.Base(wf)
		}
		t.Logf("%-11s %-28s llama2xs %3d  stories260K %3d  (%.0f%% large)", c.alg, ps, by[0], by[1], 100*float64(by[1])/float64(by[0]+by[1]))
	}
}
