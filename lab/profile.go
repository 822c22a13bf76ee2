package lab

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// WithProfile gives m the step-time curves and interference of a profile
// (one per model, in order) under placement (default: the profile's, else
// partitioned) and the workload w.
func WithProfile(m perfmodel.Model, p sim.Preset, placement string, w perfmodel.Workload) (perfmodel.Model, error) {
	if len(p.Profiles) != m.M() {
		return m, fmt.Errorf("profile %s has %d models; the algorithm routes over %d", p.Name, len(p.Profiles), m.M())
	}
	pl, err := ParsePlacement(placement, p.Placement)
	if err != nil {
		return m, err
	}
	if p.Placement != "" && string(pl) != p.Placement {
		return m, fmt.Errorf("profile %s was measured under %s placement, not %s (calibrate that placement: bench calibrate --calibrate-placement %s)", p.Name, p.Placement, pl, pl)
	}
	m.L = nil
	m.Steps, m.Interference = p.Curves()
	m.Placement, m.Workload = pl, w
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("profile %s: %w", p.Name, err)
	}
	return m, nil
}

// ParsePlacement reads a placement; "" takes def, else partitioned.
func ParsePlacement(s, def string) (perfmodel.Placement, error) {
	if s == "" {
		s = def
	}
	switch perfmodel.Placement(s) {
	case "", perfmodel.Partitioned:
		return perfmodel.Partitioned, nil
	case perfmodel.TimeShared:
		return perfmodel.TimeShared, nil
	}
	return "", fmt.Errorf("placement %q: want %s or %s", s, perfmodel.Partitioned, perfmodel.TimeShared)
}
