package kernels

import (
	"math"
	"slices"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Plan is the kernel level of each class of operation: per weight type for
// the multiplication classes (by Class, Decode to Prompt), one level for
// attention.
type Plan struct {
	Mul       map[gguf.TensorType][MulClasses]Level
	Attention Level
}

// Uniform returns the plan that runs level l for every class of the types.
func Uniform(l Level, types []gguf.TensorType) Plan {
	p := Plan{Mul: make(map[gguf.TensorType][MulClasses]Level, len(types)), Attention: l}
	for _, t := range types {
		p.Mul[t] = [MulClasses]Level{l, l, l}
	}
	return p
}

// Levels returns the distinct levels the plan uses, in order.
func (p Plan) Levels() []Level {
	ls := []Level{p.Attention}
	for _, cl := range p.Mul {
		ls = append(ls, cl[:]...)
	}
	slices.Sort(ls)
	return slices.Compact(ls)
}

// Timing is the measured time of one kernel level on one class of
// operation: for a multiplication class, on a representative matrix of one
// weight type (Type is unused for Attention).
type Timing struct {
	Class Class
	Type  gguf.TensorType
	Level Level
	// Seconds is the shortest of the runs.
	Seconds float64
}

// Decide chooses a plan from timings. For each weight type it keeps the
// levels whose kernels share one arithmetic (arith, the function
// Arithmetic of the level a kernel was written for): those may serve
// different classes without a sequence's results depending on its batch
// (see Arithmetic). Of the groups of such levels it takes the one whose
// fastest member per class costs least over the classes, each class
// counted as its time over the fastest time any level had for it (so a
// group that is twice as slow in one class and as fast in the others costs
// 4 against 3); within the group, each class gets its fastest level. agree
// is asked before two different levels of a group share a type (a probe of
// the bits, Agree); if it says no, the group's best single level serves
// every class. Attention, whose kernels give the same bits at every level,
// takes the fastest level. A type or class without timings gets the
// highest level timed.
func Decide(times []Timing, arith func(gguf.TensorType, Level) string, agree func(t gguf.TensorType, a, b Level) bool) Plan {
	p := Plan{Mul: map[gguf.TensorType][MulClasses]Level{}}
	byType := map[gguf.TensorType]map[Level][MulClasses]float64{}
	attn := map[Level]float64{}
	top := Generic
	for _, tm := range times {
		top = max(top, tm.Level)
		if tm.Class == Attention {
			attn[tm.Level] = tm.Seconds
			continue
		}
		if int(tm.Class) >= MulClasses {
			continue
		}
		m := byType[tm.Type]
		if m == nil {
			m = map[Level][MulClasses]float64{}
			byType[tm.Type] = m
		}
		v, ok := m[tm.Level]
		if !ok {
			v = [MulClasses]float64{math.Inf(1), math.Inf(1), math.Inf(1)}
		}
		v[tm.Class] = tm.Seconds
		m[tm.Level] = v
	}
	p.Attention = fastest(attn, top)
	for t, m := range byType {
		p.Mul[t] = decideType(t, m, arith, agree)
	}
	return p
}

// fastest returns the level of the shortest time, or def if there is none.
func fastest(times map[Level]float64, def Level) Level {
	best, bt := def, math.Inf(1)
	for _, l := range sortedLevels(times) {
		if times[l] < bt {
			best, bt = l, times[l]
		}
	}
	return best
}

func sortedLevels[V any](m map[Level]V) []Level {
	ls := make([]Level, 0, len(m))
	for l := range m {
		ls = append(ls, l)
	}
	slices.Sort(ls)
	return ls
}

// decideType is Decide for the levels timed on one weight type.
func decideType(t gguf.TensorType, m map[Level][MulClasses]float64, arith func(gguf.TensorType, Level) string, agree func(t gguf.TensorType, a, b Level) bool) [MulClasses]Level {
	levels := sortedLevels(m)
	var best [MulClasses]float64
	for c := range best {
		best[c] = math.Inf(1)
		for _, l := range levels {
			best[c] = min(best[c], m[l][c])
		}
	}
	groups := map[string][]Level{}
	var names []string
	for _, l := range levels {
		a := arith(t, l)
		if groups[a] == nil {
			names = append(names, a)
		}
		groups[a] = append(groups[a], l)
	}
	var pick [MulClasses]Level
	bestCost := math.Inf(1)
	for _, name := range names {
		choice, cost := groupChoice(groups[name], m, best)
		if cost < bestCost || math.IsInf(bestCost, 1) {
			pick, bestCost = choice, cost
		}
	}
	for c := 1; c < MulClasses; c++ {
		if pick[c] != pick[0] && !agree(t, pick[0], pick[c]) {
			single, _ := groupChoice([]Level{pick[0]}, m, best)
			for _, l := range pick[1:] {
				if alt, _ := groupChoice([]Level{l}, m, best); cost(alt, m, best) < cost(single, m, best) {
					single = alt
				}
			}
			return single
		}
	}
	return pick
}

// groupChoice returns the fastest level of the group for each class and
// the cost of that choice (see Decide).
func groupChoice(group []Level, m map[Level][MulClasses]float64, best [MulClasses]float64) ([MulClasses]Level, float64) {
	var pick [MulClasses]Level
	for c := range pick {
		pick[c] = group[len(group)-1]
		bt := math.Inf(1)
		for _, l := range group {
			if m[l][c] < bt {
				pick[c], bt = l, m[l][c]
			}
		}
	}
	return pick, cost(pick, m, best)
}

// cost sums, over the classes, the chosen level's time over the fastest.
func cost(pick [MulClasses]Level, m map[Level][MulClasses]float64, best [MulClasses]float64) float64 {
	s := 0.0
	for c, l := range pick {
		switch {
		case math.IsInf(best[c], 1):
		case best[c] <= 0:
			s++
		default:
			s += m[l][c] / best[c]
		}
	}
	return s
}
