// Package sim is TokenRouter's simulated engine: a model whose step takes
// wall-clock time from a latency profile (base cost, cost per sequence, cost
// per extended token) and whose tokens are a deterministic function of the
// sequence prefix and a seed. It is the embedded default, so the whole system
// runs on any machine without weights, and it makes hand-off bugs visible:
// a lost, duplicated or reordered token changes every later token.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Profile is a step-latency model: a step over b sequences that append t
// tokens in total beyond one each takes Base + PerSeq·b + PerToken·t.
type Profile struct {
	// Base is the fixed cost of a step.
	Base time.Duration
	// PerSeq is the cost per sequence in the batch.
	PerSeq time.Duration
	// PerToken is the cost per extended token beyond the first of each
	// sequence (prefill work).
	PerToken time.Duration
}

// Latency returns the step time for b sequences appending t tokens in total.
func (p Profile) Latency(b, t int) time.Duration {
	extra := t - b
	if extra < 0 {
		extra = 0
	}
	return p.Base + time.Duration(b)*p.PerSeq + time.Duration(extra)*p.PerToken
}

// Preset is a named set of model profiles (one per model, in routing order:
// the small model first).
type Preset struct {
	// Name is the preset's name ("paper-r2r").
	Name string
	// Models names each model.
	Models []string
	// Profiles holds one latency profile per model.
	Profiles []Profile
	// About says where the numbers come from.
	About string
}

// Presets returns the built-in profiles.
func Presets() []Preset {
	return []Preset{
		{
			Name:     "paper-r2r",
			Models:   []string{"slm", "llm"},
			Profiles: []Profile{{Base: 6 * time.Millisecond}, {Base: 27900 * time.Microsecond}},
			About:    "R2R pair (0.6B SLM, 32B LLM): measured 6.0 ms and 27.9 ms per step, independent of batch size",
		},
		{
			Name:   "paper-r2r-batched",
			Models: []string{"slm", "llm"},
			Profiles: []Profile{
				{Base: 6 * time.Millisecond, PerSeq: 50 * time.Microsecond, PerToken: 5 * time.Microsecond},
				{Base: 27900 * time.Microsecond, PerSeq: 200 * time.Microsecond, PerToken: 20 * time.Microsecond},
			},
			About: "paper-r2r with a per-sequence and per-extend-token cost, for studies where batch size matters",
		},
		{
			Name:     "zero",
			Models:   []string{"a", "b", "c"},
			Profiles: []Profile{{}, {}, {}},
			About:    "no latency at all: measures the runtime's own overhead",
		},
	}
}

// LookupPreset returns the named preset.
func LookupPreset(name string) (Preset, error) {
	var names []string
	for _, p := range Presets() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return Preset{}, fmt.Errorf("sim: unknown profile %q (have %s)", name, strings.Join(names, ", "))
}

// Config configures a simulated model.
type Config struct {
	// Name is the model name reported by Info.
	Name string
	// Profile is the step-latency profile.
	Profile Profile
	// Seed makes this model's tokens differ from another model's.
	Seed uint64
	// VocabSize is the number of token ids (default 32000). Tokens are
	// drawn from [3, VocabSize): the simulated model never emits BOS (1) or
	// EOS (2), so requests end at their token limit.
	VocabSize int
	// HiddenSize is the width of the synthetic hidden state (default 64).
	HiddenSize int
	// ContextLength bounds each sequence (default 32768).
	ContextLength int
	// Agree is the probability that this model samples the same token as a
	// model with seed AgreeSeed would for the same prefix (decided per
	// position), so a small model can track a large one the way real model
	// pairs do (speculative decoding accepts such tokens).
	Agree float64
	// AgreeSeed is the seed of the model this one agrees with.
	AgreeSeed uint64
	// Spin is the shortest stretch before a step's deadline that the engine
	// spins instead of sleeping, for accurate step times (default 200µs; the
	// window grows with observed timer lateness up to 3ms; negative disables
	// spinning).
	Spin time.Duration
}

