package builtin

import (
	"errors"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/route"
)

// TestFitting: the algorithms that serve one model, two, three, as their
// factories say by refusing other counts with route.ErrModels.
func TestFitting(t *testing.T) {
	r := Registry()
	for n, want := range map[int][]string{
		1: {"single"},
		2: r.Names(),
		3: {"ensemble", "single"},
	} {
		if got := r.Fitting(n); !slices.Equal(got, want) {
			t.Errorf("Fitting(%d) = %v, want %v", n, got, want)
		}
	}
	// Every algorithm that refuses a count says so with ErrModels, whatever
	// else it lacks.
	for _, name := range r.Names() {
		_, err := r.New(name, route.Spec{Models: []string{"a"}})
		if name != "single" && !errors.Is(err, route.ErrModels) {
			t.Errorf("%s over one model: %v, want route.ErrModels", name, err)
		}
	}
}
