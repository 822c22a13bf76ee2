// Package natstest gives tests a NATS bus on an embedded server, so every
// test that runs on the in-memory bus can run on NATS too.
package natstest

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// Bus starts an embedded NATS server on loopback and connects a bus to it
// under prefix, with the server's credentials and a fresh message key; both stop when the test ends, and the test fails if the bus
// could not carry an event.
func Bus(t testing.TB, prefix string) bus.Bus {
	t.Helper()
	return Buses(t, prefix, 1)[0]
}

// Buses is Bus with n connections to one server under one prefix, as n
// processes of one deployment hold.
func Buses(t testing.TB, prefix string, n int) []bus.Bus {
	t.Helper()
	srv, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	key := busnats.NewKey()
	bs := make([]bus.Bus, n)
	for i := range bs {
		b, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: prefix, Auth: srv.ClientAuth(), Key: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if n := b.Errors(); n != 0 {
				t.Errorf("NATS bus: %d events could not be carried", n)
			}
			_ = b.Close()
		})
		bs[i] = b
	}
	return bs
}
