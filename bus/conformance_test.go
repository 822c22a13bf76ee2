package bus_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/bus/bustest"
)

// TestConformance runs the bus conformance suite on the in-memory bus.
func TestConformance(t *testing.T) {
	bustest.Run(t, bustest.Options{
		New: func(t testing.TB, n int) []bus.Bus {
			m := bus.NewMemory()
			t.Cleanup(func() { _ = m.Close() })
			bs := make([]bus.Bus, n)
			for i := range bs {
				bs[i] = m // one process: every endpoint holds the same bus
			}
			return bs
		},
		ReportsNoEndpoint: true,
	})
}
