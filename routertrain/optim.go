package routertrain

import "math"

// bce is the mean binary cross-entropy of logits z against labels y with
// the positive class weighted by posWeight (PyTorch's BCEWithLogitsLoss
// with pos_weight): −[w·y·log σ(z) + (1−y)·log(1−σ(z))], w further
// multiplied per row by wt[i] when wt is not nil. When dz is not
// nil it receives the gradient of the mean with respect to each logit.
func bce(z []float64, y []uint8, posWeight float64, wt []float64, dz []float64) float64 {
	var sum float64
	n := float64(len(z))
	for i, v := range z {
		// log σ(v) = −softplus(−v), log(1−σ(v)) = −softplus(v)
		s := sigmoid(v)
		if y[i] == 1 {
			pw := posWeight
			if wt != nil {
				pw *= wt[i]
			}
			sum += pw * softplus(-v)
			if dz != nil {
				dz[i] = pw * (s - 1) / n
			}
		} else {
			sum += softplus(v)
			if dz != nil {
				dz[i] = s / n
			}
		}
	}
	return sum / n
}

func sigmoid(v float64) float64 {
	if v >= 0 {
		return 1 / (1 + math.Exp(-v))
	}
	e := math.Exp(v)
	return e / (1 + e)
}

// softplus is log(1 + eᵛ), computed without overflow.
func softplus(v float64) float64 {
	if v > 0 {
		return v + math.Log1p(math.Exp(-v))
	}
	return math.Log1p(math.Exp(v))
}

// adam is the Adam optimiser (Kingma and Ba) with bias correction.
type adam struct {
	lr, beta1, beta2, eps float64
	t                     int
}

func newAdam(lr float64) *adam { return &adam{lr: lr, beta1: 0.9, beta2: 0.999, eps: 1e-8} }

// step updates every parameter from its gradient and zeroes the gradient.
func (a *adam) step(ps []*param) {
	a.t++
	c1 := 1 - math.Pow(a.beta1, float64(a.t))
	c2 := 1 - math.Pow(a.beta2, float64(a.t))
	for _, p := range ps {
		if p.m == nil {
			p.m, p.v = make([]float64, len(p.w)), make([]float64, len(p.w))
		}
		for i, g := range p.g {
			p.m[i] = a.beta1*p.m[i] + (1-a.beta1)*g
			p.v[i] = a.beta2*p.v[i] + (1-a.beta2)*g*g
			p.w[i] -= a.lr * (p.m[i] / c1) / (math.Sqrt(p.v[i]/c2) + a.eps)
		}
		clear(p.g)
	}
}
