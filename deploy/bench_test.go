package deploy_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// benchLoop measures the runtime's own cost: a zero-latency simulated
// engine, batch requests in flight that never finish during the run, and
// streams drained by their clients. It reports time per step and heap
// allocations per committed token (all goroutines: loop, bus, front end,
// clients) over b.N steps in steady state.
func benchLoop(b *testing.B, algorithm string, models, batch int, spec subserver.Speculation) {
	var ms []deploy.Model
	for i := range models {
		cfg := sim.Config{Seed: uint64(i + 1), ContextLength: 1 << 24}
		if i == 0 && spec.Mode == subserver.SpeculateOn {
			cfg.Agree, cfg.AgreeSeed = 0.5, 2
		}
		ms = append(ms, deploy.Model{Name: string(rune('a' + i)), Engine: sim.New(cfg)})
	}
	var params map[string]string
	if algorithm == "r2r-random" {
		params = map[string]string{"p": "0.35"}
	}
	r, err := deploy.New(deploy.Config{Models: ms, Algorithm: algorithm, Params: params,
		Registry: builtin.Registry(), MaxBatch: batch, Speculate: spec})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := make([]int, batch)
	for i := range batch {
		s, err := r.Submit(ctx, []int32{1, int32(i + 3)}, route.Params{MaxTokens: 1 << 23, Seed: uint64(i)})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c stream.Chunk
			for s.Recv(ctx, &c) == nil {
				mu.Lock()
				counts[i] += len(c.Tokens)
				mu.Unlock()
			}
		}()
	}
	steps := func() (n uint64) {
		for _, s := range r.SubServers() {
			n += s.Stats().Steps
		}
		return n
	}
	tokens := func() (n uint64) {
		for _, s := range r.SubServers() {
			n += s.Stats().Tokens
		}
		return n
	}
	// Warm up until buffers have reached their steady sizes.
	testkit.Eventually(b, time.Minute, func() bool { return steps() >= 2000 }, "fewer than 2000 warm-up steps")
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	s0, t0 := steps(), tokens()
	b.ResetTimer()
	for steps()-s0 < uint64(b.N) {
		time.Sleep(200 * time.Microsecond) // the measured window: a fine, allocation-free poll
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	ds, dt := steps()-s0, tokens()-t0
	el := b.Elapsed()
	cancel()
	wg.Wait()
	b.ReportMetric(float64(el.Nanoseconds())/float64(ds), "ns/step")
	b.ReportMetric(float64(dt)/float64(ds), "tokens/step")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(dt), "allocs/token")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(dt), "B/token")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLoopBatch64 is one model, 64 requests, every token committed.
func BenchmarkLoopBatch64(b *testing.B) { benchLoop(b, "single", 1, 64, subserver.Speculation{}) }

// BenchmarkLoopRoutedBatch64 adds hand-offs: r2r-random with p = 0.35
// between two zero-latency models, without speculation.
func BenchmarkLoopRoutedBatch64(b *testing.B) {
	benchLoop(b, "r2r-random", 2, 64, subserver.Speculation{Mode: subserver.SpeculateOff})
}

// BenchmarkLoopSpeculatedBatch64 speculates past the routed positions
// instead (depth 4; the small model agrees with the large one at half the
// positions, so verify jobs, agreements and rollbacks all recur).
func BenchmarkLoopSpeculatedBatch64(b *testing.B) {
	benchLoop(b, "r2r-random", 2, 64, subserver.Speculation{Mode: subserver.SpeculateOn, Depth: 4})
}
