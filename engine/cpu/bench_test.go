package cpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
			if e.seqLen(in[i].Seq) >= 256 {
				_ = e.Truncate(in[i].Seq, 0)
				toks[i] = 1
			}
		}
	}
	// tok/cpu-s, tokens per CPU-second of this process, is a measure that
	// other load on the machine does not skew (for one thread it equals
	// tok/s when idle).
	reportRates(b, b.N*B, cpu0)
}

// BenchmarkModel measures the model files listed (comma-separated) in
// $TOKENROUTER_BENCH_MODELS at 1 and GOMAXPROCS threads: decode at batch 1
// (one op is one token), a 128-token prompt (one op is one prompt) and 16
// sequences decoding together (one op is one step). It reports tok/s and
// tok/cpu-s; cpubench.Run gives the same figures with the bandwidth bound.
// Prefix caching is off, as in cpubench: the prompt op extends the same
// tokens each time, and with it on every op after the first would take the
// cached blocks instead of computing them (4000 tok/s for the 0.5B shape).
func BenchmarkModel(b *testing.B) {
	files := os.Getenv("TOKENROUTER_BENCH_MODELS")
	if files == "" {
		b.Skip("set TOKENROUTER_BENCH_MODELS to model files to measure")
	}
	for _, path := range strings.Split(files, ",") {
		for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
			e, err := Open(path, Options{Threads: threads, ContextLength: 1 << 12, NoPrefixCache: true})
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("%s/threads=%d", filepath.Base(path), threads)
			b.Run(name+"/decode", func(b *testing.B) { benchSteps(b, e, 1, 1) })
			b.Run(name+"/prompt=128", func(b *testing.B) { benchPrompt(b, e, 128) })
			b.Run(name+"/seqs=16", func(b *testing.B) { benchSteps(b, e, 16, 128) })
			e.Close()
		}
	}
}

// benchSteps decodes B sequences together, each first given a prompt of
// prompt tokens (one at a time), restarting a sequence at 1024 tokens.
func benchSteps(b *testing.B, e *Engine, B, prompt int) {
	ctx := context.Background()
	in := make([]engine.Input, B)
	out := make([]engine.Output, B)
	toks := make([]int32, B)
	p := make([]int32, prompt)
	for i := range p {
		p[i] = int32(3 + i*7919%(e.Info().VocabSize-3))
	}
	for i := range in {
		in[i] = engine.Input{Seq: engine.SeqID(1000 + i), Tokens: p}
		if err := e.Step(ctx, in[i:i+1], out[i:i+1]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		for i := range in {
			toks[i] = out[i].Token
			in[i].Tokens = toks[i : i+1]
			if e.seqLen(in[i].Seq) >= 1024 {
				_ = e.Truncate(in[i].Seq, prompt)
			}
		}
		if err := e.Step(ctx, in, out); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRates(b, b.N*B, cpu0)
	for i := range in {
		e.Release(in[i].Seq)
	}
}

// benchPrompt extends a fresh sequence with n tokens per op.
func benchPrompt(b *testing.B, e *Engine, n int) {
	ctx := context.Background()
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(3 + i*7919%(e.Info().VocabSize-3))
	}
	out := make([]engine.Output, 1)
	in := []engine.Input{{Seq: 1, Tokens: p}}
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		if err := e.Step(ctx, in, out); err != nil {
			b.Fatal(err)
		}
		e.Release(1)
	}
	b.StopTimer()
	reportRates(b, b.N*n, cpu0)
}

func reportRates(b *testing.B, tokens int, cpu0 time.Duration) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(float64(tokens)/d.Seconds(), "tok/cpu-s")
	}
}