// Engine is a simulated engine. It is not safe for concurrent use.
type Engine struct {
	cfg    Config
	seqs   map[engine.SeqID]*seq
	free   []*seq
	inStep map[engine.SeqID]struct{} // the current step's sequences
	old    []int                     // per input: length before the step, -1 if new
	toks   []int32
	logit  []float32
	hid    []float32
	timer  *time.Timer
	spin   time.Duration // current spin window
	late   time.Duration // average timer lateness
	debt   time.Duration // overshoot not yet paid back
}

// seq holds one sequence's prefix hashes: h[i] is the hash of the first i+1
// tokens, so Truncate is a reslice.
type seq struct {
	h []uint64
}

// New returns a simulated engine.
func New(cfg Config) *Engine {
	if cfg.VocabSize <= 3 {
		cfg.VocabSize = 32000
	}
	if cfg.HiddenSize <= 0 {
		cfg.HiddenSize = 64
	}
	if cfg.ContextLength <= 0 {
		cfg.ContextLength = 32768
	}
	if cfg.Spin == 0 {
		cfg.Spin = 200 * time.Microsecond
	}
	if cfg.Name == "" {
		cfg.Name = "sim"
	}
	return &Engine{cfg: cfg, seqs: map[engine.SeqID]*seq{}, inStep: map[engine.SeqID]struct{}{}, spin: time.Millisecond}
}

// Info reports the simulated model's facts.
func (e *Engine) Info() engine.Info {
	return engine.Info{
		Name: e.cfg.Name, Arch: "sim", VocabSize: e.cfg.VocabSize, HiddenSize: e.cfg.HiddenSize,
		ContextLength: e.cfg.ContextLength, BOS: 1, EOS: 2, Simulated: true,
	}
}

// Profile returns the engine's latency profile.
func (e *Engine) Profile() Profile { return e.cfg.Profile }

// Step appends tokens, computes the deterministic next tokens and returns
// once the profile's step time has elapsed since the call began. When ctx
// ends first, the step is undone and ctx's error returned.
func (e *Engine) Step(ctx context.Context, in []engine.Input, out []engine.Output) error {
	start := time.Now()
	if len(out) < len(in) {
		return fmt.Errorf("sim: %d outputs for %d inputs: %w", len(out), len(in), engine.ErrBadInput)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim: step: %w", err)
	}
	total, nAll, nLogit, nHid := 0, 0, 0, 0
	clear(e.inStep)
	for i := range in {
		n := len(in[i].Tokens)
		if n == 0 {
			return fmt.Errorf("sim: sequence %d: no tokens: %w", in[i].Seq, engine.ErrBadInput)
		}
		if _, dup := e.inStep[in[i].Seq]; dup {
			return fmt.Errorf("sim: sequence %d appears twice in one step: %w", in[i].Seq, engine.ErrBadInput)
		}
		e.inStep[in[i].Seq] = struct{}{}
		if s := e.seqs[in[i].Seq]; s != nil && len(s.h)+n > e.cfg.ContextLength ||
			n > e.cfg.ContextLength {
			return fmt.Errorf("sim: sequence %d: %w (limit %d)", in[i].Seq, engine.ErrContextFull, e.cfg.ContextLength)
		}
		total += n
		if in[i].Want&engine.WantAllTokens != 0 {
			nAll += n
		}
		if in[i].Want&engine.WantLogits != 0 {
			nLogit++
		}
		if in[i].Want&engine.WantHidden != 0 {
			nHid++
		}
	}
	e.toks = grow32(e.toks, nAll)
	e.logit = growF(e.logit, nLogit*e.cfg.VocabSize)
	e.hid = growF(e.hid, nHid*e.cfg.HiddenSize)
	var ta, tl, th int
	e.old = slices.Grow(e.old[:0], len(in))[:len(in)]
	for i := range in {
		s := e.seqs[in[i].Seq]
		e.old[i] = -1
		if s == nil {
			s = e.newSeq()
			e.seqs[in[i].Seq] = s
		} else {
			e.old[i] = len(s.h)
		}
		o := engine.Output{}
		all := in[i].Want&engine.WantAllTokens != 0
		if all {
			o.Tokens = e.toks[ta : ta+len(in[i].Tokens) : ta+len(in[i].Tokens)]
			ta += len(in[i].Tokens)
		}
		for j, t := range in[i].Tokens {
			prev := uint64(0x5eed)
			if len(s.h) > 0 {
				prev = s.h[len(s.h)-1]
			}
			h := mix(prev ^ mix(uint64(uint32(t))+0x9e3779b97f4a7c15))
			s.h = append(s.h, h)
			if all {
				o.Tokens[j] = e.token(h, in[i].Sampling, len(s.h))
			}
		}
		last := s.h[len(s.h)-1]
		o.Token = e.token(last, in[i].Sampling, len(s.h))
		if in[i].Want&engine.WantLogits != 0 {
			o.Logits = e.logit[tl : tl+e.cfg.VocabSize : tl+e.cfg.VocabSize]
			tl += e.cfg.VocabSize
			e.fillLogits(o.Logits, last, o.Token)
		}
		if in[i].Want&engine.WantHidden != 0 {
			o.Hidden = e.hid[th : th+e.cfg.HiddenSize : th+e.cfg.HiddenSize]
			th += e.cfg.HiddenSize
			for k := range o.Hidden {
				o.Hidden[k] = float32(unit(mix(last^uint64(k)*0xff51afd7ed558ccd)))*2 - 1
			}
		}
		out[i] = o
	}
	target := e.cfg.Profile.Latency(len(in), total)
	// Pay back earlier overshoot (up to a tenth of this step), so step
	// times are accurate on average even when the OS wakes us late.
	pay := min(e.debt, target/10)
	if err := e.wait(ctx, start.Add(target-pay)); err != nil {
		e.undo(in)
		return err
	}
	if target > 0 {
		e.debt += time.Since(start) - target
		e.debt = max(e.debt, 0)
	}
	return nil
}

