package cpu

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// Where the kernel plan of an engine comes from (KernelReport.Source).
const (
	// PlanForced: Options.Kernels named one level for every class.
	PlanForced = "forced"
	// PlanMeasured: measured as the engine opened.
	PlanMeasured = "measured"
	// PlanCached: measured by an earlier start on this CPU with these
	// kernels, read from the cache.
	PlanCached = "cached"
)

// KernelReport is the engine's kernel plan: the level of each class of
// operation (kernels.Class) and the timings it was chosen from.
type KernelReport struct {
	// Source is PlanForced, PlanMeasured or PlanCached.
	Source string `json:"source"`
	// Choices has one entry per class and weight type (one for attention).
	Choices []KernelChoice `json:"choices"`
	// Cost is how long the measurement took when it was made; Took is how
	// long this engine's start spent on the plan (reading the cache, or
	// measuring).
	Cost time.Duration `json:"cost_ns"`
	Took time.Duration `json:"took_ns"`
	// CachePath is the cache file read or written ("" without a cache).
	CachePath string `json:"cache_path,omitempty"`
}

// KernelChoice is the level chosen for one class (and weight type) with
// the time of each level measured (the shortest of its runs).
type KernelChoice struct {
	Class string             `json:"class"`
	Type  string             `json:"type,omitempty"`
	Level string             `json:"level"`
	Times map[string]float64 `json:"seconds,omitempty"`
}

// kernelPlan is the plan an engine runs and how it got it.
type kernelPlan struct {
	plan    kernels.Plan
	timings []kernels.Timing
	source  string
	cost    time.Duration
	took    time.Duration
	path    string
}

// choosePlan returns the kernel plan: a forced level everywhere, else the
// cached plan for this model's shapes, else a measured one (then cached).
// top is the highest level the engine may run; sets holds NewSet(l) for
// each level it may run (nil for the others).
func (e *Engine) choosePlan(ctx context.Context, opts Options, forced bool, top kernels.Level, sets []*kernels.Set) (kernelPlan, error) {
	types := e.weightTypes()
	if forced {
		return kernelPlan{plan: kernels.Uniform(top, types), source: PlanForced}, nil
	}
	start := time.Now()
	cache := kernels.PlanCache{Dir: opts.KernelCacheDir}
	switch {
	case opts.KernelCacheDir == "off":
		cache.Dir = ""
	case opts.KernelCacheDir == "":
		if dir, err := os.UserCacheDir(); err == nil {
			cache.Dir = filepath.Join(dir, "tokenrouter")
		}
	}
	key := e.planKey()
	kp := kernelPlan{}
	if cache.Dir != "" {
		kp.path = cache.Path()
	}
	if c, ok := cache.Load(key); ok && !opts.RemeasureKernels && coversTypes(c.Plan, types) {
		kp.plan, kp.timings, kp.source, kp.cost, kp.took = c.Plan, c.Timings, PlanCached, c.Cost, time.Since(start)
		return kp, nil
	}
	times, err := e.measureKernels(ctx, sets)
	if err != nil {
		return kernelPlan{}, err
	}
	kp.plan = kernels.Decide(times, func(t gguf.TensorType, l kernels.Level) string { return sets[l].Arithmetic(t) }, e.agreeFunc(sets))
	kp.timings, kp.source = times, PlanMeasured
	kp.cost = time.Since(start)
	kp.took = kp.cost
	if cache.Dir == "" {
		return kp, nil
	}
	// The first plan stored wins: a start that measured at the same time
	// as another takes the other's plan if it was stored meanwhile, so the
	// engines of one model on this machine run the same kernels.
	if c, ok := cache.Load(key); ok && !opts.RemeasureKernels && coversTypes(c.Plan, types) {
		kp.plan, kp.timings, kp.source, kp.cost = c.Plan, c.Timings, PlanCached, c.Cost
		return kp, nil
	}
	if err := cache.Store(key, kernels.CachedPlan{Plan: kp.plan, Timings: times, Cost: kp.cost, Saved: time.Now()}); err != nil {
		e.log.Warn("cpu: kernel plan not cached", "model", e.info.Name, "err", err)
	}
	return kp, nil
}

// coversTypes reports whether p has a level for every type.
func coversTypes(p kernels.Plan, types []gguf.TensorType) bool {
	for _, t := range types {
		if _, ok := p.Mul[t]; !ok {
			return false
		}
	}
	return true
}

