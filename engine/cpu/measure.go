package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// Sizes of the kernel measurement (measureKernels). A 0.5B model's first
// start measures in well under a second at two threads.
const (
	// planStreamBytes is the weight bytes one timed Decode or Batch run
	// multiplies: about a hundred microseconds of reading at memory speed.
	planStreamBytes = 2 << 20
	// planPromptMACs is the multiply-adds of one timed Prompt run.
	planPromptMACs = 8 << 20
	// planRuns is the number of timed runs of each level and class; the
	// shortest counts (the others met other work on the machine).
	planRuns = 7
	// planSlower: a level whose pilot runs (an eighth of a run each) took
	// this many times the fastest level's is not timed further.
	planSlower = 4
	// planMaxChunks bounds the row ranges the runs rotate through.
	planMaxChunks = 1024
	// planWarmUp is how long untimed work runs before the measurement.
	planWarmUp = 5 * time.Millisecond
	// planAttnPositions is the context length of the timed attention.
	planAttnPositions = 512
)

// classCols returns the activation column counts one timed run of class c
// multiplies (each a call of its own): the class's typical calls.
func classCols(c kernels.Class) []int {
	switch c {
	case kernels.Decode:
		return []int{1}
	case kernels.Batch:
		return []int{4, kernels.BatchCols}
	}
	return []int{64}
}

// measureKernels times every level the CPU runs, per weight type of the
// model on its largest matrix of that type, for each multiplication class,
// and the attention kernels on the model's head shape. The multiplications
// run as the engine runs them (e.mul, on the pool, activations quantised
// into each kernel's form) over row ranges of the type's matrices of that
// shape, a new range each run (Decode and Batch runs then read the weights
// from memory, as decoding does once a model outgrows the caches), the
// levels taking turns.
func (e *Engine) measureKernels(ctx context.Context, sets []*kernels.Set) ([]kernels.Timing, error) {
	e.warmUp(sets)
	var times []kernels.Timing
	for _, t := range e.weightTypes() {
		var levels []kernels.Level
		for l, s := range sets {
			if s == nil {
				continue
			}
			if _, ok := s.For(t); ok && s.Source(t) == kernels.Level(l) {
				levels = append(levels, kernels.Level(l))
			}
		}
		for c := range kernels.Class(kernels.MulClasses) {
			ts, err := e.timeClass(ctx, t, c, levels, sets)
			if err != nil {
				return nil, err
			}
			times = append(times, ts...)
		}
	}
	ts, err := e.timeAttention(ctx, sets)
	if err != nil {
		return nil, err
	}
	return append(times, ts...), nil
}

// warmUp runs one-column multiplications untimed for planWarmUp: the
// first milliseconds of work after a pause run slowly (threads and, in a
// virtual machine, virtual CPUs waking up).
func (e *Engine) warmUp(sets []*kernels.Set) {
	types := e.weightTypes()
	if len(types) == 0 {
		return
	}
	top := kernels.Generic
	for l, s := range sets {
		if s != nil {
			top = kernels.Level(l)
		}
	}
	ct := newClassTimer(e, types[0], kernels.Decode, sets)
	start := time.Now()
	for i := 0; time.Since(start) < planWarmUp && i < len(ct.chunks); i++ {
		ct.run(top, &ct.chunks[i])
	}
}

// timeClass times the levels of type t on class c (see measureKernels).
// Each level first runs untimed on one tile of rows (the scratch buffers
// grow, the output is written once), then twice on an eighth of a chunk: a
// level whose faster pilot, scaled to a chunk, takes planSlower times the
// fastest level's is timed no further (its time is that estimate). The others take
// turns, planRuns runs each, a new chunk every run.
func (e *Engine) timeClass(ctx context.Context, t gguf.TensorType, c kernels.Class, levels []kernels.Level, sets []*kernels.Set) ([]kernels.Timing, error) {
	ct := newClassTimer(e, t, c, sets)
	pilot := make([]float64, len(levels))
	for i, l := range levels {
		w := ct.chunks[0]
		w.rows = min(w.rows, tileRows)
		ct.run(l, &w)
		w.rows = max(tileRows, ct.rows/8/tileRows*tileRows)
		pilot[i] = min(ct.run(l, &w), ct.run(l, &w)) * float64(ct.rows) / float64(w.rows)
	}
	slow := func(i int) bool { return pilot[i] > planSlower*minOf(pilot) }
	best := make([]float64, len(levels))
	for i := range best {
		best[i] = math.Inf(1)
		if slow(i) {
			best[i] = pilot[i]
		}
	}
	next := 0
	for range planRuns {
		for i, l := range levels {
			if slow(i) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("cpu: kernel measurement: %w", err)
			}
			best[i] = min(best[i], ct.run(l, &ct.chunks[next%len(ct.chunks)]))
			next++
		}
	}
	ts := make([]kernels.Timing, len(levels))
	for i, l := range levels {
		ts[i] = kernels.Timing{Class: c, Type: t, Level: l, Seconds: best[i]}
	}
	return ts, nil
}

