package router_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// busCase is one bus the router tests run on: every test body runs on the
// in-memory bus and on NATS (an embedded server on loopback).
type busCase struct {
	name string
	mk   func(t *testing.T) bus.Bus
}

// bus returns a new bus for one router, or nil for the router's own
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

// natsBus starts an embedded NATS server and connects a bus to it; both
// stop when the test ends.
func natsBus(t *testing.T) bus.Bus {
	t.Helper()
	srv, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: "test"})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := b.Errors(); n != 0 {
			t.Errorf("NATS bus: %d events could not be carried", n)
		}
		_ = b.Close()
		srv.Close()
	})
	return b
}

// forEachBus runs f as one subtest per bus.
func forEachBus(t *testing.T, f func(t *testing.T, bc busCase)) {
	for _, bc := range busCases() {
		t.Run(bc.name, func(t *testing.T) { f(t, bc) })
	}
}
