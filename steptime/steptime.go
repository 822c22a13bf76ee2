// Package steptime describes how long one engine step takes as a function
// of what the step runs (DESIGN §6a). A Curve is the one representation of
// a model's step time: the simulated engine sleeps it (engine/sim), the
// throughput model launches batches with it (perfmodel), the automatic
// thresholds estimate it from observed steps (autotune), and calibration
// fits it to steps measured on a real engine (bench calibrate).
//
// A step over b sequences that append e tokens in total beyond one each
// processes b + e rows (tokens); a row attends over c tokens of context on
// average: what its sequence held before the step, weighted by rows
// (Σ rows_s·held_s / Σ rows_s). Engines stack every row of a step into one pass
// over the weights, so the main cost is a function of the rows; each
// sequence adds its output (logits, sampling), and each row attends over
// its sequence's context:
//
//	L(b, e, c) = R(b + e) + PerSeqMS·b + PerRowContextMS·(b + e)·c   (ms)
//
// R is piecewise linear through the curve's knots (rows → ms) and continues
// along its first and last segments beyond them; one knot makes it
// constant. The paper's batch-independent step time is Constant(L): one
// knot and no other term. Linear gives the simulated engine's older
// Base + PerSeq·b + PerToken·e form.
package steptime

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FoldAbove is the interference factor above which a model's steps are
// taken to be slowed by it throughout (DESIGN §6a: fold it into L_i when
// it exceeds 5%); at or below it, the interference is ignored.
const FoldAbove = 1.05

// Knot is one point of a curve's piecewise-linear part: R(Rows) = MS.
type Knot struct {
	// Rows is the number of rows (tokens) the step processes.
	Rows int `json:"rows" yaml:"rows"`
	// MS is R at Rows, in milliseconds.
	MS float64 `json:"ms" yaml:"ms"`
}

// Curve is a model's step time L(b, e, c) in milliseconds; see the package
// documentation. The zero Curve is invalid.
type Curve struct {
	// Knots define R: rows strictly increasing, at least one knot.
	Knots []Knot `json:"knots" yaml:"knots,flow"`
	// PerSeqMS is the cost of each sequence in the batch beyond its rows
	// (its output: logits, sampling). It may be negative as long as every
	// step time stays positive.
	PerSeqMS float64 `json:"per_seq_ms,omitempty" yaml:"per_seq_ms,omitempty"`
	// PerRowContextMS is the cost of each row per token of context its
	// sequence holds (attention over the KV cache).
	PerRowContextMS float64 `json:"per_row_context_ms,omitempty" yaml:"per_row_context_ms,omitempty"`
}

// ErrInvalid is wrapped by every curve validation error.
var ErrInvalid = errors.New("steptime: invalid curve")

// Constant returns the batch-independent step time ms.
func Constant(ms float64) Curve { return Curve{Knots: []Knot{{Rows: 1, MS: ms}}} }

// Linear returns the step time base + perSeq·b + perToken·e (milliseconds):
// R(rows) = base + perToken·rows and a per-sequence cost of perSeq − perToken.
func Linear(base, perSeq, perToken float64) Curve {
	if perToken == 0 {
		return Curve{Knots: []Knot{{Rows: 1, MS: base}}, PerSeqMS: perSeq}
	}
	return Curve{Knots: []Knot{{Rows: 1, MS: base + perToken}, {Rows: 2, MS: base + 2*perToken}}, PerSeqMS: perSeq - perToken}
}

// Rows returns R(rows): the knots' piecewise-linear interpolation, continued
// along the first and last segments.
func (c Curve) Rows(rows float64) float64 {
	k := c.Knots
	switch len(k) {
	case 0:
		return 0
	case 1:
		return k[0].MS
	}
	j, t := segment(len(k), func(i int) int { return k[i].Rows }, rows)
	return k[j-1].MS + t*(k[j].MS-k[j-1].MS)
}

// segment locates rows among n ≥ 2 knots at rowsAt(0) < rowsAt(1) < …: the
// segment [j−1, j] holding it (the first or the last one outside them) and
// its position t on that segment (outside [0, 1] beyond the knots).
func segment(n int, rowsAt func(int) int, rows float64) (j int, t float64) {
	j = 1
	for j < n-1 && float64(rowsAt(j)) < rows {
		j++
	}
	a, b := rowsAt(j-1), rowsAt(j)
	return j, (rows - float64(a)) / float64(b-a)
}

