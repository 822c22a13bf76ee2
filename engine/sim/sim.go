// Package sim is TokenRouter's simulated engine: a model whose step takes
// wall-clock time from a latency profile (a steptime.Curve of the batch
// size, the tokens extended and the context held) and whose tokens are a
// deterministic function of the sequence prefix and a seed. It is the
// embedded default, so the whole system runs on any machine without
// weights, and it makes hand-off bugs visible: a lost, duplicated or
// reordered token changes every later token.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// Profile is a simulated model's step time: a steptime.Curve (the one
// representation of step time, which the throughput model and the automatic
// thresholds share) and the slowdown measured while another model steps at
// once under partitioned placement (DESIGN §6a).
type Profile struct {
	// Curve is the step time L(b, e, c).
	Curve steptime.Curve
	// Interference is the factor by which the model's steps slow down while
	// another model steps at once (0 or 1: none). Above
	// steptime.FoldAbove it is folded into every step (Step).
	Interference float64
}

// Constant returns the profile of a batch-independent step time d.
func Constant(d time.Duration) Profile {
	return Profile{Curve: steptime.Constant(float64(d) / float64(time.Millisecond))}
}

// Step returns the curve the engine steps at: Curve with the interference
// folded in.
func (p Profile) Step() steptime.Curve { return p.Curve.WithInterference(p.Interference) }

// Latency returns the step time for b sequences appending t tokens in
// total, whose rows attend over ctx tokens of context on average (what
// their sequences held before the step, weighted by rows).
func (p Profile) Latency(b, t int, ctx float64) time.Duration {
	return p.Step().Duration(b, float64(max(t-b, 0)), ctx)
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
	// Placement is how the models shared the machine when the profiles
	// were measured: "partitioned" or "time-shared" ("" for any).
	Placement string
	// Calibration says, per model, how its profile was measured (nil for
	// built-in presets).
	Calibration []Calibration
	// Source is the file the preset was loaded from ("" for a built-in
	// one).
	Source string
}

// Calibration is how one model's profile was measured (bench
// --calibrate).
type Calibration struct {
	// Threads is the engine's thread count.
	Threads int `json:"threads,omitempty"`
	// MaxRelError is the fitted curve's largest relative error on the
	// measured points.
	MaxRelError float64 `json:"fit_max_rel_error"`
	// Points are the measured steps: each the median of its repeats
	// times MeanOverMedian.
	Points []steptime.Point `json:"points,omitempty"`
	// MeanOverMedian is the mean, over every repeat of every point, of the
	// repeat's time over its point's median (each ratio capped at 3): how
	// much longer steps take on average than at their median, from the
	// occasional slow step (0 for calibrations before it was measured).
	MeanOverMedian float64 `json:"mean_over_median,omitempty"`
	// Slowdowns are the factors by which the model's decode steps slowed
	// down while the other models stepped at once (partitioned placement),
	// one per batch size measured; Profile.Interference is their median.
	Slowdowns []float64 `json:"interference_slowdowns,omitempty"`
}

