// Package stdserving is the std-serving baseline: one independent
// continuous-batching server per model and a per-token dispatcher, with no
// state kept for a request that left a server. It runs on the routed
// runtime unchanged, as a wrapper around the routing algorithm: every
// hand-off tells the receiving model that the sender holds none of the
// sequence, so when the request comes back it carries its whole sequence
// and the sender extends all of it again, as an independent server would.
// The sender's KV stays allocated until the request returns (it is then
// cut to nothing and rebuilt) or ends: memory an independent server would
// free, time it spends the same.
package stdserving

import "github.com/tokenrouter/tokenrouter/route"

// Forget wraps an algorithm so that no model reuses the KV it held for a
// request that left it.
type Forget struct {
	route.Wrapper
}

// Send delegates, then marks the sender as holding nothing.
func (f Forget) Send(r *route.Request, m *route.Message) {
	f.Wrapper.Send(r, m)
	if m.From >= 0 && m.From < len(m.Seen) {
		m.Seen[m.From] = 0
	}
}

// Registry returns a registry in which name builds base's algorithm
// wrapped in Forget.
func Registry(base *route.Registry, name string) *route.Registry {
	return route.Wrap(base, name, func(a route.Algorithm) route.Algorithm { return Forget{route.Wrapper{Inner: a}} })
}
