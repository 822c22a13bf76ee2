// Package builtin assembles the registry of TokenRouter's built-in routing
// algorithms. Adding an algorithm is one line here plus its own package.
package builtin

import (
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/r2rrandom"
	"github.com/tokenrouter/tokenrouter/route/single"
)

// Registry returns a registry holding every built-in algorithm.
func Registry() *route.Registry {
	r := route.NewRegistry()
	for _, a := range []struct {
		name string
		f    route.Factory
	}{
		{r2rrandom.Name, r2rrandom.New},
		{single.Name, single.New},
	} {
		if err := r.Register(a.name, a.f); err != nil {
			panic(err) // duplicate built-in names are a programming error
		}
	}
	return r
}
