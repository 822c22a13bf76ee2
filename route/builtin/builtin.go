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
		name   string
		f      route.Factory
		params []string // the parameters its New reads
	}{
		{r2rrandom.Name, r2rrandom.New, []string{"p", "p-after", "switch-at"}},
		{single.Name, single.New, []string{"model"}},
		{r2r.Name, r2r.New, []string{"threshold", "weights"}},
		{citer.Name, citer.New, []string{"tau", "weights"}},
		{colm.Name, colm.New, []string{"eta", "weights"}},
		{rstitch.Name, rstitch.New, []string{"tau"}},
		{ensemble.Name, ensemble.New, []string{"weights"}},
		{speculative.Name, speculative.New, []string{"k"}},
		{querylevel.Name, querylevel.New, []string{"score", "strong", "threshold"}},
	} {
		if err := r.Register(a.name, a.f, a.params...); err != nil {
			panic(err) // duplicate built-in names are a programming error
		}
	}
	return r
}
