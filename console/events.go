package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Interval bounds of the events stream: the default sampling interval and
// the range a client may ask for with ?interval=.
const (
	DefaultInterval = time.Second
	MinInterval     = 100 * time.Millisecond
	MaxInterval     = 10 * time.Second
)

// Window is the span over which the latency percentiles are computed.
const Window = time.Minute

// Frame is one event of the stream: the state and what changed since the
// previous frame of the same stream.
type Frame struct {
	// T is the sample's time, in Unix milliseconds.
	T int64 `json:"t"`
	// Draining is true in the last frame, sent when the server shuts down.
	Draining bool `json:"draining"`
	// InFlight counts the generation requests admitted and not finished.
	InFlight int64 `json:"in_flight"`
	// Presets are the deployments.
	Presets []PresetFrame `json:"presets"`
}

// PresetFrame is one deployment in a Frame.
type PresetFrame struct {
	// Name and Algorithm name the preset and its routing algorithm.
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	// Active counts its requests in flight.
	Active int `json:"active"`
	// TTFT and TPOT are percentiles in milliseconds.
	TTFT Percentiles `json:"ttft"`
	TPOT Percentiles `json:"tpot"`
	// Models are its models in routing order.
	Models []ModelFrame `json:"models"`
}

// Percentiles are estimated from histogram buckets (linear within a
// bucket); N is the number of observations they cover, over the last
// WindowS seconds (0: since the server started, until the stream has been
// open for a Window).
type Percentiles struct {
	N       uint64  `json:"n"`
	WindowS float64 `json:"window_s"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
}

// ModelFrame is one model in a Frame. Rates and means are over the
// interval since the previous frame (zero in the first).
type ModelFrame struct {
	Name      string `json:"name"`
	Simulated bool   `json:"simulated"`
	Up        bool   `json:"up"`
	Restarts  int    `json:"restarts"`
	// Runnable, Pending and Known count requests queued here, parked
	// here and known here; KV the sequences holding KV cache.
	Runnable int `json:"runnable"`
	Pending  int `json:"pending"`
	Known    int `json:"known"`
	KV       int `json:"kv"`
	// LastBatch is the last step's batch size; Batch the mean batch.
	LastBatch int     `json:"last_batch"`
	Batch     float64 `json:"batch"`
	// StepMS is the mean step latency, LastStepMS the last one's.
	StepMS     float64 `json:"step_ms"`
	LastStepMS float64 `json:"last_step_ms"`
	// TokS is the rate of committed output tokens.
	TokS float64 `json:"tok_s"`
	// StepsS is the rate of engine steps.
	StepsS float64 `json:"steps_s"`
	// Routed is the fraction of stepped requests handed to another model.
	Routed float64 `json:"routed"`
	// B is the threshold table B(n) (null when not known here: a
	// sub-server started elsewhere owns its policy); BNow its value at the
	// preset's current active count; MaxWaitMS the max-wait guard; BSince
	// when the policy took effect (Unix milliseconds).
	B         []int   `json:"b"`
	BNow      int     `json:"b_now"`
	MaxWaitMS float64 `json:"max_wait_ms"`
	BSince    int64   `json:"b_since"`
}

// Events serves the dashboard's stream: one Frame per interval (default
// DefaultInterval, or ?interval= within [MinInterval, MaxInterval]) until
// the client leaves or the server drains. Each stream samples src on its
// own; nothing is sampled while no stream is open.
func Events(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		every := DefaultInterval
		if v := r.URL.Query().Get("interval"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < MinInterval || d > MaxInterval {
				http.Error(w, fmt.Sprintf("interval %q: want a duration from %v to %v", v, MinInterval, MaxInterval), http.StatusBadRequest)
				return
			}
			every = d
		}
		h := w.Header()
		setHeaders(h)
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		_ = stream(r.Context(), w, src, every) // ends when the client leaves or the server drains
	})
}

// stream writes frames to w every interval until ctx ends, a write fails
// or the server drains.
func stream(ctx context.Context, w http.ResponseWriter, src Source, every time.Duration) error {
	rc := http.NewResponseController(w)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var s sampler
	for {
		f := s.frame(src.Snapshot(), time.Now())
		b, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if err := rc.Flush(); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if f.Draining {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
