package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/system"
)

// ChildSpecVersion is the version of ChildSpec this binary writes and
// reads; a parent and a child of different versions refuse each other.
const ChildSpecVersion = 1

// MaxChildSpecSize bounds an encoded ChildSpec (the end of line included).
const MaxChildSpecSize = 1 << 20

// ChildSpec is everything one model's sub-server process needs: which
// model of which deployment it runs (Member) and how it attaches to the
// deployment's bus (Bus), the bus's secrets included. A parent encodes it
// once (Encode) and writes it to the child's standard input, whose command
// line is fixed (tokenrouter subserver --spec-on-stdin); the child reads
// it (ReadChildSpec) and runs it (RunChild). A member started by hand
// builds the same value from its flags (NewChildSpec) and runs it the
// same way.
type ChildSpec struct {
	// Version is ChildSpecVersion.
	Version int `json:"version"`
	// Member is the model's part of the deployment's system.Spec.
	Member system.MemberSpec `json:"member"`
	// Bus says how the member attaches to the deployment's bus.
	Bus BusSpec `json:"bus"`
}

// BusSpec is how a member attaches to its deployment's NATS bus.
type BusSpec struct {
	// NATS is the NATS server's URL (nats://host:port).
	NATS string `json:"nats"`
	// Prefix is the deployment's subject prefix.
	Prefix string `json:"prefix"`
	// Secrets are the NATS credentials and the deployment's message key.
	Secrets Secrets `json:"secrets"`
	// Heartbeat is the heartbeat interval and Misses the number of missed
	// front-end heartbeats after which the member drops every request
	// (MemberConfig).
	Heartbeat time.Duration `json:"heartbeat"`
	Misses    int           `json:"misses"`
	// Drain bounds a replica's draining when it is asked to stop
	// (MemberConfig.Drain; 0: none).
	Drain time.Duration `json:"drain,omitempty"`
}

// NewChildSpec is the ChildSpec of replica rep of model i of the
// deployment s on bus b: the one function both a parent and a member
// started by hand derive theirs with.
func NewChildSpec(s system.Spec, i, rep int, b BusSpec) (ChildSpec, error) {
	m, err := s.Member(i, rep)
	if err != nil {
		return ChildSpec{}, fmt.Errorf("cluster: %w", err)
	}
	c := ChildSpec{Version: ChildSpecVersion, Member: m, Bus: b}
	return c, c.Validate()
}

// Validate checks c, naming the field at fault.
func (c ChildSpec) Validate() error {
	if c.Version != ChildSpecVersion {
		return fmt.Errorf("cluster: child spec: version %d: this binary reads version %d (parent and child binaries differ)", c.Version, ChildSpecVersion)
	}
	if err := c.Member.Validate(); err != nil {
		return fmt.Errorf("cluster: child spec: %w", err)
	}
	b := c.Bus
	switch {
	case b.NATS == "":
		return errors.New("cluster: child spec: bus.nats: no NATS server URL")
	case b.Prefix == "" || strings.ContainsAny(b.Prefix, " \t\r\n*>"):
		return fmt.Errorf("cluster: child spec: bus.prefix %q: want a NATS subject without spaces or wildcards", b.Prefix)
	case len(b.Secrets.Key) < busnats.MinKeySize:
		return fmt.Errorf("cluster: child spec: bus.secrets.key: %d bytes, want at least %d", len(b.Secrets.Key), busnats.MinKeySize)
	case b.Heartbeat <= 0:
		return fmt.Errorf("cluster: child spec: bus.heartbeat %v: must be positive", b.Heartbeat)
	case b.Misses <= 0:
		return fmt.Errorf("cluster: child spec: bus.misses %d: must be positive", b.Misses)
	case b.Drain < 0:
		return fmt.Errorf("cluster: child spec: bus.drain %v: negative", b.Drain)
	}
	return nil
}

// Encode returns c as one line of JSON, after checking it.
func (c ChildSpec) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("cluster: child spec: %w", err)
	}
	if len(b)+1 > MaxChildSpecSize {
		return nil, fmt.Errorf("cluster: child spec: %d bytes, more than %d", len(b)+1, MaxChildSpecSize)
	}
	return append(b, '\n'), nil
}

// ReadChildSpec reads the line Encode wrote from r, at most
// MaxChildSpecSize bytes, and checks it: its version first, then every
// field (an unknown one is an error). What follows the line stays in r.
func ReadChildSpec(r *bufio.Reader) (ChildSpec, error) {
	line, err := readLine(r, MaxChildSpecSize)
	if err != nil {
		return ChildSpec{}, fmt.Errorf("cluster: child spec: %w", err)
	}
	return DecodeChildSpec(line)
}

// DecodeChildSpec decodes and checks one encoded ChildSpec (Encode's
// line; the end of line is optional).
func DecodeChildSpec(b []byte) (ChildSpec, error) {
	var c ChildSpec
	if len(b) > MaxChildSpecSize {
		return c, fmt.Errorf("cluster: child spec: %d bytes, more than %d", len(b), MaxChildSpecSize)
	}
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return c, fmt.Errorf("cluster: child spec: %w", err)
	}
	if v.Version == nil {
		return c, errors.New("cluster: child spec: version: missing")
	}
	if *v.Version != ChildSpecVersion {
		return c, fmt.Errorf("cluster: child spec: version %d: this binary reads version %d (parent and child binaries differ)", *v.Version, ChildSpecVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return ChildSpec{}, fmt.Errorf("cluster: child spec: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return ChildSpec{}, errors.New("cluster: child spec: data after the JSON object")
	}
	if err := c.Validate(); err != nil {
		return ChildSpec{}, err
	}
	return c, nil
}

// readLine reads one line of at most max bytes (the end of line
// included) from r.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, fmt.Errorf("more than %d bytes without an end of line", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(line) == 0 {
				return nil, errors.New("no spec: standard input ended first")
			}
			return nil, fmt.Errorf("truncated: %d bytes without an end of line", len(line))
		default:
			return nil, err
		}
	}
}

// RunChild runs the member c describes until ctx ends: it opens the
// model through package system and runs it on the bus (RunMember). hooks
// gives what is not data and stays in the member's process (see
// system.MemberSpec.Spec): the algorithm registry, the vocabulary for
// structured output, faults, and OnPanic and OnEvent, which RunMember
// also tells about membership.
func RunChild(ctx context.Context, c ChildSpec, hooks system.Spec) error {
	if err := c.Validate(); err != nil {
		return err
	}
	m, err := system.OpenMember(ctx, c.Member.Spec(hooks), c.Member.Index, c.Member.Replica)
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", c.Member.Index, err)
	}
	return RunMember(ctx, MemberConfig{URL: c.Bus.NATS, Secrets: c.Bus.Secrets, Prefix: c.Bus.Prefix, Member: m,
		Heartbeat: c.Bus.Heartbeat, Misses: c.Bus.Misses, Drain: c.Bus.Drain, OnEvent: hooks.OnEvent})
}
