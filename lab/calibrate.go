package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// CalibrateOptions choose what Calibrate measures.
type CalibrateOptions struct {
	// Batches are the batch sizes measured (default 1, 2, 4, 5, 8, 9, 16,
	// 17: the powers of two and one past them, where engines that work in
	// tiles of rows jump).
	Batches []int
	// Tokens are the tokens each sequence appends in a measured step
	// (default 1, 2, 4: decodes, and the short extends of requests that
	// return to a model).
	Tokens []int
	// Contexts are the tokens each sequence holds before a measured step.
	// The first is measured with every batch and token count, the others
	// with decodes up to MaxContextBatch sequences (default 16, 128).
	Contexts []int
	// MaxContextBatch bounds the batch at the contexts after the first
	// (default 8).
	MaxContextBatch int
	// PromptTokens is the tokens each sequence appends in the prompt-sized
	// steps measured at PromptBatches, at the first context (default 16,
	// bench's prompt length). Requests of a closed loop that start
	// together send their prompts in one step (16 prompts of 16 tokens:
	// 256 rows), which a curve measured up to a few tokens a sequence
	// prices by extrapolating its last segment: a 0.5B model's step of 8
	// sequences appending 113 tokens took 152 ms and such a curve gave
	// 292.
	PromptTokens int
	// PromptBatches are the batch sizes of the prompt-sized steps (default
	// 1, 8, 16).
	PromptBatches []int
	// Repeats is the number of times each point is measured (default 5);
	// their median counts (see stepTime), times the mean over median of the
	// whole grid (gridPoints). Repeats are spread over the measurement:
	// each round times every point once.
	Repeats int
	// Placements lists the placements to calibrate (default both:
	// sim.Partitioned and sim.TimeShared).
	Placements []string
	// Cores is the number of cores the models share (default GOMAXPROCS):
	// time-shared, every model steps on all of them; partitioned, each on
	// an even share (at least one).
	Cores int
	// InterferenceBatches are the decode batch sizes at which each model
	// is timed while the other models step at once (partitioned; default
	// 1, 4, 16).
	InterferenceBatches []int
	// Progress, if set, receives a line per measured model and placement.
	Progress io.Writer

	// ownThreads keeps each model's Threads (and CPUs) as given
	// (CalibratePlaced).
	ownThreads bool
}

