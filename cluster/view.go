package cluster

import (
	"slices"
	"sync"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/sched/place"
)

// view is what a member knows of the deployment's replicas, for the
// hand-offs its sub-server places (subserver.Placer): the replicas up, as
// the front end's heartbeats list them, and those whose loss was announced
// (bus.Lost, subserver.LossTaker) since. A front end's heartbeat composed
// before a loss may arrive after it: the lost incarnation stays down until
// a new one of that replica comes up.
type view struct {
	*place.Board
	slots Slots
	mu    sync.Mutex
	inc   []uint64 // per slot: the incarnation the board has up
	lost  []uint64 // per slot: the incarnation whose loss was announced
	// counts are the outcomes of this member's placements, per model.
	counts []deploy.Placements
}

// Place places a hand-off and counts its outcome (subserver.Placer).
func (v *view) Place(model, pinned int, id uint64, pos int) int {
	rep, o := v.HandOff(model, pinned, id, pos)
	v.mu.Lock()
	if model >= 0 && model < len(v.counts) {
		v.counts[model].Count(o)
	}
	v.mu.Unlock()
	return rep
}

// placements returns the outcomes of this member's placements, per model.
func (v *view) placements() []deploy.Placements {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.counts)
}

// newView returns the view of a deployment whose models run counts[i]
// replicas each, every one up: until the front end places requests, they
// all join (a member that joins later hears the front end's list first).
func newView(counts []int, seed uint64) *view {
	slots := slotsOf(counts)
	n := slots.Len()
	v := &view{Board: place.NewBoard(counts, seed), slots: slots, inc: make([]uint64, n), lost: make([]uint64, n),
		counts: make([]deploy.Placements, len(counts))}
	for k := range n {
		i, rep := v.slots.Of(k)
		v.SetUp(i, rep, 0)
	}
	return v
}

// Lost marks the replica at endpoint ep down (subserver.LossTaker).
func (v *view) Lost(ep int) {
	i, rep := bus.ModelOf(ep), bus.ReplicaOf(ep)
	k := v.slots.Slot(i, rep)
	if k < 0 {
		return
	}
	v.mu.Lock()
	v.lost[k] = v.inc[k]
	v.mu.Unlock()
	v.SetDown(i, rep)
}

// apply takes the replicas up a front end's heartbeat lists: they are up,
// with their loads, unless lost since; the others are down.
func (v *view) apply(ups []UpReplica) {
	listed := make([]bool, v.slots.Len())
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, u := range ups {
		k := v.slots.Slot(u.Model, u.Replica)
		if k < 0 || u.Incarnation == 0 || u.Incarnation == v.lost[k] {
			continue
		}
		listed[k], v.inc[k] = true, u.Incarnation
		v.SetUp(u.Model, u.Replica, u.Since)
		v.SetDraining(u.Model, u.Replica, u.Draining)
		v.Report(u.Model, u.Replica, u.Load)
	}
	for k, ok := range listed {
		if !ok {
			v.SetDown(v.slots.Of(k))
		}
	}
}
