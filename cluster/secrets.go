package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// Secrets are what a process needs to take part in a deployment's bus:
// its NATS credentials and the deployment's message key. They travel
// from a parent to its children as the first line of the children's
// standard input (WriteSecrets, ReadSecrets), never on a command line.
type Secrets struct {
	// Auth authenticates the connection to the NATS server.
	Auth busnats.Auth `json:"auth"`
	// Key authenticates every message and heartbeat (bus/nats
	// Options.Key).
	Key []byte `json:"key"`
}

// WriteSecrets writes s to w as one line.
func WriteSecrets(w io.Writer, s Secrets) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("cluster: secrets: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("cluster: secrets: %w", err)
	}
	return nil
}

// ReadSecrets reads the line WriteSecrets wrote from r (a line longer than
// r's buffer is an error); what follows the line stays in r for the
// caller.
func ReadSecrets(r *bufio.Reader) (Secrets, error) {
	var s Secrets
	line, err := r.ReadSlice('\n')
	if err != nil {
		return s, fmt.Errorf("cluster: reading secrets: %w", err)
	}
	if err := json.Unmarshal(line, &s); err != nil {
		return s, fmt.Errorf("cluster: secrets: %w", err)
	}
	if len(s.Key) < busnats.MinKeySize {
		return s, fmt.Errorf("cluster: secrets: message key of %d bytes, want at least %d", len(s.Key), busnats.MinKeySize)
	}
	return s, nil
}
