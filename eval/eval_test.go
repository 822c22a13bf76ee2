package eval

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	a := Prefix([][]int32{{1, 2, 3, 4}})
	if a(0, []int32{1, 2, 9, 4}) != 0.5 || a(0, []int32{1, 2, 3, 4, 5}) != 1 {
		t.Fatal("prefix counts the matching prefix")
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
	}, prompts, Prefix(ref), Options{MaxTokens: 20, Concurrency: 2})
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

// TestJudgeOnSim scores r2r-random's outputs with a second copy of the
// large simulated model: at p = 1 the large model wrote every token, so
// every position holds its greedy token; at p = 0 the small model (another
// seed) wrote them all and disagrees somewhere.
func TestJudgeOnSim(t *testing.T) {
	prompts := [][]int32{{1, 10}, {1, 11}, {1, 12}, {1, 13}}
	judge := &Judge{Engine: sim.New(sim.Config{Seed: 2}), Batch: 3}
	defer judge.Engine.Close()
	pts, err := Sweep(context.Background(), []string{"0", "1"}, func(v string) (bench.System, error) {
		return build(t, "r2r-random", map[string]string{"p": v}), nil
	}, prompts, nil, Options{MaxTokens: 12, Concurrency: 2, Judge: judge.Score})
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := pts[0], pts[1]
	if p1.Responses != 4 || p1.Agreement != 1 || p1.Quality != 1 || p1.LargeShare != 1 {
		t.Fatalf("p=1: %+v", p1)
	}
	if p0.Responses != 4 || p0.Agreement >= 1 || p0.LargeShare != 0 || p0.Quality != p0.Agreement {
		t.Fatalf("p=0: %+v", p0)
	}
	if !(p0.LogLik < p1.LogLik) || p1.LogLik >= 0 {
		t.Fatalf("log-likelihood: p=0 %v, p=1 %v", p0.LogLik, p1.LogLik)
	}
}