func (o CalibrateOptions) withDefaults() CalibrateOptions {
	def := func(v *[]int, d ...int) {
		if len(*v) == 0 {
			*v = d
		}
	}
	def(&o.Batches, 1, 2, 4, 5, 8, 9, 16, 17)
	def(&o.Tokens, 1, 2, 4)
	def(&o.Contexts, 16, 128)
	def(&o.InterferenceBatches, 1, 4, 16)
	def(&o.PromptBatches, 1, 8, 16)
	if o.PromptTokens <= 0 {
		o.PromptTokens = 16
	}
	if o.MaxContextBatch <= 0 {
		o.MaxContextBatch = 8
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	if len(o.Placements) == 0 {
		o.Placements = []string{sim.Partitioned, sim.TimeShared}
	}
	if o.Cores <= 0 {
		o.Cores = runtime.GOMAXPROCS(0)
	}
	return o
}

// Calibrate measures the step times of models (small first) on their own
// engines and fits each a steptime.Curve (DESIGN §6a), once per placement:
// time-shared, each model alone on every core; partitioned, each alone on
// its share of the cores, and then each timed while the other models step at
// once, which gives its interference factor (the median slowdown over
// o.InterferenceBatches). It returns one preset per placement, in the
// order of o.Placements, ready to be written as a profile file (bench
// --profile, plan --profile).
func Calibrate(ctx context.Context, ks loader.Kinds, ms []config.Model, o CalibrateOptions) ([]sim.Preset, error) {
	o = o.withDefaults()
	if len(ms) == 0 {
		return nil, errors.New("bench: calibrate: no models")
	}
	if ks == nil {
		ks = loader.Builtin()
	}
	var out []sim.Preset
	for _, pl := range o.Placements {
		threads := o.Cores
		switch pl {
		case sim.TimeShared:
		case sim.Partitioned:
			threads = max(1, o.Cores/len(ms))
		default:
			return nil, fmt.Errorf("bench: calibrate: placement %q: want %s or %s", pl, sim.Partitioned, sim.TimeShared)
		}
		placed := ms
		if !o.ownThreads {
			placed = withThreads(ms, threads)
		}
		p, err := calibratePlacement(ctx, ks, placed, pl, o)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// CalibratePlaced calibrates models as a deployment placed them: under
// placement, each on its own Threads (and CPUs) rather than the shares
// Calibrate gives (o.Placements and o.Cores are ignored). bench compare
// --recalibrate prices a run on it.
func CalibratePlaced(ctx context.Context, ks loader.Kinds, ms []config.Model, placement string, o CalibrateOptions) (sim.Preset, error) {
	o.Placements, o.ownThreads = []string{placement}, true
	ps, err := Calibrate(ctx, ks, ms, o)
	if err != nil {
		return sim.Preset{}, err
	}
	return ps[0], nil
}

// withThreads returns ms with every model's thread count set.
func withThreads(ms []config.Model, threads int) []config.Model {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Threads = threads
	}
	return out
}

// calibratePlacement measures and fits every model under one placement.
func calibratePlacement(ctx context.Context, ks loader.Kinds, ms []config.Model, pl string, o CalibrateOptions) (sim.Preset, error) {
	names, threads := make([]string, len(ms)), make([]string, len(ms))
	for i, m := range ms {
		names[i], threads[i] = m.Name, fmt.Sprint(m.Threads)
	}
	p := sim.Preset{Name: strings.Join(names, "+"), Models: names, Placement: pl,
		About: fmt.Sprintf("calibrated on this machine, %s placement (threads per model: %s), %s", pl, strings.Join(threads, ", "), time.Now().UTC().Format(time.DateOnly))}
	for _, m := range ms {
		start := time.Now()
		pts, spread, err := measureModel(ctx, ks, m, o)
		if err != nil {
			return sim.Preset{}, err
		}
		c, err := steptime.Fit(pts, steptime.FitOptions{PerSeq: len(o.Tokens) > 1, Context: len(o.Contexts) > 1})
		if err != nil {
			return sim.Preset{}, fmt.Errorf("bench: calibrate %s: %w", m.Name, err)
		}
		p.Profiles = append(p.Profiles, sim.Profile{Curve: c})
		p.Calibration = append(p.Calibration, sim.Calibration{Threads: m.Threads, MaxRelError: c.MaxRelError(pts), Points: pts, MeanOverMedian: spread})
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "calibrate %s, %s (%d threads): %d points in %v, fit max error %.1f%%, mean/median %.3f\n",
				m.Name, pl, m.Threads, len(pts), time.Since(start).Round(100*time.Millisecond), 100*c.MaxRelError(pts), spread)
		}
	}
	if pl != sim.Partitioned || len(ms) < 2 {
		return p, nil
	}
	start := time.Now()
	slow, err := measureInterference(ctx, ks, ms, o)
	if err != nil {
		return sim.Preset{}, err
	}
	for i := range p.Profiles {
		p.Profiles[i].Interference = median(slow[i])
		p.Calibration[i].Slowdowns = slow[i]
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "calibrate interference, %s: %v in %v\n", pl, slow, time.Since(start).Round(100*time.Millisecond))
	}
	return p, nil
}

// MergeCalibrations returns the calibration whose every point is the median
// of the same point in ps (calibrations of the same models, placement and
// options o, as Calibrate returns them; the mean of the middle two for an
// even count), its curves fitted anew, its MeanOverMedian the mean of
// theirs and its interference factors the medians over the batches of the
// median slowdowns. A run bracketed by a calibration before and one after
// it is priced on the mean of the two, which halves what one slow minute of
// either moves the prediction; with calibrations after every round, one
// caught in a slow stretch moves it not at all (on two shared cores the
// mean of two calibrations of the fast pair put the 360M's one-sequence
// step at the run's mean context at 25.2 ms where the others gave
// 17.0-18.7, and the points it priced measured 13-27% above it).
func MergeCalibrations(o CalibrateOptions, ps ...sim.Preset) (sim.Preset, error) {
	o = o.withDefaults()
	if len(ps) == 0 {
		return sim.Preset{}, errors.New("bench: merge calibrations: none")
	}
	out := ps[0]
	out.Profiles, out.Calibration = slices.Clone(out.Profiles), slices.Clone(out.Calibration)
	for i := range out.Profiles {
		pts := slices.Clone(out.Calibration[i].Points)
		slow := make([]float64, len(out.Calibration[i].Slowdowns))
		spread := 0.0
		for _, p := range ps {
			if len(p.Calibration) != len(out.Calibration) || len(p.Calibration[i].Points) != len(pts) || p.Placement != out.Placement ||
				len(p.Calibration[i].Slowdowns) != len(slow) {
				return sim.Preset{}, errors.New("bench: merge calibrations: they measured different grids")
			}
			spread += p.Calibration[i].MeanOverMedian / float64(len(ps))
		}
		xs := make([]float64, len(ps))
		for k := range slow {
			for j, p := range ps {
				xs[j] = p.Calibration[i].Slowdowns[k]
			}
			slow[k] = median(xs)
		}
		for k := range pts {
			for j, p := range ps {
				q := p.Calibration[i].Points[k]
				if q.Batch != pts[k].Batch || q.Extend != pts[k].Extend || q.Context != pts[k].Context {
					return sim.Preset{}, errors.New("bench: merge calibrations: they measured different grids")
				}
				xs[j] = q.MS
			}
			pts[k].MS = median(xs)
		}
		c, err := steptime.Fit(pts, steptime.FitOptions{PerSeq: len(o.Tokens) > 1, Context: len(o.Contexts) > 1})
		if err != nil {
			return sim.Preset{}, fmt.Errorf("bench: merge calibrations of %s: %w", out.Models[i], err)
		}
		out.Profiles[i] = sim.Profile{Curve: c, Interference: median(slow)}
		out.Calibration[i].Points, out.Calibration[i].MaxRelError, out.Calibration[i].Slowdowns = pts, c.MaxRelError(pts), slow
		out.Calibration[i].MeanOverMedian = spread
	}
	return out, nil
}

