package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

func TestReadPrompts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	enc := func(s string) []int32 { return []int32{1, int32(len(s))} }
	ps, err := ReadPrompts(write("a.jsonl", `{"prompt":"Once upon","answer":"x"}`+"\n\n"+`{"text":"a time"}`+"\nplain line\n"), enc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Prompt{{"Once upon", []int32{1, 9}}, {"a time", []int32{1, 6}}, {"plain line", []int32{1, 10}}}
	if len(ps) != 3 || !slices.EqualFunc(ps, want, func(a, b Prompt) bool { return a.Text == b.Text && slices.Equal(a.IDs, b.IDs) }) {
		t.Fatalf("%+v", ps)
	}
	if ps, err := ReadPrompts(write("b.txt", "x\n"), nil); err != nil || ps[0].IDs != nil || ps[0].Text != "x" {
		t.Fatalf("no tokenizer: %+v, %v", ps, err)
	}
	for body, msg := range map[string]string{
		"\n\n":               "holds no prompt",
		`{"answer":"x"}`:     `no "prompt" or "text"`,
		`{"prompt":`:         "c.jsonl:1",
		"ok\n" + `{"prompt"`: "c.jsonl:2",
	} {
		if _, err := ReadPrompts(write("c.jsonl", body), enc); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", body, err, msg)
		}
	}
	if _, err := ReadPrompts(write("d.txt", "x\n"), func(string) []int32 { return nil }); err == nil || !strings.Contains(err.Error(), "no tokens") {
		t.Errorf("empty encoding: %v", err)
	}
}

func TestLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for range 2000 {
		n := drawLen(rng, 10, 0.5)
		if n < 5 || n > 15 {
			t.Fatalf("drew %d from 10 ± 50%%", n)
		}
		seen[n] = true
	}
	if len(seen) != 11 {
		t.Fatalf("drew %d distinct lengths of 11", len(seen))
	}
	if drawLen(rng, 10, 0) != 10 || drawLen(rng, 1, 0.9) != 1 {
		t.Fatal("fixed lengths")
	}
	o := Options{PromptLen: 20, MaxTokens: 100, RangeRatio: 0.25}
	if p, out := o.Longest(); p != 25 || out != 125 {
		t.Fatalf("longest %d %d", p, out)
	}
	o.Prompts = []Prompt{{IDs: make([]int32, 7)}, {IDs: make([]int32, 30)}}
	if p, _ := o.Longest(); p != 30 {
		t.Fatalf("longest file prompt %d", p)
	}
}

// recorder is a System that answers every request at once with its full
// length and records what it was asked.
type recorder struct {
	mu      sync.Mutex
	prompts [][]int32
	params  []route.Params
	texts   []string
	info    []engine.Info
}

func (r *recorder) Submit(_ context.Context, prompt []int32, p route.Params) (*stream.Stream, error) {
	r.mu.Lock()
	r.prompts, r.params = append(r.prompts, slices.Clone(prompt)), append(r.params, p)
	r.mu.Unlock()
	s := stream.New(0, nil)
	s.Push(make([]int32, p.MaxTokens), make([]int8, p.MaxTokens))
	s.Finish(stream.Length, nil)
	return s, nil
}

func (r *recorder) Close() error { return nil }

type modeled struct{ *recorder }

func (m modeled) Models() []engine.Info { return m.info }

type texted struct{ *recorder }

func (x texted) SubmitPrompt(ctx context.Context, p Prompt, params route.Params) (*stream.Stream, error) {
	x.mu.Lock()
	x.texts = append(x.texts, p.Text)
	x.mu.Unlock()
	return x.Submit(ctx, p.IDs, params)
}

func runShort(t *testing.T, sys System, o Options) {
	t.Helper()
	o.Concurrency, o.Duration = 2, 20*time.Millisecond
	if _, err := Run(context.Background(), sys, o); err != nil {
		t.Fatal(err)
	}
}

// TestWorkload checks what requests a run sends: generated prompts in the
// models' vocabulary, starting with their BOS, lengths in range, EOS
// ignored unless kept; prompts from a list, as text where the system
// takes text.
func TestWorkload(t *testing.T) {
	r := &recorder{info: []engine.Info{{VocabSize: 40, BOS: 7}, {VocabSize: 30, BOS: 2}}}
	runShort(t, modeled{r}, Options{PromptLen: 8, MaxTokens: 6, RangeRatio: 0.5})
	for i, p := range r.prompts {
		if len(p) < 4 || len(p) > 12 || p[0] != 7 || r.params[i].MaxTokens < 3 || r.params[i].MaxTokens > 9 || !r.params[i].IgnoreEOS {
			t.Fatalf("request %d: prompt %v, params %+v", i, p, r.params[i])
		}
		for _, id := range p[1:] {
			if id < 3 || id >= 30 {
				t.Fatalf("prompt %v outside the smaller vocabulary", p)
			}
		}
	}
	r = &recorder{}
	runShort(t, r, Options{PromptLen: 3, MaxTokens: 2, Vocab: 5, BOS: -1, KeepEOS: true})
	for i, p := range r.prompts {
		if len(p) != 3 || slices.ContainsFunc(p, func(id int32) bool { return id < 3 || id >= 5 }) || r.params[i].IgnoreEOS {
			t.Fatalf("request %d: prompt %v, params %+v", i, p, r.params[i])
		}
	}
	list := []Prompt{{Text: "a", IDs: []int32{1, 2}}, {Text: "b", IDs: []int32{1, 3}}}
	r = &recorder{}
	runShort(t, texted{r}, Options{Prompts: list, MaxTokens: 2})
	if len(r.texts) == 0 || slices.ContainsFunc(r.texts, func(s string) bool { return s != "a" && s != "b" }) {
		t.Fatalf("texts %v", r.texts)
	}
	_, err := Run(context.Background(), &recorder{}, Options{Concurrency: 1, Duration: time.Second, Prompts: []Prompt{{Text: "a"}}})
	if err == nil || !strings.Contains(err.Error(), "no token ids") {
		t.Fatalf("a text prompt for a system that takes ids: %v", err)
	}
}

// TestAddServerShares merges windows whose share is a server's account,
// one of them without any: the unknown window weighs nothing.
func TestAddServerShares(t *testing.T) {
	r := Result{Tokens: 100, Seconds: 1, RoutedFraction: 0.3, ServerShare: true, shareOver: 100}
	r.Add(Result{Tokens: 50, Seconds: 1, ServerShare: true, ShareUnknown: true})
	if r.RoutedFraction != 0.3 || r.ShareUnknown || !r.ServerShare || r.TokensPerSecond != 75 {
		t.Fatalf("%+v", r)
	}
	r.Add(Result{Tokens: 100, Seconds: 1, RoutedFraction: 0.6, shareOver: 100})
	if math.Abs(r.RoutedFraction-0.45) > 1e-12 {
		t.Fatalf("share %v", r.RoutedFraction)
	}
	var u Result
	u.Add(Result{Tokens: 10, Seconds: 1, ServerShare: true, ShareUnknown: true})
	if !u.ShareUnknown {
		t.Fatalf("%+v", u)
	}
}
