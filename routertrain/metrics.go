package routertrain

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// CurvePoint is one operating point of a threshold sweep: with every
// position whose probability reaches Threshold sent to the large model,
// the ROC coordinates (FPR, TPR = Recall), the Precision and the Share of
// positions sent.
type CurvePoint struct {
	Threshold, FPR, Recall, Precision, Share float64
}

// Curve sweeps the threshold down through every distinct probability of p
// (labels y, 1 = the large model differs) and returns the operating
// points, starting from "nothing sent" (threshold above every
// probability; precision 1 by convention) and ending with everything
// sent.
func Curve(p []float64, y []uint8) []CurvePoint {
	idx := make([]int, len(p))
	pos := 0
	for i := range idx {
		idx[i] = i
		pos += int(y[i])
	}
	neg := len(p) - pos
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
	top := 1.0
	if len(p) > 0 {
		top = min(math.Nextafter(p[idx[0]], math.Inf(1)), 1)
	}
	out := []CurvePoint{{Threshold: top, Precision: 1}}
	tp, fp := 0, 0
	for i := 0; i < len(idx); {
		t := p[idx[i]]
		for ; i < len(idx) && p[idx[i]] == t; i++ {
			tp += int(y[idx[i]])
			fp += 1 - int(y[idx[i]])
		}
		out = append(out, CurvePoint{Threshold: t, FPR: ratio(fp, neg), Recall: ratio(tp, pos),
			Precision: ratio(tp, tp+fp), Share: ratio(tp+fp, len(p))})
	}
	return out
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// AUC is the area under the ROC curve of c (trapezoids; ties count one
// half, as the Mann–Whitney statistic).
func AUC(c []CurvePoint) float64 {
	var a float64
	for i := 1; i < len(c); i++ {
		a += (c[i].FPR - c[i-1].FPR) * (c[i].Recall + c[i-1].Recall) / 2
	}
	return a
}

// AveragePrecision is the area under the precision–recall curve of c as
// the step sum Σ (Rₖ − Rₖ₋₁)·Pₖ.
func AveragePrecision(c []CurvePoint) float64 {
	var a float64
	for i := 1; i < len(c); i++ {
		a += (c[i].Recall - c[i-1].Recall) * c[i].Precision
	}
	return a
}

// Target is how the threshold is chosen on the held-out positions:
// exactly one of Share (the fraction of positions sent to the large model)
// and Recall (the fraction of differing positions sent) is set, in [0, 1];
// the other is negative.
type Target struct {
	Share, Recall float64
}

// check validates t.
func (t Target) check() error {
	switch {
	case (t.Share >= 0) == (t.Recall >= 0):
		return errors.New("give exactly one of a target share and a target recall")
	case t.Share > 1 || t.Recall > 1 || math.IsNaN(t.Share) || math.IsNaN(t.Recall):
		return fmt.Errorf("target share %v / recall %v out of range [0, 1]", t.Share, t.Recall)
	}
	return nil
}

// Threshold returns the probability threshold meeting t on the curve c:
// the highest threshold whose share (or recall) reaches the target.
func Threshold(c []CurvePoint, t Target) float64 {
	for _, q := range c {
		if t.Share >= 0 && q.Share >= t.Share-1e-12 || t.Recall >= 0 && q.Recall >= t.Recall-1e-12 {
			return q.Threshold
		}
	}
	return c[len(c)-1].Threshold
}

// at returns the operating point of c at threshold t: the last point whose
// threshold is at least t.
func at(c []CurvePoint, t float64) CurvePoint {
	q := c[0]
	for _, x := range c {
		if x.Threshold >= t {
			q = x
		}
	}
	return q
}