// CurveSummary gives each model's calibrated decode step times at 1, 8
// and 16 sequences (context 16), for progress reports.
func CurveSummary(p sim.Preset) string {
	var parts []string
	for i, pr := range p.Profiles {
		parts = append(parts, fmt.Sprintf("%s %.1f/%.1f/%.1f ms", p.Models[i], pr.Curve.At(1, 0, 16), pr.Curve.At(8, 0, 16), pr.Curve.At(16, 0, 16)))
	}
	return strings.Join(parts, ", ") + " at 1/8/16 sequences"
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// gridPoint is one (context, batch, tokens) point of the grid.
type gridPoint struct{ ctx, batch, tokens int }

// grid lists the points: every batch and token count at the first
// context, decodes up to MaxContextBatch at the others, and the
// prompt-sized steps at the first context.
func (o CalibrateOptions) grid() []gridPoint {
	var g []gridPoint
	for ci, c := range o.Contexts {
		for _, b := range o.Batches {
			for _, k := range o.Tokens {
				if ci == 0 || (k == 1 && b <= o.MaxContextBatch) {
					g = append(g, gridPoint{c, b, k})
				}
			}
		}
	}
	for _, b := range o.PromptBatches {
		if p := (gridPoint{o.Contexts[0], b, o.PromptTokens}); !slices.Contains(g, p) {
			g = append(g, p)
		}
	}
	return g
}

// maxBatch is the largest batch of the grid.
func (o CalibrateOptions) maxBatch() int {
	return max(slices.Max(o.Batches), slices.Max(o.PromptBatches))
}

// maxTokens is the most tokens a sequence appends in a step of the grid.
func (o CalibrateOptions) maxTokens() int { return max(slices.Max(o.Tokens), o.PromptTokens) }

// stepTime is what calibration keeps of a point's repeated step times:
// their median. A run's throughput is its tokens over the sum of its step
// times, so the model must price a typical step, not the steps of a quiet
// moment: with the lower quartile (kept before) the fast pair's validation
// under-predicted more (median error -15.9%, against -13.5% with the
// median and -13.2% with the mean, calibrations taken back to back and
// compared with one measured run). The mean also takes in a single slow
// repeat (a real-size calibration with it had fit errors up to 55% and
// interference factors of 2-2.6); one slow repeat in five does not move
// the median. (The machine's own noise still shows: the next real-size
// calibration, with the median, had fit errors up to 70% at one thread.)
// The slow repeats still count, pooled over the whole grid: gridPoints
// scales every median by the grid's mean over median.
func stepTime(ds []time.Duration) time.Duration { return bench.Samples(ds).Quantile(0.5) }

// maxSpread caps one repeat's time over its point's median in
// meanOverMedian, so that one stall of the machine (a step 10x its median)
// does not move a calibration's every point.
const maxSpread = 3

// meanOverMedian returns the mean, over every repeat of every point, of the
// repeat's time over its point's stepTime (each ratio capped at
// maxSpread); 1 without repeats.
func meanOverMedian(times [][]time.Duration) float64 {
	sum, n := 0.0, 0
	for _, ds := range times {
		med := float64(stepTime(ds))
		if med <= 0 {
			continue
		}
		for _, d := range ds {
			sum += min(float64(d)/med, maxSpread)
			n++
		}
	}
	if n == 0 {
		return 1
	}
	return sum / float64(n)
}

// gridPoints turns each grid point's repeated step times into a measured
// point: the median of its repeats (stepTime) times the mean over median
// of all of them (meanOverMedian), which it also returns. A run's
// throughput is its tokens over the sum of its step times, the slow ones
// included: on two cores a 0.5B model's decode steps of 8 sequences had a
// median of 27.4 ms and a mean of 28.5 stepping alone in a run, and a
// median of 28.6 and a mean of 31.2 in turn with a 1.5B model; the median
// of five repeats of one point, kept for its shape (see stepTime), leaves
// that out, and the spread pooled over the whole grid puts it back.
func gridPoints(g []gridPoint, times [][]time.Duration) ([]steptime.Point, float64) {
	spread := meanOverMedian(times)
	pts := make([]steptime.Point, len(g))
	for i, p := range g {
		pts[i] = steptime.Point{Batch: p.batch, Extend: float64(p.batch * (p.tokens - 1)), Context: float64(p.ctx),
			MS: spread * float64(stepTime(times[i])) / float64(time.Millisecond)}
	}
	return pts, spread
}

// measureModel opens m's engine, times every grid point o.Repeats times
// (each round times every point once) and returns the points (gridPoints)
// and their mean over median. Time-shared models are measured one after
// the other, not in turn point by point: measured in turn with a 1.5B
// model, a 0.5B model's steps ran slower than alone (its decode of 8
// sequences 26.4-27.2 ms against 23.3-23.9, its curve's R(1) 12.3-12.4
// against 10.5-10.6) and slower than its steps in turn with the
// 1.5B in a run (lockstep's decodes of 8 sequences 0.84x such a curve,
// TokenRouter's 0.89).
func measureModel(ctx context.Context, ks loader.Kinds, m config.Model, o CalibrateOptions) (pts []steptime.Point, spread float64, err error) {
	e, err := ks.OpenEngine(ctx, m)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: calibrate: %w", err)
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: calibrate %s: %w", m.Name, cerr)
		}
	}()
	st, err := newStepper(ctx, e, o.maxBatch(), o.Contexts, o.maxTokens())
	if err != nil {
		return nil, 0, fmt.Errorf("bench: calibrate %s: %w", m.Name, err)
	}
	defer st.release()
	g := o.grid()
	times := make([][]time.Duration, len(g))
	for range o.Repeats {
		for i, p := range g {
			d, err := st.time(ctx, p)
			if err != nil {
				return nil, 0, fmt.Errorf("bench: calibrate %s: %w", m.Name, err)
			}
			times[i] = append(times[i], d)
		}
	}
	pts, spread = gridPoints(g, times)
	return pts, spread, nil
}

