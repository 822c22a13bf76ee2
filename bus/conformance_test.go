package bus_test

import (
	"time"

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

// TestDelayedConformance runs the suite on the in-memory bus behind a
// delay: the suite's events between model endpoints arrive 2 ms late, and
// a delayed event to an endpoint nobody attached cannot be refused.
func TestDelayedConformance(t *testing.T) {
	bustest.Run(t, bustest.Options{
		New: func(t testing.TB, n int) []bus.Bus {
			d := bus.NewDelayed(bus.NewMemory(), 2*time.Millisecond)
			t.Cleanup(func() { _ = d.Close() })
			bs := make([]bus.Bus, n)
			for i := range bs {
				bs[i] = d
			}
			return bs
		},
	})
}
