package sim

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// TestPoolIsTheMeanOfStepHiddenStates: Pool equals the mean of the hidden
// states Step gives at each position of the same tokens (decoded one at a
// time), and leaves the engine's sequences alone.
func TestPoolIsTheMeanOfStepHiddenStates(t *testing.T) {
	e := New(Config{HiddenSize: 16, VocabSize: 100})
	tokens := []int32{1, 17, 33, 5, 60, 79}
	ctx := context.Background()
	sum := make([]float64, 16)
	out := make([]engine.Output, 1)
	for _, tok := range tokens {
		if err := e.Step(ctx, []engine.Input{{Seq: 7, Tokens: []int32{tok}, Want: engine.WantHidden}}, out); err != nil {
			t.Fatal(err)
		}
		for k, v := range out[0].Hidden {
			sum[k] += float64(v)
		}
	}
	want := make([]float32, 16)
	for k := range sum {
		want[k] = float32(sum[k] / float64(len(tokens)))
	}
	got := make([]float32, 16)
	if err := e.Pool(ctx, tokens, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Pool %v\nmean of Step's hidden states %v", got, want)
	}
	if e.Sequences() != 1 || e.Pooling() != engine.PoolingMean {
		t.Fatalf("%d sequences after Pool (want the one Step made), pooling %v", e.Sequences(), e.Pooling())
	}
	other := make([]float32, 16)
	if err := e.Pool(ctx, tokens[:5], other); err != nil || slices.Equal(other, got) {
		t.Fatalf("a shorter sequence pooled the same (%v)", err)
	}
}

// TestPoolRefusesBadInput: empty, too long, out of the vocabulary, a short
// destination and an ended context.
func TestPoolRefusesBadInput(t *testing.T) {
	e := New(Config{HiddenSize: 8, VocabSize: 50, ContextLength: 4})
	dst := make([]float32, 8)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		toks []int32
		dst  []float32
		want error
	}{
		{"empty", ctx, nil, dst, engine.ErrBadInput},
		{"too long", ctx, []int32{3, 4, 5, 6, 7}, dst, engine.ErrContextFull},
		{"outside the vocabulary", ctx, []int32{3, 50}, dst, engine.ErrBadInput},
		{"short destination", ctx, []int32{3}, dst[:7], engine.ErrBadInput},
		{"cancelled", cancelled, []int32{3}, dst, context.Canceled},
	} {
		if err := e.Pool(c.ctx, c.toks, c.dst); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
