package lab

import (
	"slices"

	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// atStepSpeed returns m with every model's step time (its curve, or its
// constant latency) scaled by ratio (from OverCurve; a model with ratio 0
// keeps its own).
func atStepSpeed(m perfmodel.Model, ratio []float64) perfmodel.Model {
	m.Steps, m.L = slices.Clone(m.Steps), slices.Clone(m.L)
	for i, r := range ratio {
		switch {
		case r <= 0:
		case i < len(m.Steps):
			m.Steps[i] = m.Steps[i].Scale(r)
		case i < len(m.L):
			m.L[i] *= r
		}
	}
	return m
}
