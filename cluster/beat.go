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
// tokenrouter binary's subserver command), restarted when it dies, and the
// front end in the calling process.
package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// beatVersion is the heartbeat encoding's version.
const beatVersion = 2

// Defaults of the liveness settings.
const (
	// DefaultHeartbeat is the heartbeat interval.
	DefaultHeartbeat = 500 * time.Millisecond
	// DefaultMisses is how many missed heartbeats mark a peer dead.
	DefaultMisses = 3
)

// Beat is one heartbeat: a member's (Index >= 0) or a front end's
// (Index = -1). It is published on prefix.hb.<index> or prefix.hb.front.
type Beat struct {
	// V is the encoding version.
	V int `json:"v"`
	// Index is the model index, -1 for a front end.
	Index int `json:"index"`
	// Models are the model names of the deployment, in index order.
	Models []string `json:"models,omitempty"`
	// Algorithm names the routing algorithm the member runs.
	Algorithm string `json:"algorithm,omitempty"`
	// Incarnation identifies one run of the sender; a restart changes it.
	Incarnation uint64 `json:"incarnation"`
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

// beatSubject is the heartbeat subject of index (-1: the front end).
func beatSubject(prefix string, index int) string {
	if index < 0 {
		return prefix + ".hb.front"
	}
	return prefix + ".hb." + strconv.Itoa(index)
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
