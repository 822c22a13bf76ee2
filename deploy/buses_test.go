package deploy_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus/nats/natstest"

	"github.com/tokenrouter/tokenrouter/bus"
)

// busCase is one bus the deploy tests run on: every test body runs on the
// in-memory bus and on NATS (an embedded server on loopback).
type busCase struct {
	name string
	mk   func(t *testing.T) bus.Bus
}

// bus returns a new bus for one deployment, or nil for the deployment's own
// in-memory bus.
func (c busCase) bus(t *testing.T) bus.Bus {
	if c.mk == nil {
		return nil
	}
	return c.mk(t)
}

func busCases() []busCase {
	return []busCase{{name: "memory"}, {name: "nats", mk: natsBus}}
}

// natsBus returns a bus on an embedded NATS server for one test.
func natsBus(t *testing.T) bus.Bus { return natstest.Bus(t, "test") }

// forEachBus runs f as one subtest per bus.
func forEachBus(t *testing.T, f func(t *testing.T, bc busCase)) {
	for _, bc := range busCases() {
		t.Run(bc.name, func(t *testing.T) { f(t, bc) })
	}
}
