package eval

import (
	"context"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// tinyPair describes the real tiny pair: stories260K as the small model,
// llama2xs (same tok512 vocabulary) as the large one.
func tinyPair(t *testing.T) []config.Model {
	t.Helper()
	m := testmodels.Dir(t)
	tok := filepath.Join(m, "tok512.bin")
	return []config.Model{
		{Name: "stories260K", Engine: loader.KindCPU, Path: filepath.Join(m, "stories260K.gguf"), Tokenizer: tok, Threads: 1},
		{Name: "llama2xs", Engine: loader.KindCPU, Path: filepath.Join(m, "llama2xs-model.bin"), Tokenizer: tok, Threads: 1},
	}
}

// openLarge opens the large model of the tiny pair.
func openLarge(t *testing.T) (engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	m, err := loader.Builtin().Open(context.Background(), tinyPair(t)[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Engine.Close() })
	return m.Engine, m.Text.Tokenizer
}

// TestJudgeMatchesIndependentPass scores a short fixed text and compares
// with a pass written independently: for every position, a fresh sequence
// reads the whole prefix in one extend (no KV cache carried between
// positions), and the log-softmax is taken here in float64 by another
// formula (log of the probability normalised by its sum).
func TestJudgeMatchesIndependentPass(t *testing.T) {
	e, tok := openLarge(t)
	ctx := context.Background()
	prompt := append([]int32{tok.BOS}, tok.Encode("The little dog", false)...)
	resp := tok.Encode(" ran to the park and saw a big red ball. He was happy.", false)
	if len(resp) < 8 {
		t.Fatalf("response encodes to %d tokens", len(resp))
	}
	j := &Judge{Engine: e}
	got, err := j.Score(ctx, [][]int32{prompt}, [][]int32{resp})
	if err != nil {
		t.Fatal(err)
	}
	var want Score
	out := make([]engine.Output, 1)
	for k := range resp {
		seq := engine.SeqID(1000 + k)
		in := []engine.Input{{Seq: seq, Tokens: append(append([]int32{}, prompt...), resp[:k]...), Want: engine.WantLogits}}
		if err := e.Step(ctx, in, out); err != nil {
			t.Fatal(err)
		}
		best, z := 0, 0.0
		for i, v := range out[0].Logits {
			if v > out[0].Logits[best] {
				best = i
			}
			z += math.Exp(float64(v))
		}
		want.Positions++
		if int32(best) == resp[k] {
			want.Agree++
		}
		want.LogLik += math.Log(math.Exp(float64(out[0].Logits[resp[k]])) / z)
		e.Release(seq)
	}
	g := got[0]
	if g.Positions != len(resp) || g.Agree != want.Agree || math.Abs(g.LogLik-want.LogLik) > 1e-9*float64(len(resp)) {
		t.Fatalf("judge %+v, independent %+v", g, want)
	}
	if g.Agree == 0 || g.Agree == g.Positions || g.LogLik >= 0 {
		t.Fatalf("a hand-written text should agree in places, not everywhere: %+v", g)
	}
}

// TestJudgeAgreesWithGreedyGeneration generates greedily with the large
// model, recording the engine's own log-probabilities of the tokens it
// picks, and scores the text: every position is the large model's greedy
// token, and the log-likelihood is the sum the engine recorded.
func TestJudgeAgreesWithGreedyGeneration(t *testing.T) {
	e, tok := openLarge(t)
	ctx := context.Background()
	prompts := [][]int32{append([]int32{tok.BOS}, tok.Encode("Once upon a time", false)...),
		append([]int32{tok.BOS}, tok.Encode("Lily wanted to", false)...)}
	outs := make([][]int32, len(prompts))
	recorded := make([]float64, len(prompts))
	out := make([]engine.Output, 1)
	for i, p := range prompts {
		var rec []engine.Logprob
		toks := p
		for range 20 {
			in := []engine.Input{{Seq: engine.SeqID(500 + i), Tokens: toks,
				Sampling: engine.Sampling{Logprobs: true, Record: &rec}}}
			if err := e.Step(ctx, in, out); err != nil {
				t.Fatal(err)
			}
			outs[i] = append(outs[i], out[0].Token)
			toks = []int32{out[0].Token}
		}
		for _, r := range rec {
			recorded[i] += float64(r.Logprob)
		}
	}
	sc, err := (&Judge{Engine: e}).Score(ctx, prompts, outs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sc {
		if s.Positions != 20 || s.Agree != 20 || math.Abs(s.LogLik-recorded[i]) > 1e-4 {
			t.Fatalf("response %d: %+v, engine recorded log-lik %v", i, s, recorded[i])
		}
	}
}

// TestStudyOnTinyPair sweeps r2r-random on the real pair: at p = 1 the
// large model writes everything and agreement is exactly 1; at p = 0 the
// small model writes everything, agreement is below 1 and the large model
// finds the text less likely.
func TestStudyOnTinyPair(t *testing.T) {
	ex := []Example{{Prompt: "Once upon a time"}, {Prompt: "The little dog"}, {Prompt: "Tom and his mom"}}
	s := Study{Models: tinyPair(t), Registry: builtin.Registry(), Algorithm: "r2r-random", Param: "p",
		Values: []string{"0", "1"}, Examples: ex, Options: Options{MaxTokens: 24, Concurrency: 2}}
	pts, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := pts[0], pts[1]
	if p1.LargeShare != 1 || p1.Agreement != 1 || p1.Quality != 1 || p1.Responses != 3 {
		t.Fatalf("p=1: %+v", p1)
	}
	if p0.LargeShare != 0 || p0.Agreement >= 1 || !(p0.LogLik < p1.LogLik) || p0.Responses != 3 {
		t.Fatalf("p=0: %+v (p=1: %+v)", p0, p1)
	}
}

// TestCurveOnTinyPair runs a curve of two arms end to end and draws it.
func TestCurveOnTinyPair(t *testing.T) {
	ex := []Example{{Prompt: "Once upon a time"}, {Prompt: "The little dog"}}
	c := Curve{Models: tinyPair(t), Registry: builtin.Registry(), Examples: ex,
		Options: Options{MaxTokens: 16, Concurrency: 2},
		Arms: []Arm{{Label: "llm", Algorithm: "single", Param: "model", Values: []string{"1"}},
			{Label: "r-stitch", Algorithm: "r-stitch", Param: "tau", Values: []string{"0", "0.3", "1"}}}}
	calls := 0
	series, err := RunCurve(context.Background(), c, func(Series) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(series) != 2 || len(series[1].Points) != 3 {
		t.Fatalf("%d progress calls, series %+v", calls, series)
	}
	if p := series[0].Points[0]; p.Agreement != 1 || p.LargeShare != 1 {
		t.Fatalf("the large model alone: %+v", p)
	}
	if p := series[1].Points[2]; p.LargeShare != 0 || p.Agreement >= 1 {
		t.Fatalf("r-stitch τ=1 never switches: %+v", p)
	}
	r := NewReport(series, []float64{0.1, 0.5})
	if a := r.AtShare[0].Agreement; a[0] != nil || a[1] != nil {
		t.Fatal("the large model alone measured no share below 100%")
	}
	if a := r.AtShare[1].Agreement; a[0] == nil || *a[0] < series[1].Points[2].Agreement {
		t.Fatal("r-stitch's curve at 10% is at least its quality at share 0")
	}
	path := filepath.Join(t.TempDir(), "q.png")
	if err := PlotCurves(path, "test", series, r.Shares); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatal(err)
	}
	if _, err := RunCurve(context.Background(), Curve{Models: c.Models, Examples: ex, Arms: []Arm{c.Arms[0], c.Arms[0]}}, nil); err == nil {
		t.Fatal("two arms with one label accepted")
	}
}