// undo takes back the tokens the current step appended.
func (e *Engine) undo(in []engine.Input) {
	for i := range in {
		if e.old[i] >= 0 {
			s := e.seqs[in[i].Seq]
			s.h = s.h[:e.old[i]]
			continue
		}
		e.Release(in[i].Seq)
	}
}

// wait sleeps until deadline and spins the last stretch. Timer wake-ups on
// shared machines are often hundreds of microseconds late, so the spin
// window adapts: it tracks how late recent wake-ups were.
func (e *Engine) wait(ctx context.Context, deadline time.Time) error {
	spin := e.spin
	if e.cfg.Spin < 0 {
		spin = 0
	}
	if d := time.Until(deadline) - spin; d > 0 {
		if e.timer == nil {
			e.timer = time.NewTimer(d)
		} else {
			e.timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			e.timer.Stop()
			return fmt.Errorf("sim: step: %w", ctx.Err())
		case <-e.timer.C:
		}
		if e.cfg.Spin > 0 {
			late := time.Since(deadline.Add(-spin))
			// Exponential average of lateness; spin twice that, within bounds.
			e.late += (late - e.late) / 8
			e.spin = min(max(2*e.late, e.cfg.Spin), 3*time.Millisecond)
		}
	}
	for time.Now().Before(deadline) {
		// Let other goroutines (a peer sub-server woken by a hand-off)
		// run on this P while we wait; they are short.
		runtime.Gosched()
	}
	return nil
}

// token derives the sampled token from a prefix hash.
func (e *Engine) token(h uint64, s engine.Sampling, pos int) int32 {
	seed := e.cfg.Seed
	if e.cfg.Agree > 0 && unit(mix(h^e.cfg.Seed*0x2545f4914f6cdd1d)) < e.cfg.Agree {
		seed = e.cfg.AgreeSeed
	}
	x := mix(h ^ seed*0xd6e8feb86659fd93)
	if s.Temperature > 0 {
		x = mix(x ^ mix(s.Seed+uint64(pos)))
	}
	return int32(3 + x%uint64(e.cfg.VocabSize-3))
}

// fillLogits writes a synthetic distribution whose argmax is tok and whose
// spread varies with the prefix, so entropy-based routers see a signal.
func (e *Engine) fillLogits(l []float32, h uint64, tok int32) {
	sharp := 1 + 8*unit(mix(h^0xabcdef))
	x := h
	for k := range l {
		x = x*6364136223846793005 + 1442695040888963407
		l[k] = float32(unit(x>>11) * 2)
	}
	l[tok] = float32(2 + sharp)
}

