// Package builtin assembles the registry of TokenRouter's built-in routing
// algorithms. Adding an algorithm is one line here plus its own package.
package builtin

import (
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/citer"
	"github.com/tokenrouter/tokenrouter/route/colm"
	"github.com/tokenrouter/tokenrouter/route/ensemble"
	"github.com/tokenrouter/tokenrouter/route/querylevel"
	"github.com/tokenrouter/tokenrouter/route/r2r"
	"github.com/tokenrouter/tokenrouter/route/r2rrandom"
	"github.com/tokenrouter/tokenrouter/route/rstitch"
	"github.com/tokenrouter/tokenrouter/route/single"
	"github.com/tokenrouter/tokenrouter/route/speculative"
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
		{r2r.Name, r2r.New},
		{citer.Name, citer.New},
		{colm.Name, colm.New},
		{rstitch.Name, rstitch.New},
		{ensemble.Name, ensemble.New},
		{speculative.Name, speculative.New},
		{querylevel.Name, querylevel.New},
	} {
		if err := r.Register(a.name, a.f); err != nil {
			panic(err) // duplicate built-in names are a programming error
		}
	}
	return r
}
