package routertrain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route/r2r"
)

// Judges of --verify: how two continuations are compared.
const (
	// JudgeExact calls a position divergent when the large model's K
	// tokens after the small model's token differ from its K tokens after
	// its own.
	JudgeExact = "exact"
	// JudgeLikelihood calls a position divergent when the large model's
	// mean log-probability of the continuation from the small model's
	// token is lower than of its own by more than a margin.
	JudgeLikelihood = "likelihood"
)

// CollectOptions configure the generation of training data.
type CollectOptions struct {
	// MaxTokens is how many tokens the small model writes per prompt (at
	// most; the context of either model and a stop token end it sooner).
	MaxTokens int
	// Sampling is the small model's sampling (zero: greedy). Each prompt
	// draws from Seed plus its index.
	Sampling engine.Sampling
	// TopK is the number of top logits among the features.
	TopK int
	// Batch is the number of sequences per engine step.
	Batch int
	// Verify, when positive, keeps a differing position as a positive
	// only if the continuations from the two tokens, each continued by
	// the large model for Verify tokens, diverge by Judge (Margin nats for
	// JudgeLikelihood).
	Verify int
	Judge  string
	Margin float64
	// Stop reports the tokens that end a generation (which are still
	// positions); nil stops at the small model's EOS.
	Stop func(int32) bool
	// Progress, when set, is told the phase and how many of the prompts
	// (or verifications) are done.
	Progress func(phase string, done, total int)
}

// maxTopK bounds the top logits among the features (the r2r router's
// bound on its widths).
const maxTopK = 1 << 16

// Dataset is the labelled positions: one row of features per token the
// small model wrote, as the router sees it when serving.
type Dataset struct {
	// H, E and K are the widths of the hidden state, the token embedding
	// and the top logits; a row is [h ‖ e ‖ topk], H+E+K values.
	H, E, K int
	// X holds the rows, Y the labels (1: the large model would have
	// written another token there, after verification when asked).
	X []float32
	Y []uint8
	// Tok is the token the small model wrote at each position, Prompt the
	// index of the prompt it wrote it from.
	Tok    []int32
	Prompt []int32
	// Gap is, per position, the large model's log-probability of its own
	// greedy token minus that of the small model's token, in nats (0
	// where they agree): what sending the position to the large model
	// gains by the large model's measure.
	Gap []float32
	// Differ counts the positions where the large model's token differs,
	// before verification.
	Differ int
}

// Len is the number of positions.
func (d *Dataset) Len() int { return len(d.Y) }

// Positives is the number of positions labelled 1.
func (d *Dataset) Positives() int {
	n := 0
	for _, y := range d.Y {
		n += int(y)
	}
	return n
}

// sample is one prompt's generation: its tokens and the feature rows of
// the generated positions.
type sample struct {
	prompt []int32
	gen    []int32
	rows   []float32
	label  []uint8
	gap    []float32
}

// collector runs the two engines.
type collector struct {
	slm, llm engine.Engine
	o        CollectOptions
	H, W     int
	ctxLen   int
	nextSeq  engine.SeqID
	embed    engine.Embedder
}

// Collect has the small model write from every prompt and labels each
// position by the large model given the same prefix. Prompts are token
// ids (BOS first when the model wants one).
func Collect(ctx context.Context, slm, llm engine.Engine, prompts [][]int32, o CollectOptions) (*Dataset, error) {
	si, li := slm.Info(), llm.Info()
	switch {
	case len(prompts) == 0:
		return nil, errors.New("routertrain: no prompts")
	case si.VocabSize != li.VocabSize:
		return nil, fmt.Errorf("routertrain: the small model has %d tokens, the large one %d: they must share a vocabulary", si.VocabSize, li.VocabSize)
	case si.HiddenSize <= 0:
		return nil, fmt.Errorf("routertrain: the small model reports hidden width %d", si.HiddenSize)
	case o.MaxTokens <= 0 || o.TopK <= 0 || o.TopK > maxTopK || o.Verify < 0:
		return nil, fmt.Errorf("routertrain: max tokens %d must be positive, top-k %d in [1, %d], verify %d not negative", o.MaxTokens, o.TopK, maxTopK, o.Verify)
	case !(o.Sampling.Temperature >= 0) || math.IsNaN(o.Margin):
		return nil, fmt.Errorf("routertrain: temperature %v must not be negative, margin %v must be a number", o.Sampling.Temperature, o.Margin)
	case o.Verify > 0 && o.Judge != JudgeExact && o.Judge != JudgeLikelihood:
		return nil, fmt.Errorf("routertrain: judge %q: want %s or %s", o.Judge, JudgeExact, JudgeLikelihood)
	}
	o.Batch = max(o.Batch, 1)
	if o.Stop == nil {
		o.Stop = func(t int32) bool { return si.EOS >= 0 && t == si.EOS }
	}
	c := &collector{slm: slm, llm: llm, o: o, H: si.HiddenSize, W: 2*si.HiddenSize + o.TopK,
		ctxLen: min(si.ContextLength, li.ContextLength), nextSeq: 1}
	c.embed, _ = slm.(engine.Embedder)
	samples := make([]*sample, len(prompts))
	for i, p := range prompts {
		if len(p) == 0 || len(p) > c.ctxLen {
			return nil, fmt.Errorf("routertrain: prompt %d has %d tokens; the models' context holds %d", i, len(p), c.ctxLen)
		}
		samples[i] = &sample{prompt: p}
	}
	for from := 0; from < len(samples); from += o.Batch {
		batch := samples[from:min(from+o.Batch, len(samples))]
		if err := c.generate(ctx, batch, from); err != nil {
			return nil, err
		}
		if err := c.label(ctx, batch); err != nil {
			return nil, err
		}
		c.progress("generating", from+len(batch), len(samples))
	}
	ds := &Dataset{H: c.H, E: c.H, K: o.TopK}
	for _, s := range samples {
		for _, y := range s.label {
			ds.Differ += int(y)
		}
	}
	if o.Verify > 0 {
		if err := c.verify(ctx, samples); err != nil {
			return nil, err
		}
	}
	for i, s := range samples {
		for range s.gen {
			ds.Prompt = append(ds.Prompt, int32(i))
		}
		ds.X = append(ds.X, s.rows...)
		ds.Y = append(ds.Y, s.label...)
		ds.Gap = append(ds.Gap, s.gap...)
		ds.Tok = append(ds.Tok, s.gen...)
	}
	return ds, nil
}

