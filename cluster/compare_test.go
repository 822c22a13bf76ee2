package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/system"
)

var (
	compare = flag.Duration("compare", 0, "measure in-memory vs multi-process NATS throughput for this long per run (0 skips)")
	rounds  = flag.Int("rounds", 3, "interleaved rounds of -compare")
)

// TestThroughputNATSvsMemory measures the paper-r2r pair with r2r-random
// (p = 0.35) at N = 4 and 16 on the in-memory bus (one process) and with
// each sub-server in its own process over NATS, interleaving the runs so
// machine noise hits both alike:
//
//	go test ./cluster -run TestThroughputNATSvsMemory -compare 10s -rounds 3 -v
func TestThroughputNATSvsMemory(t *testing.T) {
	if *compare <= 0 {
		t.Skip("run with -compare DURATION")
	}
	preset, err := sim.LookupPreset("paper-r2r")
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"p": "0.35"}
	memory := func() (bench.System, error) {
		ms := make([]deploy.Model, len(preset.Models))
		for i, name := range preset.Models {
			ms[i] = deploy.Model{Name: name, Engine: sim.New(sim.Config{Name: name, Profile: preset.Profiles[i], Seed: uint64(i + 1)})}
		}
		return deploy.New(deploy.Config{Models: ms, Algorithm: "r2r-random", Params: params, Registry: builtin.Registry(),
			Launch: sched.Launch{MaxWait: 50 * time.Millisecond}})
	}
	procs := func() (bench.System, error) {
		ms := make([]config.Model, len(preset.Models))
		for i, name := range preset.Models {
			ms[i] = config.Model{Name: name, Engine: loader.KindSim, Profile: "paper-r2r", Seed: uint64(i + 1)}
		}
		return cluster.Start(context.Background(), cluster.LocalConfig{Binary: bin.path, Args: []string{"--log-level", "warn"},
			Spec: system.Spec{Models: ms, Registry: builtin.Registry(), Algorithm: "r2r-random", Params: params,
				Launch: sched.Launch{MaxWait: 50 * time.Millisecond}}})
	}
	systems := []struct {
		name string
		mk   func() (bench.System, error)
	}{{"memory", memory}, {"nats-processes", procs}}
	sum := map[string]float64{}
	for r := range *rounds {
		for _, n := range []int{4, 16} {
			order := []int{0, 1}
			if r%2 == 1 {
				order = []int{1, 0}
			}
			for _, k := range order {
				s := systems[k]
				sys, err := s.mk()
				if err != nil {
					t.Fatal(err)
				}
				res, err := bench.Run(context.Background(), sys, bench.Options{Concurrency: n, Warmup: 2 * time.Second, Duration: *compare, Seed: uint64(r + 1)})
				if cerr := sys.Close(); cerr != nil {
					t.Fatal(cerr)
				}
				if err != nil {
					t.Fatal(err)
				}
				sum[fmt.Sprint(s.name, n)] += res.TokensPerSecond
				t.Logf("round %d N=%-2d %-15s %7.1f tok/s  routed %.3f", r+1, n, s.name, res.TokensPerSecond, res.RoutedFraction)
			}
		}
	}
	for _, n := range []int{4, 16} {
		m, p := sum[fmt.Sprint("memory", n)]/float64(*rounds), sum[fmt.Sprint("nats-processes", n)]/float64(*rounds)
		t.Logf("N=%-2d mean memory %7.1f tok/s, nats-processes %7.1f tok/s: %+.2f%%", n, m, p, 100*(p-m)/m)
	}
}
