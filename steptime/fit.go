package steptime

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Point is one measured step: Batch sequences extending Extend tokens in
// total beyond one each, over Context tokens of context per row on
// average, took MS.
type Point struct {
	// Batch is the number of sequences in the step.
	Batch int `json:"batch"`
	// Extend is the number of tokens appended beyond one per sequence, in
	// total (rows = Batch + Extend).
	Extend float64 `json:"extend"`
	// Context is the mean number of tokens a row's sequence held before
	// the step (weighted by rows).
	Context float64 `json:"context"`
	// MS is the step time in milliseconds.
	MS float64 `json:"ms"`
	// Weight is the point's weight in a fit (0 counts as 1), such as the
	// number of steps a mean was taken over.
	Weight float64 `json:"weight,omitempty"`
}

// Rows returns Batch + Extend.
func (p Point) Rows() float64 { return float64(p.Batch) + p.Extend }

// FitOptions choose the terms of a fit.
type FitOptions struct {
	// Knots are the rows of R's knots; nil places them at the points'
	// distinct rows (rounded), or at powers of two when there are many.
	Knots []int
	// PerSeq fits the per-sequence term (needs points with equal rows and
	// different batch sizes).
	PerSeq bool
	// Context fits the per-row context term (needs points at different
	// contexts).
	Context bool
}

// Fit fits a curve to measured steps by weighted least squares on
// relative errors, keeping R non-decreasing (a step never gets faster with
// more rows; adjacent knots that would fall are tied), R's first knot
// non-negative (tied to the next while it is not) and the context term
// non-negative. Any positive points give a valid curve.
func Fit(pts []Point, o FitOptions) (Curve, error) {
	if len(pts) == 0 {
		return Curve{}, errors.New("steptime: fit: no points")
	}
	for _, p := range pts {
		if p.Batch < 1 || p.Extend < 0 || p.Context < 0 || !(p.MS > 0) || p.Weight < 0 || math.IsInf(p.MS, 0) {
			return Curve{}, fmt.Errorf("steptime: fit: bad point %+v", p)
		}
	}
	knots := o.Knots
	if knots == nil {
		knots = defaultKnots(pts)
	}
	knots = supported(knots, pts)
	f := fitter{pts: pts, knots: knots, perSeq: o.PerSeq, context: o.Context}
	f.group = make([]int, len(knots))
	for i := range f.group {
		f.group[i] = i
	}
	for {
		c, err := f.solve()
		if err != nil {
			return Curve{}, err
		}
		if f.context && c.PerRowContextMS < 0 {
			f.context = false
			continue
		}
		if f.perSeq && c.Validate() != nil {
			f.perSeq = false
			continue
		}
		if f.tieFall(c) {
			continue
		}
		err = c.Validate()
		switch {
		case err == nil:
			return c, nil
		case f.tieNegative(c):
		case f.context:
			f.context = false
		default:
			return Curve{}, fmt.Errorf("steptime: fit: %w", err)
		}
	}
}

// MaxRelError returns the largest |L(p) − p.MS| / p.MS over pts.
func (c Curve) MaxRelError(pts []Point) float64 {
	worst := 0.0
	for _, p := range pts {
		worst = max(worst, math.Abs(c.At(p.Batch, p.Extend, p.Context)-p.MS)/p.MS)
	}
	return worst
}

// maxDefaultKnots bounds the knots Fit places by default: bench
// --calibrate's default grid has 18 distinct rows (16, up to 68, from its
// decodes and short extends of 1-17 sequences; 128 and 256 from its
// prompt-sized steps), and all are kept, because engines step in stairs.
const maxDefaultKnots = 24

// defaultKnots places knots at the points' distinct rows (rounded), or,
// with more than maxDefaultKnots of them, at the powers of two strictly
// between the smallest and largest rows and at those two (rounded
// outwards).
func defaultKnots(pts []Point) []int {
	var ks []int
	lo, hi := math.Inf(1), 0.0
	for _, p := range pts {
		lo, hi = min(lo, p.Rows()), max(hi, p.Rows())
		ks = append(ks, max(1, int(math.Round(p.Rows()))))
	}
	slices.Sort(ks)
	if ks = slices.Compact(ks); len(ks) <= maxDefaultKnots {
		return ks
	}
	a, b := int(math.Floor(lo)), int(math.Ceil(hi))
	ks = []int{a}
	for r := 1; r < b; r *= 2 {
		if r > a {
			ks = append(ks, r)
		}
	}
	if b > a {
		ks = append(ks, b)
	}
	return ks
}

