package enginetest

import (
	"context"
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Fake is a deterministic engine for tests of what drives engines (the
// sub-server loop, the baselines): steps take no time, the token after a
// sequence is a function of the whole sequence (Next, or a hash), every
// sequence's tokens can be read back, and hooks can watch, hold or fail
// steps and truncations. It keeps the engine contract (its own test runs
// the suite on it). Like any engine it is used by one goroutine at a time;
// set the fields before the first call.
type Fake struct {
	// Next, when set, is the token sampled after seq (the whole sequence
	// so far), whatever the sampling parameters.
	Next func(seq []int32) int32
	// StepHook, when set, is called by every valid step before anything
	// changes; an error fails the step (nothing advances).
	StepHook func(ctx context.Context, in []engine.Input) error
	// TruncateHook, when set, is called by every valid Truncate before
	// anything changes; an error fails it.
	TruncateHook func(seq engine.SeqID, n int) error

	info engine.Info
	seqs map[engine.SeqID][]int32
}

// NewFake returns a fake engine with a vocabulary of 64 tokens (BOS 1,
// EOS 2), hidden states of 8 values and the given context length.
func NewFake(contextLength int) *Fake {
	return &Fake{
		info: engine.Info{Name: "fake", Arch: "fake", VocabSize: 64, HiddenSize: 8, ContextLength: contextLength,
			BOS: 1, EOS: 2, Simulated: true},
		seqs: map[engine.SeqID][]int32{},
	}
}

// Info reports the fake model's facts.
func (f *Fake) Info() engine.Info { return f.info }

// Tokens returns a copy of seq's tokens (nil for an unknown sequence).
func (f *Fake) Tokens(seq engine.SeqID) []int32 {
	return append([]int32(nil), f.seqs[seq]...)
}

// Sequences reports how many sequences hold tokens or were stepped and
// not released.
func (f *Fake) Sequences() int { return len(f.seqs) }

// Step validates the batch, calls StepHook and appends the tokens.
func (f *Fake) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	if len(out) < len(in) {
		return fmt.Errorf("fake: %d outputs for %d inputs: %w", len(out), len(in), engine.ErrBadInput)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: step: %w", err)
	}
	if err := f.check(in); err != nil {
		return err
	}
	if f.StepHook != nil {
		if err := f.StepHook(ctx, in); err != nil {
			return fmt.Errorf("fake: step: %w", err)
		}
	}
	for i := range in {
		ip := &in[i]
		old := len(f.seqs[ip.Seq])
		s := append(f.seqs[ip.Seq], ip.Tokens...)
		f.seqs[ip.Seq] = s
		raw := allowed(f.token(s, ip.Sampling), ip.AllowFor(len(ip.Tokens)-1))
		var o engine.Output
		if ip.Want&engine.WantAllTokens != 0 {
			for j := range ip.Tokens {
				o.Tokens = append(o.Tokens, f.sampled(allowed(f.token(s[:old+j+1], ip.Sampling), ip.AllowFor(j)), &ip.Sampling, old+j+1, ip.AllowFor(j)))
			}
			o.Token = o.Tokens[len(o.Tokens)-1]
		} else {
			o.Token = f.sampled(raw, &ip.Sampling, len(s), ip.AllowFor(len(ip.Tokens)-1))
		}
		if ip.Want&engine.WantLogits != 0 {
			o.Logits = f.logits(raw)
		}
		if ip.Want&engine.WantHidden != 0 {
			o.Hidden = make([]float32, f.info.HiddenSize)
			h := hash(s)
			for k := range o.Hidden {
				h = mix(h + uint64(k))
				o.Hidden[k] = float32(h>>40)/(1<<24) - 0.5
			}
		}
		out[i] = o
	}
	return nil
}

// check validates a batch against the contract.
func (f *Fake) check(in []engine.Input) error {
	seen := make(map[engine.SeqID]bool, len(in))
	for _, ip := range in {
		switch {
		case len(ip.Tokens) == 0:
			return fmt.Errorf("fake: seq %d: no tokens: %w", ip.Seq, engine.ErrBadInput)
		case seen[ip.Seq]:
			return fmt.Errorf("fake: seq %d twice in one step: %w", ip.Seq, engine.ErrBadInput)
		case len(f.seqs[ip.Seq])+len(ip.Tokens) > f.info.ContextLength:
			return fmt.Errorf("fake: seq %d: %w", ip.Seq, engine.ErrContextFull)
		}
		seen[ip.Seq] = true
		for _, t := range ip.Tokens {
			if t < 0 || int(t) >= f.info.VocabSize {
				return fmt.Errorf("fake: seq %d: token %d: %w", ip.Seq, t, engine.ErrBadInput)
			}
		}
	}
	return nil
}

// allowed returns tok if allow permits it (or is nil), else the lowest
// allowed token.
func allowed(tok int32, allow []uint64) int32 {
	if allow == nil || engine.Allowed(allow, tok) {
		return tok
	}
	for w, bits := range allow {
		for k := range 64 {
			if bits&(1<<k) != 0 {
				return int32(w*64 + k)
			}
		}
	}
	return tok
}

// logits are the fake's logits when raw is its token: raw's is the largest.
func (f *Fake) logits(raw int32) []float32 {
	l := make([]float32, f.info.VocabSize)
	l[raw] = 1
	return l
}

// sampled is the token drawn at pos when the fake's own is raw: raw, or
// with penalties or min-p the shared sampler's draw over its logits.
func (f *Fake) sampled(raw int32, sp *engine.Sampling, pos int, allow []uint64) int32 {
	var s engine.Sampler
	l := f.logits(raw)
	if allow != nil {
		engine.Restrict(l, allow)
	}
	if !sp.Adjusts() && !(sp.MinP > 0 && sp.Temperature > 0) {
		if sp.Records() {
			s.Record(l, raw, sp, pos)
		}
		return raw
	}
	return s.Sample(l, sp, pos)
}

// token is the token sampled after s.
func (f *Fake) token(s []int32, sp engine.Sampling) int32 {
	if f.Next != nil {
		return f.Next(s)
	}
	h := hash(s)
	if sp.Temperature > 0 {
		h = mix(h ^ mix(sp.Seed+uint64(len(s))))
	}
	return int32(3 + h%uint64(f.info.VocabSize-3))
}

// Truncate keeps the first n tokens of seq; n at or beyond its length
// changes nothing.
func (f *Fake) Truncate(seq engine.SeqID, n int) error {
	if n < 0 {
		return fmt.Errorf("fake: truncate to %d: %w", n, engine.ErrBadInput)
	}
	if f.TruncateHook != nil {
		if err := f.TruncateHook(seq, n); err != nil {
			return fmt.Errorf("fake: truncate: %w", err)
		}
	}
	if s, ok := f.seqs[seq]; ok && n < len(s) {
		f.seqs[seq] = s[:n]
	}
	return nil
}

// Release forgets seq.
func (f *Fake) Release(seq engine.SeqID) { delete(f.seqs, seq) }

// Close forgets every sequence.
func (f *Fake) Close() error {
	clear(f.seqs)
	return nil
}

func hash(s []int32) uint64 {
	h := uint64(0x5eed)
	for _, t := range s {
		h = mix(h ^ uint64(uint32(t)))
	}
	return h
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

var _ engine.Engine = (*Fake)(nil)