// Straight reports whether R is one straight line (at most two knots, or
// knots on one line): then a step's expected time over any spread of its
// rows is its time at the mean rows.
func (c Curve) Straight() bool {
	k := c.Knots
	if len(k) <= 2 {
		return true
	}
	slope := func(i int) float64 { return (k[i].MS - k[i-1].MS) / float64(k[i].Rows-k[i-1].Rows) }
	s0 := slope(1)
	for i := 2; i < len(k); i++ {
		if math.Abs(slope(i)-s0) > 1e-12*max(1, math.Abs(s0)) {
			return false
		}
	}
	return true
}

// At returns the step time in milliseconds of b sequences extending e
// tokens in total beyond one each, whose rows attend over ctx tokens of
// context on average (never negative).
func (c Curve) At(b int, e, ctx float64) float64 {
	rows := float64(b) + e
	return max(0, c.Rows(rows)+c.PerSeqMS*float64(b)+c.PerRowContextMS*rows*ctx)
}

// Duration is At as a duration, rounded to the nanosecond.
func (c Curve) Duration(b int, e, ctx float64) time.Duration {
	return time.Duration(math.Round(c.At(b, e, ctx) * float64(time.Millisecond)))
}

// Constant reports whether the step time does not depend on the batch:
// one knot (or equal knots) and no per-sequence or context term.
func (c Curve) Constant() bool {
	if c.PerSeqMS != 0 || c.PerRowContextMS != 0 {
		return false
	}
	for _, k := range c.Knots {
		if k.MS != c.Knots[0].MS {
			return false
		}
	}
	return true
}

// Scale returns the curve with every step time multiplied by f.
func (c Curve) Scale(f float64) Curve {
	out := Curve{Knots: slices.Clone(c.Knots), PerSeqMS: c.PerSeqMS * f, PerRowContextMS: c.PerRowContextMS * f}
	for i := range out.Knots {
		out.Knots[i].MS *= f
	}
	return out
}

// WithInterference returns the curve a model steps at under partitioned
// placement when its steps slow down by factor f while another model steps:
// scaled by f when f exceeds FoldAbove, unchanged otherwise.
func (c Curve) WithInterference(f float64) Curve {
	if f > FoldAbove {
		return c.Scale(f)
	}
	return c
}

// Validate checks the knots and that step times stay non-negative for
// every batch of at least one sequence.
func (c Curve) Validate() error {
	if len(c.Knots) == 0 {
		return fmt.Errorf("%w: no knots", ErrInvalid)
	}
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for i, k := range c.Knots {
		if k.Rows < 1 || (i > 0 && k.Rows <= c.Knots[i-1].Rows) {
			return fmt.Errorf("%w: knot rows must be at least 1 and increasing, got %v", ErrInvalid, c.Knots)
		}
		if !fin(k.MS) || k.MS < 0 || k.MS > 3.6e6 {
			return fmt.Errorf("%w: knot %d: %v ms out of range", ErrInvalid, k.Rows, k.MS)
		}
	}
	if !fin(c.PerSeqMS) || !fin(c.PerRowContextMS) || c.PerRowContextMS < 0 {
		return fmt.Errorf("%w: per-sequence %v ms, per-row-context %v ms", ErrInvalid, c.PerSeqMS, c.PerRowContextMS)
	}
	// No batch may make a decode step's time negative: check the knots and
	// the slope beyond.
	last := c.Knots[len(c.Knots)-1]
	slope := 0.0
	if n := len(c.Knots); n > 1 {
		slope = (last.MS - c.Knots[n-2].MS) / float64(last.Rows-c.Knots[n-2].Rows)
	}
	for _, b := range []int{1, last.Rows} {
		if v := c.Rows(float64(b)) + c.PerSeqMS*float64(b); !(v >= 0) {
			return fmt.Errorf("%w: a decode step of %d sequences takes %v ms", ErrInvalid, b, v)
		}
	}
	if slope+c.PerSeqMS < 0 {
		return fmt.Errorf("%w: step time falls with the batch beyond %d rows", ErrInvalid, last.Rows)
	}
	return nil
}

// String is a compact text form: "R(1)=6, R(16)=40 +0.5/seq +2e-05/row·ctx".
func (c Curve) String() string {
	var b strings.Builder
	for i, k := range c.Knots {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "R(%d)=%s", k.Rows, strconv.FormatFloat(k.MS, 'g', 6, 64))
	}
	if c.PerSeqMS != 0 {
		fmt.Fprintf(&b, " %+g/seq", c.PerSeqMS)
	}
	if c.PerRowContextMS != 0 {
		fmt.Fprintf(&b, " %+g/row·ctx", c.PerRowContextMS)
	}
	return b.String() + " ms"
}
