package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tokenrouter/tokenrouter/console"
	"github.com/tokenrouter/tokenrouter/sched"
)

// The web console (package console) is served at "/" and under
// "/console/": its page and files to anyone (they hold nothing secret),
// its events stream behind the API key like the API.

// mountConsole adds the console's routes to mux.
func (s *Server) mountConsole(mux *http.ServeMux) {
	assets := console.Assets()
	mux.Handle("/{$}", s.wrap(http.MethodGet, false, assets.ServeHTTP))
	mux.Handle("/console/", s.wrap(http.MethodGet, false, assets.ServeHTTP))
	mux.Handle("/console/events", s.wrap(http.MethodGet, true, console.Events(consoleSource{s}).ServeHTTP))
}

// consoleSource reads the server's state for the console's dashboard.
type consoleSource struct{ s *Server }

// Snapshot implements console.Source.
func (c consoleSource) Snapshot() console.State {
	s := c.s
	st := console.State{Draining: s.draining.Load(), InFlight: s.inFlight.Load(), Presets: make([]console.Preset, len(s.deps))}
	for i, d := range s.deps {
		p := console.Preset{Name: d.name, Algorithm: d.algorithm, Active: d.r.Active(),
			TTFT: histogram(s.metrics.ttft, d.name), TPOT: histogram(s.metrics.tpot, d.name), Models: make([]console.Model, len(d.models))}
		stats := d.stats()
		for j, m := range d.models {
			cm := console.Model{Name: m.name, Simulated: m.simulated, Up: true}
			if j < len(stats) {
				cm.Up, cm.Restarts, cm.Stats = stats[j].Up, stats[j].Restarts, stats[j].Stats
				cm.Policy, cm.PolicySince = d.policy(j, stats[j].Policy)
			}
			p.Models[j] = cm
		}
		st.Presets[i] = p
	}
	return st
}

// policy returns model i's launch policy in force and since when: an
// in-process sub-server's own (set by the automatic tuner's last plan, or
// at the start), else remote, what a sub-server elsewhere was given (nil
// when it owns its policy).
func (d *deployment) policy(i int, remote *sched.Policy) (*sched.Policy, time.Time) {
	since := time.Unix(d.created, 0)
	subs := d.r.Replicas(i) // every replica runs the model's policy
	if len(subs) == 0 {
		return remote, since
	}
	if t := d.r.Tuner(); t != nil {
		if last := t.Status().LastPlan; !last.IsZero() {
			since = last
		}
	}
	p := subs[0].Policy()
	return &p, since
}

// histogram reads the cumulative buckets of preset's series of v.
func histogram(v *prometheus.HistogramVec, preset string) console.Histogram {
	var m dto.Metric
	o, err := v.GetMetricWithLabelValues(preset)
	if err != nil {
		return console.Histogram{}
	}
	pm, ok := o.(prometheus.Metric)
	if !ok || pm.Write(&m) != nil || m.GetHistogram() == nil {
		return console.Histogram{}
	}
	h := m.GetHistogram()
	out := console.Histogram{Count: h.GetSampleCount(), Bounds: make([]float64, len(h.GetBucket())), Counts: make([]uint64, len(h.GetBucket()))}
	for i, b := range h.GetBucket() {
		out.Bounds[i], out.Counts[i] = b.GetUpperBound(), b.GetCumulativeCount()
	}
	return out
}
