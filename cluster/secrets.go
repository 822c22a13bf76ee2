package cluster

import (
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// Secrets are what a process needs to take part in a deployment's bus:
// its NATS credentials and the deployment's message key. They travel
// from a parent to its children in the children's ChildSpec, on their
// standard input, never on a command line.
type Secrets struct {
	// Auth authenticates the connection to the NATS server.
	Auth busnats.Auth `json:"auth"`
	// Key authenticates every message and heartbeat (bus/nats
	// Options.Key).
	Key []byte `json:"key"`
}