// classTimer runs one class's multiplications on chunks of one type's
// matrices.
type classTimer struct {
	e      *Engine
	t      gguf.TensorType
	sets   []*kernels.Set
	cols   []int // column counts of a run
	n      int   // values per row
	rows   int   // rows of a chunk
	chunks []matrix
	x, out []float32
}

func newClassTimer(e *Engine, t gguf.TensorType, c kernels.Class, sets []*kernels.Set) *classTimer {
	rep := e.representative(t)
	ct := &classTimer{e: e, t: t, sets: sets, cols: classCols(c), n: rep.cols}
	maxT := ct.cols[len(ct.cols)-1]
	rows := planStreamBytes / rep.rowBytes
	if c == kernels.Prompt {
		rows = planPromptMACs / (maxT * rep.cols)
	}
	ct.rows = min(rep.rows, max(tileRows, rows/tileRows*tileRows))
	ct.chunks = e.chunks(rep, ct.rows)
	rng := rand.New(rand.NewPCG(uint64(t), uint64(c)))
	// in random order, so that each level's runs sample the whole model:
	// the memory of some parts of a mapped file is slower to read than of
	// others (held in small pages, whose misses in the TLB cost a walk of
	// the page tables, two-dimensional in a virtual machine)
	rng.Shuffle(len(ct.chunks), func(i, j int) { ct.chunks[i], ct.chunks[j] = ct.chunks[j], ct.chunks[i] })
	ct.x = make([]float32, maxT*rep.cols)
	for i := range ct.x {
		ct.x[i] = float32(rng.NormFloat64())
	}
	ct.out = make([]float32, maxT*ct.rows)
	return ct
}

// run multiplies chunk m by each column count with level l's kernel, as
// the engine does, and returns the seconds it took.
func (ct *classTimer) run(l kernels.Level, m *matrix) float64 {
	k, _ := ct.sets[l].For(ct.t)
	m.k = [kernels.MulClasses]kernels.Kernel{k, k, k}
	start := time.Now()
	for _, T := range ct.cols {
		ct.e.mul(0, true, mmInput{x: ct.x[:T*ct.n], T: T, cols: ct.n}, mmJob{m, ct.out[:T*m.rows]})
	}
	return time.Since(start).Seconds()
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// chunks returns row ranges of rows rows of the matrices of rep's type and
// shape (at most planMaxChunks, spread over them).
func (e *Engine) chunks(rep *matrix, rows int) []matrix {
	var cs []matrix
	for _, m := range e.w.matrices() {
		if m.typ != rep.typ || m.cols != rep.cols || m.rowBytes != rep.rowBytes {
			continue
		}
		for r0 := 0; r0+rows <= m.rows; r0 += rows {
			cs = append(cs, matrix{typ: m.typ, rows: rows, cols: m.cols, data: m.data[r0*m.rowBytes:], rowBytes: m.rowBytes})
		}
	}
	if len(cs) > planMaxChunks {
		step := len(cs) / planMaxChunks
		for i := range planMaxChunks {
			cs[i] = cs[i*step]
		}
		cs = cs[:planMaxChunks]
	}
	return cs
}

// timeAttention times each level's attention kernels on one row's
// attention over planAttnPositions positions with the model's head shape.
func (e *Engine) timeAttention(ctx context.Context, sets []*kernels.Set) ([]kernels.Timing, error) {
	c := e.cfg
	hd, group, kvd := c.headDim, c.heads/c.kvHeads, c.kvDim()
	blocks := planAttnPositions / kernels.KeyBlock
	ss := blocks * kernels.KeyBlock
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() / 8)
		}
		return v
	}
	q, kt, v := fill(group*hd), fill(c.kvHeads*blocks*hd*kernels.KeyBlock), fill(ss*kvd)
	scores, out := make([]float32, group*ss), make([]float32, hd)
	best := make([]float64, len(sets))
	for i := range best {
		best[i] = math.Inf(1)
	}
	for range planRuns {
		for l, s := range sets {
			if s == nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("cpu: kernel measurement: %w", err)
			}
			sc, vals := s.Attention()
			start := time.Now()
			for g := range c.kvHeads {
				kg := kt[g*blocks*hd*kernels.KeyBlock:]
				for b := range blocks {
					sc(q, hd, kg[b*hd*kernels.KeyBlock:(b+1)*hd*kernels.KeyBlock], scores[b*kernels.KeyBlock:], ss)
				}
				for j := range group {
					clear(out)
					for b := range blocks {
						p0 := b * kernels.KeyBlock
						vals(scores[j*ss+p0:j*ss+p0+kernels.KeyBlock], v[p0*kvd+g*hd:], kvd, out)
					}
				}
			}
			best[l] = min(best[l], time.Since(start).Seconds())
		}
	}
	var ts []kernels.Timing
	for l, s := range sets {
		if s != nil {
			ts = append(ts, kernels.Timing{Class: kernels.Attention, Level: kernels.Level(l), Seconds: best[l]})
		}
	}
	return ts, nil
}
