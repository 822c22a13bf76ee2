package subserver

import (
	"errors"
	"fmt"
	"time"
)

// The stall watchdog's rule (DESIGN §8.2), shared by the in-process
// deployment (deploy) and the front end of sub-servers in other processes
// (cluster), which reads the same counters from heartbeats: a loop that
// has spent longer than the stall timeout in one iteration (an engine
// step that never returns, a deadlock) is stalled; its model is reported
// down, its requests end with ErrStalled, and it is restarted.

// MinStallTimeout is the least automatic stall timeout; StallSteps is how
// many of the model's longest steps the automatic timeout allows.
const (
	MinStallTimeout = 10 * time.Second
	StallSteps      = 5
)

// ErrStalled is wrapped by the errors of requests ended because their
// model's loop stopped making progress.
var ErrStalled = errors.New("model stalled")

// StallTimeout is the stall timeout in force: configured when positive,
// otherwise StallSteps times the longest step so far, at least
// MinStallTimeout.
func StallTimeout(configured, maxStep time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return max(MinStallTimeout, StallSteps*maxStep)
}

// Stalled reports, for a sub-server's counters, an error wrapping
// ErrStalled when its loop has been in one iteration longer than the stall
// timeout (configured: see StallTimeout), and nil otherwise.
func Stalled(st Stats, configured time.Duration) error {
	limit := StallTimeout(configured, st.MaxStep)
	if st.Busy <= limit {
		return nil
	}
	return fmt.Errorf("%w: its loop made no progress for %v (stall timeout %v; %d requests queued)",
		ErrStalled, st.Busy.Round(time.Millisecond), limit, st.Runnable)
}
