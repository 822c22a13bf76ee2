package cpu

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
)

// BenchmarkDecode measures greedy decode throughput on stories260K at
// batch 1, 4 and 16. Each sequence cycles through positions 0..255 (it is
// truncated to empty and restarted from BOS), like llama2.c's default
// 256-step run. One op is one engine step; tok/s counts every sequence.
func BenchmarkDecode(b *testing.B) {
	for _, threads := range []int{1, 0} {
		for _, B := range []int{1, 4, 16} {
			name := fmt.Sprintf("batch=%d/threads=%d", B, threads)
			if threads == 0 {
				name = fmt.Sprintf("batch=%d/threads=max", B)
			}
			b.Run(name, func(b *testing.B) {
				benchDecode(b, B, threads)
			})
		}
	}
}

func benchDecode(b *testing.B, B, threads int) {
	e := openModel(b, "stories260K.bin", Options{Threads: threads})
	ctx := context.Background()
	in := make([]engine.Input, B)
	out := make([]engine.Output, B)
	toks := make([]int32, B)
	for i := range in {
		toks[i] = 1
		in[i] = engine.Input{Seq: engine.SeqID(i), Tokens: toks[i : i+1]}
	}
	// Stagger the sequences so their positions differ.
	for i := range in {
		for range i * 256 / B {
			if err := e.Step(ctx, in[i:i+1], out[i:i+1]); err != nil {
				b.Fatal(err)
			}
			toks[i] = out[i].Token
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		if err := e.Step(ctx, in, out); err != nil {
			b.Fatal(err)
		}
		for i := range in {
			toks[i] = out[i].Token
			if e.Len(in[i].Seq) >= 256 {
				_ = e.Truncate(in[i].Seq, 0)
				toks[i] = 1
			}
		}
	}
	b.ReportMetric(float64(b.N*B)/b.Elapsed().Seconds(), "tok/s")
	// Tokens per CPU-second of this process: a measure that other load on
	// the machine does not skew (for one thread it equals tok/s when idle).
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(float64(b.N*B)/d.Seconds(), "tok/cpu-s")
	}
}

// cpuTime returns the user+system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
