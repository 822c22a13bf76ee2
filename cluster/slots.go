package cluster

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/system"
)

// Slots number the sub-servers of a deployment, one per replica of each
// model, in model order: model 0's replicas first. Without replicas, slot
// i is model i.
type Slots struct {
	base []int // base[i] is model i's first slot; base[len] the count
}

// SlotsOf returns the slots of the models of s (config.Model.Replicas
// each, at least one).
func SlotsOf(s system.Spec) Slots {
	counts := make([]int, len(s.Models))
	for i, m := range s.Models {
		counts[i] = m.Replicas
	}
	return slotsOf(counts)
}

// slotsOf returns the slots of models that run counts[i] replicas each
// (at least one).
func slotsOf(counts []int) Slots {
	base := make([]int, len(counts)+1)
	for i, n := range counts {
		base[i+1] = base[i] + max(n, 1)
	}
	return Slots{base: base}
}

// Name names slot k after models: the model, and its replica when the
// model runs several ("slm#1").
func (s Slots) Name(models []string, k int) string {
	i, rep := s.Of(k)
	if i < 0 || i >= len(models) {
		return fmt.Sprintf("slot %d", k)
	}
	if s.Count(i) == 1 {
		return models[i]
	}
	return fmt.Sprintf("%s#%d", models[i], rep)
}

// Len returns the number of slots.
func (s Slots) Len() int { return s.base[len(s.base)-1] }

// Count returns how many replicas model i runs.
func (s Slots) Count(i int) int { return s.base[i+1] - s.base[i] }

// Slot returns the slot of replica rep of model i, or −1 when there is no
// such replica.
func (s Slots) Slot(i, rep int) int {
	if i < 0 || i+1 >= len(s.base) || rep < 0 || rep >= s.Count(i) {
		return -1
	}
	return s.base[i] + rep
}

// Of returns the model and replica of slot k.
func (s Slots) Of(k int) (model, replica int) {
	for i := 0; i+1 < len(s.base); i++ {
		if k < s.base[i+1] {
			return i, k - s.base[i]
		}
	}
	return -1, -1
}
