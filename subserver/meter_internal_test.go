package subserver

import (
	"testing"
	"time"
)

// TestMeterLongTrip: the automatic depth covers a long round trip, the
// mean plus two mean absolute deviations, not the mean one.
func TestMeterLongTrip(t *testing.T) {
	var m meter
	m.step.add(float64(6 * time.Millisecond))
	for i := range 200 {
		trip := 40 * time.Millisecond
		if i%2 == 1 {
			trip = 80 * time.Millisecond
		}
		m.sample(true, trip)
	}
	// Mean 60 ms, mean absolute deviation 20 ms: 100 ms, 17 steps of 6 ms
	// (the mean alone would give 10).
	if m.depth != 17 {
		t.Fatalf("depth %d (trip %v, spread %v), want 17", m.depth, time.Duration(m.trip.v), time.Duration(m.spread.v))
	}
	var steady meter
	steady.step.add(float64(6 * time.Millisecond))
	for range 200 {
		steady.sample(true, 60*time.Millisecond)
	}
	if steady.depth != 10 {
		t.Fatalf("steady 60 ms trips: depth %d, want 10", steady.depth)
	}
}