func TestJudgeRefusesBadInput(t *testing.T) {
	j := &Judge{Engine: sim.New(sim.Config{Seed: 2, VocabSize: 100})}
	defer j.Engine.Close()
	ctx := context.Background()
	for name, c := range map[string][2][][]int32{
		"count":        {{{1}}, {{1}, {2}}},
		"empty prompt": {{{}}, {{5}}},
		"token range":  {{{1}}, {{100}}},
		"negative":     {{{1}}, {{-1}}},
	} {
		if _, err := j.Score(ctx, c[0], c[1]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	sc, err := j.Score(ctx, [][]int32{{1}, {1, 2}}, [][]int32{nil, {3, 4}})
	if err != nil || sc[0].Positions != 0 || sc[1].Positions != 2 {
		t.Fatalf("scores %+v, %v", sc, err)
	}
}

func TestSummarize(t *testing.T) {
	m := Summarize([]Score{{Positions: 4, Agree: 1, LogLik: -2}, {}, {Positions: 2, Agree: 2, LogLik: -1}})
	// Per response: agreement 1/4 and 2/2, log-lik -0.5 and -0.5.
	if m.Responses != 2 || m.Agreement != 0.625 || m.LogLik != -0.5 {
		t.Fatalf("%+v", m)
	}
	if m := Summarize([]Score{{}}); m != (Measures{}) {
		t.Fatalf("no positions: %+v", m)
	}
}

// TestFrontAndAt reads a hand-made curve: the front drops dominated
// points, and At interpolates along it.
func TestFrontAndAt(t *testing.T) {
	pts := []Point{
		{Value: "a", LargeShare: 0, Measures: Measures{Agreement: 0.6, Responses: 1}},
		{Value: "b", LargeShare: 0.2, Measures: Measures{Agreement: 0.5, Responses: 1}}, // dominated by a
		{Value: "c", LargeShare: 0.4, Measures: Measures{Agreement: 0.8, Responses: 1}},
		{Value: "d", LargeShare: 0.4, Measures: Measures{Agreement: 0.7, Responses: 1}}, // same share, worse
		{Value: "e", LargeShare: 1, Measures: Measures{Agreement: 1, Responses: 1}},
		{Value: "f", LargeShare: 0.9, Measures: Measures{Agreement: 0.9}}, // not scored
	}
	var got []string
	for _, p := range Front(pts, AgreementOf) {
		got = append(got, p.Value)
	}
	if strings.Join(got, "") != "ace" {
		t.Fatalf("front %v", got)
	}
	for _, c := range []struct{ s, want float64 }{{0, 0.6}, {0.1, 0.65}, {0.2, 0.7}, {0.4, 0.8}, {0.7, 0.9}, {1, 1}} {
		if v := At(pts, AgreementOf, c.s); math.Abs(v-c.want) > 1e-12 {
			t.Errorf("At(%v) = %v, want %v", c.s, v, c.want)
		}
	}
	high := pts[2:5]
	if !math.IsNaN(At(high, AgreementOf, 0.1)) || At(high, AgreementOf, 0.4) != 0.8 {
		t.Fatal("below the smallest measured share the curve is unknown")
	}
	if v := At(pts[:3], AgreementOf, 0.9); v != 0.8 {
		t.Fatalf("past the front's last share: %v, want its best 0.8", v)
	}
}

func TestParseArmAndShares(t *testing.T) {
	a, err := ParseArm("trained-r2r=r2r  threshold=0.9,0.5 weights=/tmp/r.safetensors")
	if err != nil || a.Label != "trained-r2r" || a.Algorithm != "r2r" || a.Param != "threshold" ||
		strings.Join(a.Values, "|") != "0.9|0.5" || a.Fixed["weights"] != "/tmp/r.safetensors" {
		t.Fatalf("%+v, %v", a, err)
	}
	if a, err := ParseArm("r-stitch tau=0.1"); err != nil || a.Label != "r-stitch" || a.Fixed != nil {
		t.Fatalf("%+v, %v", a, err)
	}
	for _, bad := range []string{"", "r2r", "r2r threshold", "r2r threshold=", "r2r threshold=0.1,,0.2",
		"r2r threshold=1 threshold=2", "r2r threshold=1 weights", "bad/name t=1",
		"r2r t=" + strings.Repeat("1,", 300) + "1", strings.Repeat("x", 5000)} {
		if _, err := ParseArm(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	s, err := ParseShares("10%, 0.25,50%")
	if err != nil || len(s) != 3 || s[0] != 0.1 || s[1] != 0.25 || s[2] != 0.5 {
		t.Fatalf("%v, %v", s, err)
	}
	for _, bad := range []string{"", "x", "-0.1", "101%", "NaN", "1.5"} {
		if _, err := ParseShares(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestResampleAndBootstrap recomputes a point on a resample by hand, and
// bootstraps two hand-made series where one is better on every prompt.
func TestResampleAndBootstrap(t *testing.T) {
	p := Point{Value: "v", PerPrompt: []PromptStat{
		{Tokens: 4, Large: 1, Score: Score{Positions: 4, Agree: 2, LogLik: -4}},
		{Tokens: 2, Large: 2, Score: Score{Positions: 2, Agree: 2, LogLik: -1}},
	}}
	q := Resample(p, []int{1, 1, 0})
	// Tokens 2+2+4 = 8, large 2+2+1 = 5; agreement (1+1+0.5)/3, log-lik (-0.5-0.5-1)/3.
	if q.Tokens != 8 || q.LargeShare != 5.0/8 || math.Abs(q.Agreement-2.5/3) > 1e-12 ||
		math.Abs(q.LogLik+2.0/3) > 1e-12 || q.Responses != 3 {
		t.Fatalf("resample %+v", q)
	}
	// Series "good" agrees more than "bad" at the same shares, prompt by
	// prompt, so every resample ranks it first.
	mk := func(label string, agree int) Series {
		s := Series{Arm: Arm{Label: label}}
		for v, large := range []int{0, 2, 4} {
			pt := Point{Value: strconv.Itoa(v)}
			for range 5 {
				a := min(agree+large, 4)
				pt.PerPrompt = append(pt.PerPrompt, PromptStat{Tokens: 4, Large: large,
					Score: Score{Positions: 4, Agree: a, LogLik: -float64(4 - a)}})
			}
			s.Points = append(s.Points, pt)
		}
		return s
	}
	series := []Series{mk("good", 2), mk("bad", 1)}
	b, err := NewBootstrap(series, []float64{0.25, 0.5}, "good", 50, 7)
	if err != nil {
		t.Fatal(err)
	}
	g, bad := b.Series[0], b.Series[1]
	if g.Agreement.AtLeast != 1 || bad.Agreement.AtLeast != 1 || bad.LogLik.AtLeast != 1 {
		t.Fatalf("%+v", b)
	}
	// Every prompt is alike, so the intervals are points: bad at 50%
	// share is agreement (1+2)/4.
	if lo, hi := bad.Agreement.Low[1], bad.Agreement.High[1]; lo == nil || *lo != 0.75 || *hi != 0.75 {
		t.Fatalf("interval %v %v", lo, hi)
	}
	if _, err := NewBootstrap(series, []float64{0.1}, "nobody", 10, 1); err == nil {
		t.Fatal("unknown reference accepted")
	}
	series[1].Points[0].PerPrompt = nil
	if _, err := NewBootstrap(series, []float64{0.1}, "good", 10, 1); err == nil {
		t.Fatal("a point without per-prompt results accepted")
	}
}

func TestReadReport(t *testing.T) {
	dir := t.TempDir()
	good := `{"series":[{"label":"r2r","points":[{"value":"0.5","agreement":0.8,"llm_loglik":-1,"responses":1,` +
		`"large_model_share":0.25,"tokens":4,"per_prompt":[{"tokens":4,"large":1,"positions":4,"agree":3,"loglik":-4}]}]}]}`
	for name, c := range map[string]struct {
		body string
		ok   bool
	}{
		"good":          {good, true},
		"no series":     {`{"series":[]}`, false},
		"bad json":      {`{"series":`, false},
		"bad label":     {strings.Replace(good, `"r2r"`, `"a b"`, 1), false},
		"share":         {strings.Replace(good, `0.25`, `1.5`, 1), false},
		"positive ll":   {strings.Replace(good, `"llm_loglik":-1`, `"llm_loglik":1`, 1), false},
		"agree > pos":   {strings.Replace(good, `"agree":3`, `"agree":5`, 1), false},
		"large > total": {strings.Replace(good, `"large":1`, `"large":9`, 1), false},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, []byte(c.body), 0o644)
		s, err := ReadReport(p)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", name, err)
		}
		if c.ok && (len(s) != 1 || s[0].Points[0].PerPrompt[0].Agree != 3) {
			t.Errorf("%s: read %+v", name, s)
		}
	}
}

// TestSeedsDifferPerPrompt sends query-level's coin with each prompt's
// own seed: with strong = 0.5 over 20 prompts some go to each model (one
// shared seed would send all of them the same way).
func TestSeedsDifferPerPrompt(t *testing.T) {
	var prompts [][]int32
	for i := range 20 {
		prompts = append(prompts, []int32{1, int32(10 + i)})
	}
	pts, err := Sweep(context.Background(), []string{"0.5"}, func(v string) (bench.System, error) {
		return build(t, "query-level", map[string]string{"strong": v}), nil
	}, prompts, nil, Options{MaxTokens: 4, Concurrency: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := pts[0].LargeShare; s <= 0 || s >= 1 {
		t.Fatalf("large share %v", s)
	}
	if (Options{Seed: 5}).seed(3) != 8 || (Options{}).seed(3) != 0 {
		t.Fatal("prompt i's seed is Seed+i, 0 stays 0")
	}
}