// weightTypes returns the types of the model's weight matrices, sorted.
func (e *Engine) weightTypes() []gguf.TensorType {
	var ts []gguf.TensorType
	for _, m := range e.w.matrices() {
		ts = append(ts, m.typ)
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// planKey names what a plan is measured on: the attention shape and, per
// weight type, the shape of the matrices timed. The thread count is not
// part of it: a plan measured at one count serves the others, so that a
// model's outputs on this machine do not depend on its thread count.
func (e *Engine) planKey() string {
	c := e.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "attention=%dx%d/%d", c.heads, c.headDim, c.kvHeads)
	for _, t := range e.weightTypes() {
		m := e.representative(t)
		fmt.Fprintf(&b, " %s=%dx%d", t, m.rows, m.cols)
	}
	return b.String()
}

// representative returns the matrix of type t with the most bytes.
func (e *Engine) representative(t gguf.TensorType) *matrix {
	var best *matrix
	for _, m := range e.w.matrices() {
		if m.typ == t && (best == nil || len(m.data) > len(best.data)) {
			best = m
		}
	}
	return best
}

// agreeFunc returns the probe Decide asks before two levels share a
// weight type: the levels' kernels on the first rows of the type's
// representative matrix (kernels.Agree).
func (e *Engine) agreeFunc(sets []*kernels.Set) func(gguf.TensorType, kernels.Level, kernels.Level) bool {
	return func(t gguf.TensorType, a, b kernels.Level) bool {
		m := e.representative(t)
		ka, oka := sets[a].For(t)
		kb, okb := sets[b].For(t)
		if m == nil || !oka || !okb {
			return false
		}
		rows := min(m.rows, 64)
		return kernels.Agree(m.cols, m.data, m.rowBytes, rows, ka, kb)
	}
}

// applyPlan gives every matrix its kernel of each class and the engine its
// attention kernels; the activation kernels (which give the same bits at
// every level) come from the highest level the plan uses.
func (e *Engine) applyPlan(kp kernelPlan, sets []*kernels.Set) error {
	for _, l := range kp.plan.Levels() {
		if int(l) >= len(sets) || sets[l] == nil {
			return fmt.Errorf("cpu: the kernel plan names level %s, which this engine does not run", l)
		}
	}
	for _, m := range e.w.matrices() {
		ls, ok := kp.plan.Mul[m.typ]
		if !ok {
			return fmt.Errorf("cpu: no kernel plan for weight type %s", m.typ)
		}
		for c, l := range ls {
			k, ok := sets[l].For(m.typ)
			if !ok {
				return fmt.Errorf("cpu: no kernel for weight type %s: %w", m.typ, gguf.ErrUnsupported)
			}
			m.k[c] = k
		}
	}
	top := slices.Max(kp.plan.Levels())
	e.set = sets[top]
	e.scores, e.values = sets[kp.plan.Attention].Attention()
	e.glu = e.set.SwiGLU()
	if e.cfg.gelu {
		e.glu = e.set.GeGLU()
	}
	e.expShift = e.set.ExpShift()
	e.plan = kp
	return nil
}

// KernelReport returns the engine's kernel plan and the timings it was
// chosen from.
func (e *Engine) KernelReport() KernelReport {
	kp := e.plan
	r := KernelReport{Source: kp.source, Cost: kp.cost, Took: kp.took, CachePath: kp.path}
	times := map[[2]string]map[string]float64{}
	for _, tm := range kp.timings {
		k := [2]string{tm.Class.String(), ""}
		if tm.Class != kernels.Attention {
			k[1] = tm.Type.String()
		}
		if times[k] == nil {
			times[k] = map[string]float64{}
		}
		times[k][tm.Level.String()] = tm.Seconds
	}
	for c := range kernels.Class(kernels.MulClasses) {
		for _, t := range slices.Sorted(maps.Keys(kp.plan.Mul)) {
			r.Choices = append(r.Choices, KernelChoice{Class: c.String(), Type: t.String(), Level: kp.plan.Mul[t][c].String(),
				Times: times[[2]string{c.String(), t.String()}]})
		}
	}
	r.Choices = append(r.Choices, KernelChoice{Class: kernels.Attention.String(), Level: kp.plan.Attention.String(),
		Times: times[[2]string{kernels.Attention.String(), ""}]})
	return r
}

// KernelChoice reports the kernel level of each class of operation, by
// class name ("decode", "batch", "prompt", "attention"). A multiplication
// class whose level differs between weight types has instead one entry per
// type, "class/type" (as "decode/Q6_K").
func (e *Engine) KernelChoice() map[string]string {
	out := map[string]string{}
	r := e.KernelReport()
	byClass := map[string][]KernelChoice{}
	for _, c := range r.Choices {
		byClass[c.Class] = append(byClass[c.Class], c)
	}
	for class, cs := range byClass {
		uniform := !slices.ContainsFunc(cs, func(c KernelChoice) bool { return c.Level != cs[0].Level })
		for _, c := range cs {
			if uniform {
				out[class] = c.Level
			} else {
				out[class+"/"+c.Type] = c.Level
			}
		}
	}
	return out
}

// logPlan writes one line per class: the level chosen and the times
// measured.
func (e *Engine) logPlan() {
	r := e.KernelReport()
	byClass := map[string][]KernelChoice{}
	var order []string
	for _, c := range r.Choices {
		if byClass[c.Class] == nil {
			order = append(order, c.Class)
		}
		byClass[c.Class] = append(byClass[c.Class], c)
	}
	choice := e.KernelChoice()
	for _, class := range order {
		var levels, times []string
		for _, c := range byClass[class] {
			name := c.Type
			if name == "" {
				name = class
			}
			levels = append(levels, fmt.Sprintf("%s=%s", name, c.Level))
			var ts []string
			for _, l := range slices.Sorted(maps.Keys(c.Times)) {
				ts = append(ts, fmt.Sprintf("%s %.3gms", l, 1e3*c.Times[l]))
			}
			if len(ts) > 0 {
				times = append(times, name+": "+strings.Join(ts, ", "))
			}
		}
		level := choice[class]
		if level == "" {
			level = strings.Join(levels, " ")
		}
		// A plan read from the cache was logged when it was measured:
		// engines opened again (every start, the placement probes) say it
		// at Debug only.
		lv := slog.LevelInfo
		if r.Source == PlanCached {
			lv = slog.LevelDebug
		}
		e.log.Log(context.Background(), lv, "cpu: kernels", "model", e.info.Name, "class", class, "level", level, "source", r.Source,
			"times", strings.Join(times, "; "), "took", r.Took.Round(time.Microsecond))
	}
}

// logger returns l, or the default logger.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
