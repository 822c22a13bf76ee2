package server

import (
	"net/http"
	"slices"
	"strconv"
)

// corsMaxAge is how long a browser may cache a preflight answer.
const corsMaxAge = 10 * 60

// cors lets browsers on the configured origins call the API: it answers
// their preflight requests (OPTIONS with Access-Control-Request-Method)
// and marks the answers to their requests. A request from another origin
// gets no CORS headers (the browser then hides the answer); without
// configured origins h is returned as is.
func (s *Server) cors(h http.Handler) http.Handler {
	origins := s.cfg.CORSOrigins
	if len(origins) == 0 {
		return h
	}
	anyOrigin := slices.Contains(origins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !(anyOrigin || slices.Contains(origins, origin)) {
			h.ServeHTTP(w, r)
			return
		}
		hd := w.Header()
		hd.Add("Vary", "Origin")
		hd.Set("Access-Control-Allow-Origin", origin)
		if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
			hd.Set("Access-Control-Expose-Headers", "Retry-After")
			h.ServeHTTP(w, r)
			return
		}
		hd.Add("Vary", "Access-Control-Request-Method")
		hd.Add("Vary", "Access-Control-Request-Headers")
		hd.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Api-Key")
		hd.Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
		w.WriteHeader(http.StatusNoContent)
	})
}
