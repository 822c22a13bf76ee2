package nats_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/bus/bustest"
	"github.com/tokenrouter/tokenrouter/bus/nats/natstest"
)

// TestConformance runs the bus conformance suite on NATS: an embedded
// server with one connection per handle.
func TestConformance(t *testing.T) {
	bustest.Run(t, bustest.Options{
		New: func(t testing.TB, n int) []bus.Bus { return natstest.Buses(t, "conformance", n) },
		// Subjects nobody subscribes to swallow messages: NATS cannot
		// tell the sender.
		ReportsNoEndpoint: false,
	})
}
