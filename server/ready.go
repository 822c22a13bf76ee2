package server

import "net/http"

// ready reports whether every model of every preset serves requests (a
// sub-server in another process can be down until it is restarted or
// rejoins).
func (s *Server) ready() bool {
	for _, d := range s.deps {
		for _, st := range d.stats() {
			if !st.Up {
				return false
			}
		}
	}
	return true
}

// liveness is /health's status: "ok", or "degraded" while a model is down.
func (s *Server) liveness() string {
	if s.ready() {
		return "ok"
	}
	return "degraded"
}

// handleReady answers readiness probes: 200 {"status":"ready"} when every
// model serves requests, 503 {"status":"not_ready"} while one is down or
// the server shuts down.
func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() || !s.ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}
