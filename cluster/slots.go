package cluster

import "github.com/tokenrouter/tokenrouter/system"

// Slots number the sub-servers of a deployment, one per replica of each
// model, in model order: model 0's replicas first. Without replicas, slot
// i is model i.
type Slots struct {
	base []int // base[i] is model i's first slot; base[len] the count
}

// SlotsOf returns the slots of the models of s (config.Model.Replicas
// each, at least one).
func SlotsOf(s system.Spec) Slots {
	base := make([]int, len(s.Models)+1)
	for i, m := range s.Models {
		base[i+1] = base[i] + max(m.Replicas, 1)
	}
	return Slots{base: base}
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
