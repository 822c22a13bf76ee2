package bench

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// PairedLead returns the mean of a[r] − b[r] over the rounds r both have,
// the half-width of its 95% Student-t confidence interval (0 with fewer
// than two pairs) and the number of pairs.
func PairedLead(a, b map[int]float64) (mean, half float64, n int) {
	var d []float64
	for r, x := range a {
		if y, ok := b[r]; ok {
			d = append(d, x-y)
		}
	}
	n = len(d)
	if n == 0 {
		return 0, 0, 0
	}
	mean = stat.Mean(d, nil)
	if n < 2 {
		return mean, 0, n
	}
	se := stat.StdDev(d, nil) / math.Sqrt(float64(n))
	return mean, distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975) * se, n
}