// Embed writes a synthetic embedding of tok: a deterministic function of
// the token and the model's seed, with values in [-1, 1).
func (e *Engine) Embed(tok int32, dst []float32) {
	h := mix(uint64(uint32(tok)) ^ e.cfg.Seed*0x9e3779b97f4a7c15)
	for k := range dst {
		dst[k] = float32(unit(mix(h^uint64(k)*0xc2b2ae3d27d4eb4f)))*2 - 1
	}
}

// Truncate keeps the first n tokens of seq.
func (e *Engine) Truncate(id engine.SeqID, n int) error {
	s := e.seqs[id]
	if s == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("sim: truncate unknown sequence %d: %w", id, engine.ErrBadInput)
	}
	if n < 0 || n > len(s.h) {
		return fmt.Errorf("sim: truncate sequence %d to %d of %d: %w", id, n, len(s.h), engine.ErrBadInput)
	}
	s.h = s.h[:n]
	return nil
}

// Sequences reports how many sequences hold KV state.
func (e *Engine) Sequences() int { return len(e.seqs) }

// Release frees seq.
func (e *Engine) Release(id engine.SeqID) {
	if s := e.seqs[id]; s != nil {
		delete(e.seqs, id)
		s.h = s.h[:0]
		e.free = append(e.free, s)
	}
}

// Close frees everything.
func (e *Engine) Close() error {
	clear(e.seqs)
	e.free = nil
	return nil
}

func (e *Engine) newSeq() *seq {
	if n := len(e.free); n > 0 {
		s := e.free[n-1]
		e.free = e.free[:n-1]
		return s
	}
	return &seq{h: make([]uint64, 0, 256)}
}

func grow32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

func growF(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

var (
	_ engine.Engine   = (*Engine)(nil)
	_ engine.Embedder = (*Engine)(nil)
)

// presetFile is a preset's JSON form (times in milliseconds).
type presetFile struct {
	Name   string `json:"name"`
	About  string `json:"about,omitempty"`
	Models []struct {
		Name       string  `json:"name"`
		BaseMS     float64 `json:"base_ms"`
		PerSeqMS   float64 `json:"per_seq_ms"`
		PerTokenMS float64 `json:"per_token_ms"`
	} `json:"models"`
}

// MarshalJSON writes the preset as a profile file.
func (p Preset) MarshalJSON() ([]byte, error) {
	f := presetFile{Name: p.Name, About: p.About}
	for i, m := range p.Models {
		pr := p.Profiles[i]
		f.Models = append(f.Models, struct {
			Name       string  `json:"name"`
			BaseMS     float64 `json:"base_ms"`
			PerSeqMS   float64 `json:"per_seq_ms"`
			PerTokenMS float64 `json:"per_token_ms"`
		}{m, ms(pr.Base), ms(pr.PerSeq), ms(pr.PerToken)})
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads a profile file.
func (p *Preset) UnmarshalJSON(b []byte) error {
	var f presetFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("sim: profile: %w", err)
	}
	if len(f.Models) == 0 {
		return errors.New("sim: profile: no models")
	}
	*p = Preset{Name: f.Name, About: f.About}
	for _, m := range f.Models {
		for _, v := range []float64{m.BaseMS, m.PerSeqMS, m.PerTokenMS} {
			if v < 0 || v > 60000 || v != v {
				return fmt.Errorf("sim: profile: model %q: latency %g ms out of range", m.Name, v)
			}
		}
		p.Models = append(p.Models, m.Name)
		p.Profiles = append(p.Profiles, Profile{Base: dur(m.BaseMS), PerSeq: dur(m.PerSeqMS), PerToken: dur(m.PerTokenMS)})
	}
	return nil
}

// LoadPreset returns the built-in preset called name or, when name is a
// path ending in .json, the preset stored there (as written by
// `tokenrouter bench --calibrate`).
func LoadPreset(name string) (Preset, error) {
	if !strings.HasSuffix(name, ".json") {
		return LookupPreset(name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return Preset{}, fmt.Errorf("sim: %w", err)
	}
	var p Preset
	if err := json.Unmarshal(b, &p); err != nil {
		return Preset{}, fmt.Errorf("sim: %s: %w", name, err)
	}
	return p, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func dur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
