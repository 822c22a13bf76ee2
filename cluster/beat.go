// Package cluster runs TokenRouter's sub-servers outside the front end's
// process: each model's sub-server in its own OS process or on its own
// machine, all connected by a NATS bus (bus/nats).
//
// RunMember runs one model's sub-server on the bus and announces it with
// heartbeats; Join is the front end's side: it waits until every model has
// announced itself, builds a deployment over the remote models and watches
// their heartbeats. A model that misses Config.Misses heartbeats (or
// restarts) is marked down: its requests in flight end with an error
// wrapping deploy.ErrUnavailable, the surviving sub-servers free them, and
// new requests are refused until it rejoins. A member that loses its front
// end (or sees a new one) drops every request it holds.
//
// Start runs a whole deployment on one machine: an embedded NATS server on
// loopback (or an external one), one child process per model (the
// tokenrouter binary's subserver command), and the front end in the calling
// process. A child that dies, or misses its heartbeats (hung, stopped), is
// killed and restarted with backoff.
//
// Security: every message and heartbeat carries an authentication tag
// keyed by the deployment's key (bus/nats Options.Key), so a client of the
// NATS server without the key can neither forge a heartbeat nor inject an
// event. Heartbeats also carry a sequence number, and incarnations that
// were replaced are retired, so a replayed heartbeat has no effect either.
// Start generates the key, and the embedded server's credentials, per run
// and hands them to the children on their standard input (Secrets), never
// on a command line.
package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/sched/place"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// beatVersion is the heartbeat encoding's version.
const beatVersion = 5

// Defaults of the liveness settings.
const (
	// DefaultHeartbeat is the heartbeat interval.
	DefaultHeartbeat = 500 * time.Millisecond
	// DefaultMisses is how many missed heartbeats mark a peer dead.
	DefaultMisses = 3
)

// Beat is one heartbeat: a member's (Index >= 0) or a front end's
// (Index = -1). It is published on prefix.hb.<endpoint> (the member's bus
// endpoint, bus.Endpoint(Index, Replica)) or prefix.hb.front.
type Beat struct {
	// V is the encoding version.
	V int `json:"v"`
	// Index is the model index, -1 for a front end.
	Index int `json:"index"`
	// Replica is the member's replica of its model.
	Replica int `json:"replica,omitempty"`
	// Load is the member's load (placement compares it).
	Load place.Load `json:"load"`
	// Draining says the member drains (it was asked to stop): it takes no
	// new request and leaves once it holds none; Leaving is its last
	// heartbeat, sent as it stops.
	Draining bool `json:"draining,omitempty"`
	Leaving  bool `json:"leaving,omitempty"`
	// Placements are the outcomes of the member's placements of its
	// hand-offs, per model (in deployments with replicas).
	Placements []deploy.Placements `json:"placements,omitempty"`
	// Up are the replicas the front end places requests on, with their
	// loads, for the members' hand-offs (front end; only in deployments
	// with replicas).
	Up []UpReplica `json:"up,omitempty"`
	// Placing says the front end places requests: Up lists every replica
	// up (before, a member takes every replica as up).
	Placing bool `json:"placing,omitempty"`
	// Models are the model names of the deployment, in index order.
	Models []string `json:"models,omitempty"`
	// Algorithm names the routing algorithm the member runs.
	Algorithm string `json:"algorithm,omitempty"`
	// Incarnation identifies one run of the sender; a restart changes it.
	Incarnation uint64 `json:"incarnation"`
	// Seq numbers the sender's heartbeats within its incarnation, from 1.
	Seq uint64 `json:"seq"`
	// Front is the incarnation of the front end a member serves (its
	// requests are that front end's); 0 before it has seen one.
	Front uint64 `json:"front,omitempty"`
	// Info are the member's model facts.
	Info engine.Info `json:"info"`
	// Stats are the member's sub-server counters (requests held, KV
	// sequences, steps, tokens, last step, busy time).
	subserver.Stats
	// Goroutines is the member process's goroutine count.
	Goroutines int
	// BusDropped counts the messages the member's bus dropped, by reason.
	BusDropped busnats.DropCounts
}

// UpReplica is a replica up, as a front end's heartbeat lists it.
type UpReplica struct {
	// Model and Replica name it and Incarnation its run; Since is the
	// last request admitted before it came up (it knows only later ones);
	// Load is its load.
	Model       int        `json:"model"`
	Replica     int        `json:"replica"`
	Incarnation uint64     `json:"incarnation"`
	Since       uint64     `json:"since"`
	Load        place.Load `json:"load"`
	Draining    bool       `json:"draining,omitempty"`
}

func (b *Beat) encode() []byte {
	b.V = beatVersion
	out, _ := json.Marshal(b) // a Beat always marshals
	return out
}

func decodeBeat(data []byte) (Beat, error) {
	var b Beat
	if len(data) > 1<<16 {
		return b, fmt.Errorf("cluster: heartbeat of %d bytes", len(data))
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("cluster: heartbeat: %w", err)
	}
	if b.V != beatVersion {
		return b, fmt.Errorf("cluster: heartbeat version %d, want %d", b.V, beatVersion)
	}
	return b, nil
}

// beatSubject is the heartbeat subject of bus endpoint ep (-1: the front
// end).
func beatSubject(prefix string, ep int) string {
	if ep < 0 {
		return prefix + ".hb.front"
	}
	return prefix + ".hb." + strconv.Itoa(ep)
}

// maxRetired bounds the retired incarnations a receiver remembers.
const maxRetired = 1024

// freshness accepts a sender's heartbeats only in order and only from its
// current or a new incarnation: a replayed heartbeat (a sequence number
// already seen) or one of an incarnation that was replaced is refused.
// Senders are numbered 0..n-1. It is owned by one goroutine.
type freshness struct {
	inc, seq []uint64
	retired  map[uint64]struct{}
	order    []uint64 // retirement order, oldest first
}

func newFreshness(n int) *freshness {
	return &freshness{inc: make([]uint64, n), seq: make([]uint64, n), retired: map[uint64]struct{}{}}
}

// accept reports whether sender i's beat (incarnation inc, number seq) is
// fresh, and records it.
func (f *freshness) accept(i int, inc, seq uint64) bool {
	if _, old := f.retired[inc]; old || inc == 0 {
		return false
	}
	if inc == f.inc[i] {
		if seq <= f.seq[i] {
			return false
		}
		f.seq[i] = seq
		return true
	}
	if f.inc[i] != 0 {
		f.retire(f.inc[i])
	}
	f.inc[i], f.seq[i] = inc, seq
	return true
}

func (f *freshness) retire(inc uint64) {
	if len(f.order) == maxRetired {
		delete(f.retired, f.order[0])
		f.order = f.order[1:]
	}
	f.retired[inc] = struct{}{}
	f.order = append(f.order, inc)
}

// incarnation returns a random non-zero run identifier.
func incarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}