// supported drops interior knots that no point lies next to (nothing in
// the open interval between their neighbours), which the data cannot
// determine, and sorts and dedups the rest.
func supported(knots []int, pts []Point) []int {
	ks := slices.Clone(knots)
	slices.Sort(ks)
	ks = slices.Compact(ks)
	for changed := true; changed; {
		changed = false
		for i := 1; i+1 < len(ks); i++ {
			lo, hi := float64(ks[i-1]), float64(ks[i+1])
			if !slices.ContainsFunc(pts, func(p Point) bool { return p.Rows() > lo && p.Rows() < hi }) {
				ks = slices.Delete(ks, i, i+1)
				changed = true
				break
			}
		}
	}
	if len(ks) == 2 {
		// Two knots need points at two different rows.
		first := pts[0].Rows()
		if !slices.ContainsFunc(pts, func(p Point) bool { return p.Rows() != first }) {
			ks = ks[:1]
		}
	}
	return ks
}

// fitter holds one fit's state: knots tied into groups that share a value.
type fitter struct {
	pts             []Point
	knots           []int
	group           []int // knot → group; groups are runs of adjacent knots
	perSeq, context bool
}

func (f *fitter) groups() int { return f.group[len(f.group)-1] + 1 }

// solve fits the group values and the enabled terms.
func (f *fitter) solve() (Curve, error) {
	g := f.groups()
	cols := g
	seqCol, ctxCol := -1, -1
	if f.perSeq {
		seqCol = cols
		cols++
	}
	if f.context {
		ctxCol = cols
		cols++
	}
	if len(f.pts) < cols {
		return Curve{}, fmt.Errorf("steptime: fit: %d points for %d unknowns", len(f.pts), cols)
	}
	a := mat.NewDense(len(f.pts), cols, nil)
	y := mat.NewVecDense(len(f.pts), nil)
	for r, p := range f.pts {
		w := p.Weight
		if w == 0 {
			w = 1
		}
		s := math.Sqrt(w) / p.MS // relative error, weighted
		for k, h := range hats(f.knots, p.Rows()) {
			a.Set(r, f.group[k], a.At(r, f.group[k])+s*h)
		}
		if seqCol >= 0 {
			a.Set(r, seqCol, s*float64(p.Batch))
		}
		if ctxCol >= 0 {
			a.Set(r, ctxCol, s*p.Rows()*p.Context)
		}
		y.SetVec(r, s*p.MS)
	}
	var x mat.VecDense
	if err := x.SolveVec(a, y); err != nil {
		var cond mat.Condition
		if !errors.As(err, &cond) {
			return Curve{}, fmt.Errorf("steptime: fit: %w", err)
		}
		if float64(cond) > 1e14 {
			return Curve{}, fmt.Errorf("steptime: fit: the points do not determine the curve (condition %.3g)", float64(cond))
		}
	}
	c := Curve{Knots: make([]Knot, len(f.knots))}
	for k, r := range f.knots {
		c.Knots[k] = Knot{Rows: r, MS: x.AtVec(f.group[k])}
	}
	if seqCol >= 0 {
		c.PerSeqMS = x.AtVec(seqCol)
	}
	if ctxCol >= 0 {
		c.PerRowContextMS = x.AtVec(ctxCol)
	}
	return c, nil
}

// tieFall ties the two adjacent groups with the largest fall of R, if R
// falls anywhere, and reports whether it did.
func (f *fitter) tieFall(c Curve) bool {
	worst, at := 0.0, -1
	for k := 1; k < len(c.Knots); k++ {
		if d := c.Knots[k-1].MS - c.Knots[k].MS; f.group[k] != f.group[k-1] && d > worst {
			worst, at = d, k
		}
	}
	if at < 0 {
		return false
	}
	for k := at; k < len(f.group); k++ {
		f.group[k]--
	}
	return true
}

// tieNegative ties the first group of R to the next when R is negative at
// its first knot (noise under a steep context term can pull it below
// zero), and reports whether it did.
func (f *fitter) tieNegative(c Curve) bool {
	if c.Knots[0].MS >= 0 || f.groups() < 2 {
		return false
	}
	for k := range f.group {
		if f.group[k] > 0 {
			f.group[k]--
		}
	}
	return true
}

// hats returns the weight of each knot in R(rows): linear interpolation on
// the segment holding rows, the first or last segment's line outside.
func hats(knots []int, rows float64) []float64 {
	h := make([]float64, len(knots))
	if len(knots) == 1 {
		h[0] = 1
		return h
	}
	j, t := segment(len(knots), func(i int) int { return knots[i] }, rows)
	h[j-1], h[j] = 1-t, t
	return h
}
