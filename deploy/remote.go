package deploy

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/sched/place"
)

// Remote replicas (DESIGN §9). A remote model may run several replicas
// elsewhere (Model.RemoteReplicas), each a sub-server with its own
// endpoint. Whoever watches their heartbeats (package cluster's front end)
// tells the deployment when one comes up or goes down and what load it
// reported; the deployment places new requests among those up, and a
// replica that goes down is announced (bus.Lost) as a local one is, so its
// requests go on on the model's other replicas.

// ReplicaState is one remote replica as the front end has it.
type ReplicaState struct {
	// Replica is its index; Up says whether it takes requests; Since is
	// the last request admitted before it came up (it knows only later
	// ones); Load is its last reported load with the placements made since.
	Replica  int
	Up       bool
	Draining bool
	Since    uint64
	Load     place.Load
}

// remoteReplica checks that replica rep of model i is a remote replica of
// a deployment that places among replicas.
func (r *Deployment) remoteReplica(i, rep int) bool {
	return r.placer != nil && i >= 0 && i < len(r.models) && r.models[i] == nil && rep >= 0 && rep < r.placer.remote.Replicas(i)
}

// ReplicaUp marks replica rep of remote model i up: it takes the requests
// admitted from now on; the model is available again if it was down. A
// deployment without replicas marks the model up (ModelUp).
func (r *Deployment) ReplicaUp(i, rep int) {
	if r.placer == nil {
		if rep == 0 {
			r.ModelUp(i)
		}
		return
	}
	if !r.remoteReplica(i, rep) {
		return
	}
	r.placer.remote.SetUp(i, rep, r.nextID.Load())
	r.ModelUp(i)
}

// ReplicaDraining marks replica rep of remote model i draining (or not):
// it keeps the requests it holds, and takes no new one; a request pinned
// there moves on its next hand-off to the model. It reports whether that
// changed.
func (r *Deployment) ReplicaDraining(i, rep int, drain bool) bool {
	if !r.remoteReplica(i, rep) || r.placer.remote.Draining(i, rep) == drain {
		return false
	}
	r.placer.remote.SetDraining(i, rep, drain)
	return true
}

// ReplicaLoad records the load replica rep of remote model i reported.
func (r *Deployment) ReplicaLoad(i, rep int, l place.Load) {
	if r.remoteReplica(i, rep) {
		r.placer.remote.Report(i, rep, l)
	}
}

// ReplicaDown marks replica rep of remote model i down: its requests go on
// on the model's other replicas from the hand-offs that brought them there
// (bus.Lost), or, when it was the model's last replica up, end with an
// error wrapping ErrUnavailable (ModelDown). It returns how many requests
// ended. A deployment without replicas marks the model down.
func (r *Deployment) ReplicaDown(i, rep int, cause error) int {
	if r.placer == nil {
		if rep != 0 {
			return 0
		}
		return r.ModelDown(i, cause)
	}
	if !r.remoteReplica(i, rep) || !r.placer.remote.SetDown(i, rep) {
		return 0
	}
	return r.replicaLost(i, rep, fmt.Errorf("deploy: replica %d of model %s: %w", rep, r.cfg.Models[i].Name, cause))
}

// RemoteReplicas returns the replicas of remote model i as the front end
// has them (nil for a local model, or without replicas).
func (r *Deployment) RemoteReplicas(i int) []ReplicaState {
	if r.placer == nil || i < 0 || i >= len(r.models) || r.models[i] != nil {
		return nil
	}
	out := make([]ReplicaState, r.placer.remote.Replicas(i))
	for k := range out {
		up, since, l := r.placer.remote.State(i, k)
		out[k] = ReplicaState{Replica: k, Up: up, Draining: r.placer.remote.Draining(i, k), Since: since, Load: l}
	}
	return out
}