// stepper times steps of one engine over sequences prepared at fixed
// contexts: after each timed step the sequences are cut back to their
// context, so a point can be measured again without filling them anew.
type stepper struct {
	e     engine.Engine
	vocab int
	seqs  map[int][]engine.SeqID // context → sequences holding it
	in    []engine.Input
	out   []engine.Output
	toks  []int32
	round int
}

// calibrationSeqs numbers the sequences a calibration opens, clear of any
// a deployment would use.
const calibrationSeqs engine.SeqID = 1 << 40

// newStepper fills n sequences to each context (one untimed step each,
// which also warms the engine up), leaving room for steps that append up
// to tokens tokens a sequence.
func newStepper(ctx context.Context, e engine.Engine, n int, contexts []int, tokens int) (*stepper, error) {
	st := &stepper{e: e, vocab: max(e.Info().VocabSize, 4), seqs: map[int][]engine.SeqID{}}
	next := calibrationSeqs
	for _, c := range contexts {
		if c < 1 || c+max(tokens, 8) > e.Info().ContextLength {
			st.release()
			return nil, fmt.Errorf("context %d does not fit the model's %d tokens", c, e.Info().ContextLength)
		}
		if _, ok := st.seqs[c]; ok {
			continue
		}
		for s := range n {
			next++
			toks := make([]int32, c)
			for j := range toks {
				toks[j] = st.token(s*31 + j*7)
			}
			st.seqs[c] = append(st.seqs[c], next)
			if err := e.Step(ctx, []engine.Input{{Seq: next, Tokens: toks}}, make([]engine.Output, 1)); err != nil {
				st.release()
				return nil, err
			}
		}
	}
	return st, nil
}