// Presets returns the built-in profiles.
func Presets() []Preset {
	return []Preset{
		{
			Name:     "paper-r2r",
			Models:   []string{"slm", "llm"},
			Profiles: []Profile{{Curve: steptime.Constant(6)}, {Curve: steptime.Constant(27.9)}},
			About:    "R2R pair (0.6B SLM, 32B LLM): measured 6.0 ms and 27.9 ms per step, independent of batch size",
		},
		{
			Name:     "paper-r2r-batched",
			Models:   []string{"slm", "llm"},
			Profiles: []Profile{{Curve: steptime.Linear(6, 0.05, 0.005)}, {Curve: steptime.Linear(27.9, 0.2, 0.02)}},
			About:    "paper-r2r with a per-sequence and per-extend-token cost, for studies where batch size matters",
		},
		{
			Name:     "zero",
			Models:   []string{"a", "b", "c"},
			Profiles: []Profile{{Curve: steptime.Constant(0)}, {Curve: steptime.Constant(0)}, {Curve: steptime.Constant(0)}},
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
	step   steptime.Curve // the profile's curve, interference folded in
	seqs   map[engine.SeqID]*seq
	free   []*seq
	inStep map[engine.SeqID]struct{} // the current step's sequences
	old    []int                     // per input: length before the step, -1 if new
	toks   []int32
	logit  []float32
	hid    []float32
	// penalties and min-p: the shared sampler over synthetic logits
	sampler engine.Sampler
	plogit  []float32
	timer   *time.Timer
	spin    time.Duration // current spin window
	late    time.Duration // average timer lateness
	debt    time.Duration // overshoot not yet paid back
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
	return &Engine{cfg: cfg, step: cfg.Profile.Step(), seqs: map[engine.SeqID]*seq{}, inStep: map[engine.SeqID]struct{}{}, spin: time.Millisecond}
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
	ld, err := e.measure(in)
	if err != nil {
		return err
	}
	e.toks = grow32(e.toks, ld.nAll)
	e.logit = growF(e.logit, ld.nLogit*e.cfg.VocabSize)
	e.hid = growF(e.hid, ld.nHid*e.cfg.HiddenSize)
	var cur stepCursor
	e.old = slices.Grow(e.old[:0], len(in))[:len(in)]
	for i := range in {
		out[i] = e.stepSeq(i, &in[i], &cur)
	}
	target := e.step.Duration(len(in), float64(ld.total-len(in)), float64(ld.held)/float64(ld.total))
	return e.pace(ctx, in, start, target)
}

// stepLoad is what one step asks of the engine: token and attention counts
// and how many outputs of each kind it wants.
type stepLoad struct {
	total, held, nAll, nLogit, nHid int
}

// measure validates a step's inputs (tokens present, no sequence twice,
// context not exceeded) and totals the work they ask for.
func (e *Engine) measure(in []engine.Input) (stepLoad, error) {
	var ld stepLoad
	clear(e.inStep)
	for i := range in {
		n := len(in[i].Tokens)
		if n == 0 {
			return ld, fmt.Errorf("sim: sequence %d: no tokens: %w", in[i].Seq, engine.ErrBadInput)
		}
		if _, dup := e.inStep[in[i].Seq]; dup {
			return ld, fmt.Errorf("sim: sequence %d appears twice in one step: %w", in[i].Seq, engine.ErrBadInput)
		}
		e.inStep[in[i].Seq] = struct{}{}
		if s := e.seqs[in[i].Seq]; s != nil && len(s.h)+n > e.cfg.ContextLength ||
			n > e.cfg.ContextLength {
			return ld, fmt.Errorf("sim: sequence %d: %w (limit %d)", in[i].Seq, engine.ErrContextFull, e.cfg.ContextLength)
		}
		if s := e.seqs[in[i].Seq]; s != nil {
			ld.held += n * len(s.h) // each of the sequence's rows attends over what it holds
		}
		ld.total += n
		if in[i].Want&engine.WantAllTokens != 0 {
			ld.nAll += n
		}
		if in[i].Want&engine.WantLogits != 0 {
			ld.nLogit++
		}
		if in[i].Want&engine.WantHidden != 0 {
			ld.nHid++
		}
	}
	return ld, nil
}

// stepCursor tracks how much of the step's token, logit and hidden
// buffers earlier sequences have taken.
type stepCursor struct {
	ta, tl, th int
}

// stepSeq appends in's tokens to sequence i's state, recording its old
// length for undo, and returns its output carved from the step buffers.
func (e *Engine) stepSeq(i int, in *engine.Input, cur *stepCursor) engine.Output {
	s := e.seqs[in.Seq]
	e.old[i] = -1
	if s == nil {
		s = e.newSeq()
		e.seqs[in.Seq] = s
	} else {
		e.old[i] = len(s.h)
	}
	o := engine.Output{}
	all := in.Want&engine.WantAllTokens != 0
	if all {
		o.Tokens = e.toks[cur.ta : cur.ta+len(in.Tokens) : cur.ta+len(in.Tokens)]
		cur.ta += len(in.Tokens)
	}
	e.appendTokens(s, in, o.Tokens, all)
	last := s.h[len(s.h)-1]
	if all {
		o.Token = o.Tokens[len(o.Tokens)-1]
	} else {
		o.Token = e.sampled(last, &in.Sampling, len(s.h), in.AllowFor(len(in.Tokens)-1))
	}
	if in.Want&engine.WantLogits != 0 {
		o.Logits = e.logit[cur.tl : cur.tl+e.cfg.VocabSize : cur.tl+e.cfg.VocabSize]
		cur.tl += e.cfg.VocabSize
		allow := in.AllowFor(len(in.Tokens) - 1)
		e.fillLogits(o.Logits, last, e.allowed(e.token(last, in.Sampling, len(s.h)), allow, last))
		if allow != nil {
			engine.Restrict(o.Logits, allow)
		}
	}
	if in.Want&engine.WantHidden != 0 {
		o.Hidden = e.hid[cur.th : cur.th+e.cfg.HiddenSize : cur.th+e.cfg.HiddenSize]
		cur.th += e.cfg.HiddenSize
		hiddenOf(last, o.Hidden)
	}
	return o
}

// appendTokens extends s's prefix hashes with in's tokens; when all is
// set it also samples a next token after each one into toks.
func (e *Engine) appendTokens(s *seq, in *engine.Input, toks []int32, all bool) {
	for j, t := range in.Tokens {
		prev := uint64(emptyHash)
		if len(s.h) > 0 {
			prev = s.h[len(s.h)-1]
		}
		h := extend(prev, t)
		s.h = append(s.h, h)
		if all {
			toks[j] = e.sampled(h, &in.Sampling, len(s.h), in.AllowFor(j))
		}
	}
}

// pace waits until target has passed since start, less any overshoot
// being paid back, and books this step's overshoot. When ctx ends first,
// the step's tokens are undone and the wait's error returned.
func (e *Engine) pace(ctx context.Context, in []engine.Input, start time.Time, target time.Duration) error {
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

// sampled is the token drawn at position pos after prefix hash h: the
// model's own token, or, when sp has penalties or min-p, the shared
// sampler's draw over the synthetic logits (engine.Sampler), as every
// engine samples. Log-probabilities are those of the synthetic logits.
func (e *Engine) sampled(h uint64, sp *engine.Sampling, pos int, allow []uint64) int32 {
	tok := e.allowed(e.token(h, *sp, pos), allow, h)
	own := !sp.Adjusts() && !(sp.MinP > 0 && sp.Temperature > 0)
	if own && !sp.Records() {
		return tok
	}
	if cap(e.plogit) < e.cfg.VocabSize {
		e.plogit = make([]float32, e.cfg.VocabSize)
	}
	l := e.plogit[:e.cfg.VocabSize]
	e.fillLogits(l, h, tok)
	if allow != nil {
		engine.Restrict(l, allow)
	}
	if own {
		e.sampler.Record(l, tok, sp, pos)
		return tok
	}
	return e.sampler.Sample(l, sp, pos)
}

// token derives the model's token from a prefix hash.
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

// allowed returns tok if allow permits it (or is nil), otherwise an
// allowed token chosen by the prefix hash h: the k-th of the allowed set.
func (e *Engine) allowed(tok int32, allow []uint64, h uint64) int32 {
	if allow == nil || engine.Allowed(allow, tok) {
		return tok
	}
	n := 0
	for _, w := range allow {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return tok
	}
	k := int(mix(h^0x51ed) % uint64(n))
	for wi, w := range allow {
		if c := bits.OnesCount64(w); k >= c {
			k -= c
			continue
		}
		for ; k > 0; k-- {
			w &= w - 1
		}
		return int32(wi*64 + bits.TrailingZeros64(w))
	}
	return tok
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

// presetFile is a preset's JSON form (times in milliseconds). A model
// gives its step time as a curve, or in the older linear form base_ms +
// per_seq_ms·b + per_token_ms·e.
type presetFile struct {
	Name      string       `json:"name"`
	About     string       `json:"about,omitempty"`
	Placement string       `json:"placement,omitempty"`
	Models    []modelEntry `json:"models"`
}

// modelEntry is one model of a profile file.
type modelEntry struct {
	Name         string          `json:"name"`
	BaseMS       float64         `json:"base_ms,omitempty"`
	PerSeqMS     float64         `json:"per_seq_ms,omitempty"`
	PerTokenMS   float64         `json:"per_token_ms,omitempty"`
	Curve        *steptime.Curve `json:"curve,omitempty"`
	Interference float64         `json:"interference,omitempty"`
	*Calibration
}

// Curves returns each model's step-time curve and interference factor.
func (p Preset) Curves() ([]steptime.Curve, []float64) {
	cs := make([]steptime.Curve, len(p.Profiles))
	fs := make([]float64, len(p.Profiles))
	for i, pr := range p.Profiles {
		cs[i], fs[i] = pr.Curve, pr.Interference
	}
	return cs, fs
}

// Placements a profile file may name (DESIGN §6a).
const (
	// Partitioned: each model steps on its own share of the cores; steps
	// overlap.
	Partitioned = "partitioned"
	// TimeShared: one step at a time, each on every core.
	TimeShared = "time-shared"
)

// MarshalJSON writes the preset as a profile file.
func (p Preset) MarshalJSON() ([]byte, error) {
	f := presetFile{Name: p.Name, About: p.About, Placement: p.Placement}
	for i, m := range p.Models {
		pr := p.Profiles[i]
		c := pr.Curve
		e := modelEntry{Name: m, Curve: &c, Interference: pr.Interference}
		if i < len(p.Calibration) {
			e.Calibration = &p.Calibration[i]
		}
		f.Models = append(f.Models, e)
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
	if f.Placement != "" && f.Placement != Partitioned && f.Placement != TimeShared {
		return fmt.Errorf("sim: profile: placement %q: want %s or %s", f.Placement, Partitioned, TimeShared)
	}
	*p = Preset{Name: f.Name, About: f.About, Placement: f.Placement}
	for _, m := range f.Models {
		c, err := m.curve()
		if err != nil {
			return err
		}
		if m.Interference < 0 || m.Interference > 100 || m.Interference != m.Interference {
			return fmt.Errorf("sim: profile: model %q: interference %g out of range", m.Name, m.Interference)
		}
		p.Models = append(p.Models, m.Name)
		p.Profiles = append(p.Profiles, Profile{Curve: c, Interference: m.Interference})
		if m.Calibration != nil {
			p.Calibration = append(p.Calibration, *m.Calibration)
		}
	}
	if len(p.Calibration) != 0 && len(p.Calibration) != len(p.Models) {
		return errors.New("sim: profile: calibration for some models only")
	}
	return nil
}

// curve returns the entry's step-time curve, from either form.
func (m modelEntry) curve() (steptime.Curve, error) {
	if m.Curve != nil {
		if m.BaseMS != 0 || m.PerSeqMS != 0 || m.PerTokenMS != 0 {
			return steptime.Curve{}, fmt.Errorf("sim: profile: model %q: give a curve or base_ms/per_seq_ms/per_token_ms, not both", m.Name)
		}
		if err := m.Curve.Validate(); err != nil {
			return steptime.Curve{}, fmt.Errorf("sim: profile: model %q: %w", m.Name, err)
		}
		return *m.Curve, nil
	}
	for _, v := range []float64{m.BaseMS, m.PerSeqMS, m.PerTokenMS} {
		if v < 0 || v > 60000 || v != v {
			return steptime.Curve{}, fmt.Errorf("sim: profile: model %q: latency %g ms out of range", m.Name, v)
		}
	}
	return steptime.Linear(m.BaseMS, m.PerSeqMS, m.PerTokenMS), nil
}

// LoadPreset returns the built-in preset called name or, when name is a
// path ending in .json, the preset stored there (as written by
// `tokenrouter bench calibrate`).
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
	p.Source = name
	return p, nil
}