func (c *collector) progress(phase string, done, total int) {
	if c.o.Progress != nil {
		c.o.Progress(phase, done, total)
	}
}

// seqs returns n new sequence ids.
func (c *collector) seqs(n int) []engine.SeqID {
	out := make([]engine.SeqID, n)
	for i := range out {
		out[i] = c.nextSeq
		c.nextSeq++
	}
	return out
}

// generate runs the small model over a batch of prompts (the first is
// prompt number first), recording each generated position's features.
func (c *collector) generate(ctx context.Context, batch []*sample, first int) error {
	ids := c.seqs(len(batch))
	defer func() {
		for _, id := range ids {
			c.slm.Release(id)
		}
	}()
	in := make([]engine.Input, 0, len(batch))
	out := make([]engine.Output, len(batch))
	owner := make([]*sample, 0, len(batch))
	for i, s := range batch {
		sp := c.o.Sampling
		sp.Seed += uint64(first + i)
		in = append(in, engine.Input{Seq: ids[i], Tokens: s.prompt, Want: engine.WantHidden | engine.WantLogits, Sampling: sp})
		owner = append(owner, s)
	}
	for len(in) > 0 {
		if err := c.slm.Step(ctx, in, out); err != nil {
			return fmt.Errorf("routertrain: small model: %w", err)
		}
		keep := 0
		for i := range in {
			s, o := owner[i], out[i]
			if err := c.record(s, o); err != nil {
				return err
			}
			limit := min(c.o.MaxTokens, c.ctxLen-len(s.prompt)+1)
			if c.o.Stop(o.Token) || len(s.gen) >= limit {
				continue
			}
			in[keep], owner[keep] = in[i], s
			in[keep].Tokens = s.gen[len(s.gen)-1:]
			keep++
		}
		in, owner = in[:keep], owner[:keep]
	}
	return nil
}

// record appends a step's token and features to s.
func (c *collector) record(s *sample, o engine.Output) error {
	if len(o.Hidden) != c.H || len(o.Logits) != c.slm.Info().VocabSize {
		return fmt.Errorf("routertrain: the small model returned %d hidden values and %d logits, want %d and %d",
			len(o.Hidden), len(o.Logits), c.H, c.slm.Info().VocabSize)
	}
	s.gen = append(s.gen, o.Token)
	n := len(s.rows)
	s.rows = slices.Grow(s.rows, c.W)[:n+c.W]
	row := s.rows[n:]
	copy(row, o.Hidden)
	clear(row[c.H : 2*c.H])
	if c.embed != nil {
		c.embed.Embed(o.Token, row[c.H:2*c.H])
	}
	TopK(o.Logits, row[2*c.H:])
	return nil
}

// label runs the large model over each prompt and then, one decode step
// per position, over the small model's tokens, and labels position j 1
// when its greedy token after the prefix differs from the small model's.
// The gap of a position is how much more log-probability the large model
// gives its own token than the small model's there (0 where they agree).
func (c *collector) label(ctx context.Context, batch []*sample) error {
	ids := c.seqs(len(batch))
	defer func() {
		for _, id := range ids {
			c.llm.Release(id)
		}
	}()
	in := make([]engine.Input, len(batch))
	out := make([]engine.Output, len(batch))
	owner := slices.Clone(batch)
	for i, s := range batch {
		in[i] = engine.Input{Seq: ids[i], Tokens: s.prompt, Want: engine.WantLogits}
		s.label, s.gap = make([]uint8, 0, len(s.gen)), make([]float32, 0, len(s.gen))
	}
	for len(in) > 0 {
		if err := c.llm.Step(ctx, in, out[:len(in)]); err != nil {
			return fmt.Errorf("routertrain: large model: %w", err)
		}
		keep := 0
		for i := range in {
			s, o := owner[i], out[i]
			t := s.gen[len(s.label)]
			if len(o.Logits) != c.llm.Info().VocabSize || o.Token < 0 || int(o.Token) >= len(o.Logits) {
				return fmt.Errorf("routertrain: the large model returned %d logits and token %d", len(o.Logits), o.Token)
			}
			s.label = append(s.label, b2u(o.Token != t))
			s.gap = append(s.gap, o.Logits[o.Token]-o.Logits[t])
			if len(s.label) == len(s.gen) {
				continue
			}
			in[keep], owner[keep] = in[i], s
			in[keep].Tokens = []int32{t}
			keep++
		}
		in, owner = in[:keep], owner[:keep]
	}
	return nil
}

// b2u is 1 for true.
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// TopK writes the len(dst) largest logits in descending order, as the r2r
// router reads them when serving: −∞ logits (tokens ruled out) are left
// out, and −∞ pads a vocabulary smaller than len(dst). The router reads a
// pad as 0, or leaves it out of the softmax with normalize_input (the
// network does the same).
func TopK(logits, dst []float32) {
	n := r2r.TopK(logits, dst)
	for i := n; i < len(dst); i++ {
		dst[i] = float32(math.Inf(-1))
	}
}
