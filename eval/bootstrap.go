package eval

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Bootstrap is how firm a curve comparison is, over the choice of prompts:
// the prompts are resampled with replacement, every point of every series
// is recomputed on the resample (Resample), and the curves are read again
// at the shares.
type Bootstrap struct {
	// Resamples is how many resamples were drawn; Seed seeded them.
	Resamples int    `json:"resamples"`
	Seed      uint64 `json:"seed"`
	// Reference is the series the others are compared with.
	Reference string `json:"reference"`
	// Series are the intervals and comparisons, in the report's order.
	Series []BootSeries `json:"series"`
}

// BootSeries is one series' bootstrap result for both measures.
type BootSeries struct {
	Label     string      `json:"label"`
	Agreement BootMeasure `json:"agreement"`
	LogLik    BootMeasure `json:"llm_loglik"`
}

// BootMeasure is one measure's bootstrap result for one series.
type BootMeasure struct {
	// Low and High bound the central 95% of the resampled curve at each
	// share (null where a resample's curve is not defined there).
	Low  []*float64 `json:"low"`
	High []*float64 `json:"high"`
	// AtLeast is the share of resamples in which the reference's curve is
	// at least this series' at every share (1 for the reference itself).
	AtLeast float64 `json:"reference_at_least"`
}

// Resample returns p recomputed over the prompts idx (indices into
// p.PerPrompt, repeats allowed): its large-model share, agreement and
// log-likelihood. Quality, throughput and the Pareto mark are left out.
func Resample(p Point, idx []int) Point {
	q := Point{Value: p.Value}
	sc := make([]Score, len(idx))
	large := 0
	for k, i := range idx {
		s := p.PerPrompt[i]
		q.Tokens += s.Tokens
		large += s.Large
		sc[k] = s.Score
	}
	if q.Tokens > 0 {
		q.LargeShare = float64(large) / float64(q.Tokens)
	}
	q.Measures = Summarize(sc)
	return q
}

// NewBootstrap resamples the prompts n times (seeded) and compares every
// series with the one labelled ref. Every point must carry the same
// number of PerPrompt entries.
func NewBootstrap(series []Series, shares []float64, ref string, n int, seed uint64) (*Bootstrap, error) {
	if n < 1 || len(series) == 0 {
		return nil, errors.New("eval: bootstrap: no resamples or no series")
	}
	r := slices.IndexFunc(series, func(s Series) bool { return s.Label == ref })
	if r < 0 {
		return nil, fmt.Errorf("eval: bootstrap: no series labelled %q", ref)
	}
	prompts := -1
	for _, s := range series {
		for _, p := range s.Points {
			if prompts >= 0 && len(p.PerPrompt) != prompts || len(p.PerPrompt) == 0 {
				return nil, fmt.Errorf("eval: bootstrap: series %s value %s has %d prompts' results, want %d",
					s.Label, p.Value, len(p.PerPrompt), max(prompts, 1))
			}
			prompts = len(p.PerPrompt)
		}
	}
	metrics := []Metric{AgreementOf, LogLikOf}
	// draws[m][s][b][k]: metric m, series s, resample b, share k.
	draws := make([][][][]float64, len(metrics))
	for m := range draws {
		draws[m] = make([][][]float64, len(series))
	}
	rng := rand.New(rand.NewPCG(seed, 0x6576616c))
	idx := make([]int, prompts)
	pts := make([]Point, 0, 64)
	for range n {
		for i := range idx {
			idx[i] = rng.IntN(prompts)
		}
		for si, s := range series {
			pts = pts[:0]
			for _, p := range s.Points {
				pts = append(pts, Resample(p, idx))
			}
			for m, mt := range metrics {
				row := make([]float64, len(shares))
				for k, sh := range shares {
					row[k] = At(pts, mt, sh)
				}
				draws[m][si] = append(draws[m][si], row)
			}
		}
	}
	b := &Bootstrap{Resamples: n, Seed: seed, Reference: ref}
	for si, s := range series {
		b.Series = append(b.Series, BootSeries{Label: s.Label,
			Agreement: summarizeDraws(draws[0][si], draws[0][r]), LogLik: summarizeDraws(draws[1][si], draws[1][r])})
	}
	return b, nil
}

// summarizeDraws returns the 95% intervals of a series' resampled curves
// and how often the reference's curve was at least as high at every
// share.
func summarizeDraws(own, ref [][]float64) BootMeasure {
	var bm BootMeasure
	shares := len(own[0])
	col := make([]float64, 0, len(own))
	for k := range shares {
		col = col[:0]
		for _, row := range own {
			if !math.IsNaN(row[k]) {
				col = append(col, row[k])
			}
		}
		if len(col) < len(own) || len(col) == 0 {
			bm.Low, bm.High = append(bm.Low, nil), append(bm.High, nil)
			continue
		}
		slices.Sort(col)
		bm.Low = append(bm.Low, finite(quantile(col, 0.025)))
		bm.High = append(bm.High, finite(quantile(col, 0.975)))
	}
	wins := 0
	for b := range own {
		ok := true
		for k := range shares {
			if !(ref[b][k] >= own[b][k]) {
				ok = false
			}
		}
		if ok {
			wins++
		}
	}
	bm.AtLeast = float64(wins) / float64(len(own))
	return bm
}

// quantile returns the q-quantile of sorted values, linearly interpolated.
func quantile(sorted []float64, q float64) float64 {
	x := q * float64(len(sorted)-1)
	i := int(x)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (x-float64(i))*(sorted[i+1]-sorted[i])
}
