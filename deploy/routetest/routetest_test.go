package routetest_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus/nats/natstest"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

// cases covers every built-in algorithm; the test fails when a registered
// algorithm has no case.
func cases(t *testing.T, hidden int) map[string]routetest.Case {
	w, err := routetest.WriteWeights(t.TempDir(), hidden, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	two, both := []int{2}, []int{2, 3}
	cs := map[string]routetest.Case{
		"single":      {Params: map[string]string{"model": "1"}, Models: both},
		"r2r-random":  {Params: map[string]string{"p": "0.4"}, Models: two},
		"r2r":         {Params: map[string]string{"weights": w["r2r"]}, Models: two},
		"citer":       {Params: map[string]string{"weights": w["citer"]}, Models: two},
		"co-llm":      {Params: map[string]string{"weights": w["co-llm"]}, Models: two},
		"r-stitch":    {Params: map[string]string{"tau": "0.3"}, Models: two},
		"ensemble":    {Models: both},
		"speculative": {Params: map[string]string{"k": "3"}, Models: two},
		"query-level": {Params: map[string]string{"strong": "0.5"}, Models: two},
	}
	for _, name := range builtin.Registry().Names() {
		c, ok := cs[name]
		if !ok {
			t.Fatalf("algorithm %s has no conformance case", name)
		}
		c.Algorithm = name
		cs[name] = c
	}
	return cs
}

func runAll(t *testing.T, hidden int, mk routetest.Engines, o routetest.Options) {
	reg := builtin.Registry()
	for name, c := range cases(t, hidden) {
		t.Run(name, func(t *testing.T) { routetest.Run(t, reg, c, mk, o) })
	}
}

// agree makes model 0 track model 1 on 60% of positions.
func agree(i int) float64 {
	if i == 0 {
		return 0.6
	}
	return 0
}

func TestSim(t *testing.T) { runSim(t, nil) }

// TestSimNATS runs the same suite with the sub-servers on a NATS bus (an
// embedded server on loopback per deployment): every hand-off's message
// and algorithm state travel encoded.
func TestSimNATS(t *testing.T) { runSim(t, natsBus) }

func runSim(t *testing.T, mkBus func(*testing.T) bus.Bus) {
	mk := func(_ *testing.T, n int) []engine.Engine {
		var es []engine.Engine
		for i := range n {
			es = append(es, sim.New(sim.Config{Seed: uint64(10 + i), VocabSize: 512, Agree: agree(i), AgreeSeed: 11}))
		}
		return es
	}
	runAll(t, 64, mk, routetest.Options{
		Prompts: [][]int32{{1, 5, 9}, {1, 7}, {1, 300, 301, 302}, {1}}, MaxTokens: 24, Timeout: 20 * time.Second, Bus: mkBus,
	})
}

// natsBus returns a bus on an embedded NATS server for one test.
func natsBus(t *testing.T) bus.Bus { return natstest.Bus(t, "conformance") }

func TestCPU(t *testing.T) {
	files := []string{"llama2xs-model.bin", "stories260K.gguf", "stories260K.bin"}
	modelsDir := testmodels.Dir(t)
	mk := func(t *testing.T, n int) []engine.Engine {
		var es []engine.Engine
		for _, f := range files[:n] {
			e, err := cpu.Open(filepath.Join(modelsDir, f), cpu.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		return es
	}
	if testing.Short() {
		t.Skip("cpu conformance skipped in -short mode")
	}
	runAll(t, 64, mk, routetest.Options{
		Prompts: [][]int32{{1, 403, 407}, {1, 261, 378}, {1}}, MaxTokens: 8, Timeout: 30 * time.Second,
	})
}

// speculable lists the cases of the algorithms that opted into speculative
// continuation; the test fails when the opt-ins change without this list.
func speculable(t *testing.T, hidden int) []routetest.Case {
	names := []string{"citer", "co-llm", "r2r", "r2r-random"}
	var out []routetest.Case
	reg := builtin.Registry()
	for _, name := range reg.Names() {
		c := cases(t, hidden)[name]
		a, err := reg.New(name, route.Spec{Model: 0, Models: []string{"a", "b"}, Params: c.Params})
		if err != nil {
			t.Fatal(err)
		}
		sp, ok := a.(route.Speculable)
		if opted := ok && sp.Speculable(0, 1); opted != slices.Contains(names, name) {
			t.Fatalf("%s: opted into speculation: %v; the list says %v", name, opted, !opted)
		}
		if slices.Contains(names, name) {
			out = append(out, c)
		}
	}
	return out
}

func specSim(t *testing.T, mkBus func(*testing.T) bus.Bus, seeds int) {
	mk := func(_ *testing.T, n int) []engine.Engine {
		var es []engine.Engine
		for i := range n {
			// Short steps, the large model's longer, so that cancellations
			// land while verify jobs are queued or stepping.
			prof := sim.Constant(time.Duration(100+400*i) * time.Microsecond)
			es = append(es, sim.New(sim.Config{Seed: uint64(10 + i), VocabSize: 512, Agree: 0.5 * float64(1-i), AgreeSeed: 11, Profile: prof}))
		}
		return es
	}
	for _, c := range speculable(t, 64) {
		t.Run(c.Algorithm, func(t *testing.T) {
			routetest.Speculation(t, builtin.Registry(), c, mk, routetest.SpecOptions{Seeds: seeds, Sampled: true, Options: routetest.Options{
				Prompts: [][]int32{{1, 5, 9}, {1, 7}, {1, 300, 301, 302}, {1}, {1, 44}, {1, 45, 46}}, MaxTokens: 40, Timeout: 20 * time.Second, Bus: mkBus,
			}})
		})
	}
}

// TestSpeculationSim: speculative continuation leaves every opted-in
// algorithm's output unchanged on the simulated pair (the small model
// agreeing with the large one at half the positions).
func TestSpeculationSim(t *testing.T) { specSim(t, nil, 16) }

// TestSpeculationSimNATS: the same with verify jobs and verdicts encoded
// on a NATS bus.
func TestSpeculationSimNATS(t *testing.T) { specSim(t, natsBus, 3) }

// TestSpeculationSimDelayed: the same over a bus that delays every event
// between the sub-servers (a split deployment), so verdicts come back
// long after the drafts went on.
func TestSpeculationSimDelayed(t *testing.T) {
	specSim(t, func(t *testing.T) bus.Bus {
		b := bus.NewDelayed(bus.NewMemory(), 2*time.Millisecond)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}, 3)
}

// TestSpeculationCPU: the same on the real tiny pair (llama2xs small,
// stories260K large), greedy and seeded-sampled, end of sequence honoured
// by some requests.
func TestSpeculationCPU(t *testing.T) {
	modelsDir := testmodels.Dir(t)
	mk := func(t *testing.T, n int) []engine.Engine {
		var es []engine.Engine
		for _, f := range []string{"llama2xs-model.bin", "stories260K.gguf"}[:n] {
			e, err := cpu.Open(filepath.Join(modelsDir, f), cpu.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		return es
	}
	seeds := 10
	if testing.Short() {
		seeds = 3
	}
	for _, c := range speculable(t, 64) {
		t.Run(c.Algorithm, func(t *testing.T) {
			routetest.Speculation(t, builtin.Registry(), c, mk, routetest.SpecOptions{Seeds: seeds, Sampled: true, Options: routetest.Options{
				Prompts: [][]int32{{1, 403, 407, 261, 378}, {1, 426}, {1, 416, 439}, {1, 281}, {1}}, MaxTokens: 32, Timeout: 30 * time.Second,
			}})
		})
	}
}
