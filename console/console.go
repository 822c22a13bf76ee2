// Package console is TokenRouter's web console, served by the HTTP server
// itself: a playground that streams an answer with every token coloured by
// the model that produced it, and a live dashboard of the deployments.
//
// The page, its style sheet and its scripts are embedded in the binary and
// served with a strict Content-Security-Policy (scripts and styles from the
// server's own origin only, no inline script, no frames, nothing from
// elsewhere). The playground talks to the server's public API (/v1/models,
// /generate); the dashboard reads one server-sent-events stream (Events)
// that samples the server's own state (a Source) while someone watches it.
// Nothing runs while nobody has a dashboard open.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every console response: only the
// server's own scripts, styles and connections; no inline script or style
// element, no plug-ins, frames or form posts.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Page is the file served at the server's root.
const Page = "index.html"

// Source is the server state the dashboard shows.
type Source interface {
	// Snapshot returns the state now. It is called once per interval per
	// open dashboard, from that dashboard's request goroutine.
	Snapshot() State
}

// State is one sample of the server's state.
type State struct {
	// Draining is true once the server shuts down; the events stream
	// then ends.
	Draining bool
	// InFlight counts the generation requests admitted and not finished.
	InFlight int64
	// Presets are the deployments, one per preset, in configuration order.
	Presets []Preset
}

// Preset is one deployment's state.
type Preset struct {
	// Name is the name clients put in "model"; Algorithm routes it.
	Name, Algorithm string
	// Active counts the requests in flight in its router.
	Active int
	// TTFT and TPOT are the cumulative histograms of time to first token
	// and time per output token (seconds) since the server started.
	TTFT, TPOT Histogram
	// Models are its models in routing order (small first).
	Models []Model
}

// Model is one model's state.
type Model struct {
	// Name names the model.
	Name string
	// Simulated is true for a model that runs no weights.
	Simulated bool
	// Up is false while its sub-server (in another process) is down.
	Up bool
	// Restarts counts the times its sub-server came back as a new process.
	Restarts int
	// Stats are its counters (as of the last heartbeat when remote).
	Stats subserver.Stats
	// Policy is the launch policy in force: the threshold table B(n) and
	// the max-wait guard; nil when not known here (a sub-server started
	// elsewhere owns its policy).
	Policy *sched.Policy
	// PolicySince is when that policy took effect (the start, or the
	// automatic tuner's last plan).
	PolicySince time.Time
}

// Histogram is a cumulative histogram: Counts[i] observations at most
// Bounds[i]; Count in all (those above the last bound included).
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending.
	Bounds []float64
	// Counts are the cumulative counts per bound.
	Counts []uint64
	// Count is the number of observations.
	Count uint64
}

// Assets serves the console's page at "/" and its files under
// "/console/": embedded, with the policy headers, and nothing else (no
// listing).
func Assets() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has its folder
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := Page
		if r.URL.Path != "/" {
			name = path.Base(r.URL.Path)
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil || path.Dir(r.URL.Path) != "/console" && r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		setHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}

// setHeaders sets the security headers of every console response.
func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}
