// Package natstest gives tests a NATS bus on an embedded server, so every
// test that runs on the in-memory bus can run on NATS too.
package natstest

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// Bus starts an embedded NATS server on loopback and connects a bus to it
// under prefix; both stop when the test ends, and the test fails if the bus
// could not carry an event.
func Bus(t testing.TB, prefix string) bus.Bus {
	t.Helper()
	srv, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: prefix})
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