func (st *stepper) token(i int) int32 { return int32(3 + i%(st.vocab-3)) }

// time runs one step of p.batch sequences at context p.ctx, each appending
// p.tokens tokens, and returns its duration.
func (st *stepper) time(ctx context.Context, p gridPoint) (time.Duration, error) {
	st.round++
	st.in, st.out = st.in[:0], slices.Grow(st.out[:0], p.batch)[:p.batch]
	st.toks = slices.Grow(st.toks[:0], p.batch*p.tokens)[:p.batch*p.tokens]
	for s, id := range st.seqs[p.ctx][:p.batch] {
		toks := st.toks[s*p.tokens : (s+1)*p.tokens]
		for j := range toks {
			toks[j] = st.token(st.round*13 + s*5 + j)
		}
		st.in = append(st.in, engine.Input{Seq: id, Tokens: toks})
	}
	t0 := time.Now()
	err := st.e.Step(ctx, st.in, st.out)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	for _, x := range st.in {
		if err := st.e.Truncate(x.Seq, p.ctx); err != nil {
			return 0, err
		}
	}
	return d, nil
}

// release frees the stepper's sequences.
func (st *stepper) release() {
	for _, ids := range st.seqs {
		for _, id := range ids {
			st.e.Release(id)
		}
	}
	clear(st.seqs)
}

// measureInterference opens every model (with its threads) and times each
// model's decode steps at o.InterferenceBatches, alternately with the
// others idle and with them stepping decodes of 4 sequences at once. It
// returns, per model and batch, the slowdown factor (together / alone, of
// the stepTime of each).
func measureInterference(ctx context.Context, ks loader.Kinds, ms []config.Model, o CalibrateOptions) ([][]float64, error) {
	ctx0 := o.Contexts[0]
	steppers := make([]*stepper, 0, len(ms))
	defer func() {
		for _, st := range steppers {
			st.release()
			_ = st.e.Close()
		}
	}()
	for _, m := range ms {
		e, err := ks.OpenEngine(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("bench: calibrate interference: %w", err)
		}
		st, err := newStepper(ctx, e, max(slices.Max(o.InterferenceBatches), 4), []int{ctx0}, 1)
		if err != nil {
			_ = e.Close()
			return nil, fmt.Errorf("bench: calibrate interference %s: %w", m.Name, err)
		}
		steppers = append(steppers, st)
	}
	slow := make([][]float64, len(ms))
	for i, st := range steppers {
		for _, b := range o.InterferenceBatches {
			p := gridPoint{ctx: ctx0, batch: b, tokens: 1}
			var alone, together []time.Duration
			for range o.Repeats {
				d, err := st.time(ctx, p)
				if err != nil {
					return nil, err
				}
				alone = append(alone, d)
				ds, err := timeWhileBusy(ctx, st, p, others(steppers, i), gridPoint{ctx: ctx0, batch: 4, tokens: 1})
				if err != nil {
					return nil, err
				}
				together = append(together, ds)
			}
			slow[i] = append(slow[i], float64(stepTime(together))/float64(stepTime(alone)))
		}
	}
	return slow, nil
}

// others returns every stepper but the i-th.
func others(sts []*stepper, i int) []*stepper {
	return append(slices.Clone(sts[:i]), sts[i+1:]...)
}

// timeWhileBusy times one step of st at p while every stepper in busy
// steps bg in a loop on its own goroutine (each busy stepper has taken one
// step first, so the timed step overlaps their steady state). The busy
// goroutines stop before it returns.
func timeWhileBusy(ctx context.Context, st *stepper, p gridPoint, busy []*stepper, bg gridPoint) (time.Duration, error) {
	bctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, len(busy))
	started := make(chan struct{}, len(busy))
	for k, b := range busy {
		wg.Go(func() {
			for n := 0; bctx.Err() == nil; n++ {
				_, err := b.time(bctx, bg)
				if n == 0 {
					started <- struct{}{}
				}
				if err != nil {
					if bctx.Err() == nil {
						errs[k] = err
					}
					break
				}
			}
		})
	}
	for range busy {
		select {
		case <-started:
		case <-ctx.Done():
		}
	}
	d, err := st.time(ctx, p)
	stop()
	wg.Wait()
	if err == nil {
		err = errors.Join(errs...)
	}
	return d, err
}
