package cluster_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/server"
)

// TestRemoteSubserversStopAtStops: sub-servers in child processes end a
// request at its stop token and at the token that completes its stop
// string themselves (the deployment's own stream, no HTTP relay in
// between, ends there with finish reason "stop").
func TestRemoteSubserversStopAtStops(t *testing.T) {
	l, out := start(t, "zero", 100*time.Millisecond, "0.35")
	defer func() {
		if t.Failed() {
			t.Logf("children:\n%s", out)
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prompt := []int32{5, 6, 7, 8}
	p := route.Params{MaxTokens: 24, Seed: 9, Sampling: engine.Sampling{Seed: 9}}
	run := func(p route.Params) ([]int32, string) {
		t.Helper()
		s, err := l.Submit(ctx, prompt, p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens, res.Reason
	}
	full, why := run(p)
	if len(full) != 24 || why != "length" {
		t.Fatalf("without stops: %d tokens (%s)", len(full), why)
	}
	// A stop token: the output ends before its first occurrence.
	withID := p
	withID.StopIDs = []int32{full[10]}
	got, why := run(withID)
	want := full[:index(full, full[10])]
	if why != "stop" || !slices.Equal(got, want) {
		t.Fatalf("stop token %d: %v (%s), want %v (stop)", full[10], got, why, want)
	}
	// A stop string: the text of output tokens 12 and 13 (the sim
	// vocabulary's texts, as the children hold them).
	text := simPieces(t, ctx)
	s := string(text(full[12])) + string(text(full[13]))
	if s == "" {
		t.Fatalf("tokens %d and %d have no text", full[12], full[13])
	}
	withStr := p
	withStr.Stop = []string{s}
	got, why = run(withStr)
	var buf []byte
	end := len(full)
	for i, tok := range full {
		buf = append(buf, text(tok)...)
		if bytes.Contains(buf, []byte(s)) {
			end = i + 1
			break
		}
	}
	if why != "stop" || !slices.Equal(got, full[:end]) {
		t.Fatalf("stop string %q: %d tokens (%s), want the %d up to the one completing it (stop)", s, len(got), why, end)
	}
}

// simPieces returns the texts of the default sim model's tokens.
func simPieces(t *testing.T, ctx context.Context) func(int32) []byte {
	t.Helper()
	m := config.Model{Name: "slm", Engine: "sim", Profile: "zero/a", Seed: 1}
	o, err := loader.Builtin().Open(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Engine.Close()
	v := server.OutputVocab(o.Text, o.Engine.Info().VocabSize)()
	return v.Piece
}

func index(s []int32, x int32) int {
	if i := slices.Index(s, x); i >= 0 {
		return i
	}
	return len(s)
}
