package citer_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/citer"
)

// routed counts the requests of a 32-request step the router sends to the
// large model, with weights whose output logit is shifted by bias.
func routed(t *testing.T, bias float32, hidden bool) (n int, batchEqualsAlone bool) {
	t.Helper()
	w, err := routetest.WriteWeights(t.TempDir(), 64, 2, bias)
	if err != nil {
		t.Fatal(err)
	}
	a, err := citer.New(route.Spec{Model: 0, Models: []string{"s", "l"}, Params: map[string]string{"weights": w["citer"]}})
	if err != nil {
		t.Fatal(err)
	}
	return routetest.CountRouted(t, a, hidden)
}

func TestRouting(t *testing.T) {
	if n, same := routed(t, 0, true); n == 0 || n == 32 || !same {
		t.Fatalf("random weights: %d of 32 routed (batched equals alone: %v)", n, same)
	}
	if n, _ := routed(t, 50, true); n != 32 {
		t.Fatalf("bias +50: %d of 32 routed", n)
	}
	if n, _ := routed(t, -50, true); n != 0 {
		t.Fatalf("bias -50: %d of 32 routed", n)
	}
	if n, _ := routed(t, -50, false); n != 1 {
		t.Fatalf("a step without hidden state must defer: %d routed", n)
	}
	// The large model always hands back and keeps its token.
	a, _ := citer.New(route.Spec{Model: 1, Models: []string{"s", "l"}})
	d := []route.Decision{{Next: 1, Cut: -1, Token: 5, Commit: true}}
	a.Route(&route.Step{Model: 1, Requests: []*route.Request{{}}, Outputs: []engine.Output{{Token: 5}}}, d)
	if d[0].Next != 0 || d[0].Token != 5 {
		t.Fatalf("large model: %+v", d[0])
	}
}
