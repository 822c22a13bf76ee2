// Package cpubench measures the CPU engine on model files: decode speed at
// batch 1, prompt speed, aggregate decode speed of several sequences, peak
// resident memory, and, in the same run, the machine's read bandwidth and
// the decode bound it implies (bytes of weights read per token divided by
// bandwidth). Run gives a Report; WriteText and encoding/json print it.
//
// A shared machine's bandwidth moves from minute to minute, so the decode
// runs are paired: each is preceded by a bandwidth measurement at its
// thread count, the thread counts take turns round after round, and the
// fractions of the bound and the speed-ups over the first thread count are
// medians of per-round ratios.
package cpubench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
)

// Options select what Run measures. Zero fields take the defaults.
type Options struct {
	// Files are the model files (GGUF or llama2.c checkpoints).
	Files []string
	// Threads are the thread counts to measure; default 1 and GOMAXPROCS.
	Threads []int
	// Prompt is the prompt length of the prompt measurement; default 128.
	Prompt int
	// Decode is the number of decode steps timed; default 32.
	Decode int
	// Seqs are the sequence counts of the aggregate measurements; default 4
	// and 16. Each sequence first holds a prompt of Prompt tokens.
	Seqs []int
	// Repeat is the number of runs of each measurement (the median is
	// reported), and of decode rounds; default 3.
	Repeat int
	// Kernels forces one kernel level for every class of operation (see
	// cpu.Options.Kernels); empty: each file's kernel plan is measured
	// afresh (once per thread count) and reported.
	Kernels string
	// BandwidthBytes is the size of the buffer the read-bandwidth kernel
	// streams over; default 1 GiB (far beyond any last-level cache).
	BandwidthBytes int
}

func (o *Options) defaults() {
	if len(o.Threads) == 0 {
		o.Threads = []int{1, runtime.GOMAXPROCS(0)}
		if o.Threads[1] == 1 {
			o.Threads = o.Threads[:1]
		}
	}
	if o.Prompt <= 0 {
		o.Prompt = 128
	}
	if o.Decode <= 0 {
		o.Decode = 32
	}
	if o.Seqs == nil {
		o.Seqs = []int{4, 16}
	}
	if o.Repeat <= 0 {
		o.Repeat = 3
	}
	if o.BandwidthBytes <= 0 {
		o.BandwidthBytes = 1 << 30
	}
}

// Report is the outcome of Run.
type Report struct {
	// Bandwidth is the median read bandwidth in GB/s per thread count over
	// every measurement of the run.
	Bandwidth map[int]float64 `json:"bandwidth_gbs"`
	// Results has one entry per file and thread count.
	Results []Result `json:"results"`
}

// Result holds the measurements of one file at one thread count.
type Result struct {
	File      string `json:"file"`
	FileBytes int64  `json:"file_bytes"`
	Threads   int    `json:"threads"`
	// Kernels summarises the kernel level of each class (KernelPlan has
	// the detail).
	Kernels string `json:"kernels"`
	// KernelPlan is the engine's kernel plan with the timings it was
	// chosen from.
	KernelPlan cpu.KernelReport `json:"kernel_plan"`
	// DecodeTokS is tokens per second of one sequence decoding (the median
	// of the decode rounds).
	DecodeTokS float64 `json:"decode_tok_s"`
	// DecodeBandwidth is the median read bandwidth in GB/s measured with
	// Threads threads just before each decode run.
	DecodeBandwidth float64 `json:"decode_bandwidth_gbs"`
	// OfBound is the median over the decode rounds of the decode speed
	// divided by the bound from the bandwidth measured just before it.
	OfBound float64 `json:"of_bound"`
	// Speedup is the median over the decode rounds of the decode speed
	// divided by that of the first thread count in the same round.
	Speedup float64 `json:"speedup"`
	// PromptTokS is tokens per second of one Prompt-token extend.
	PromptTokS float64 `json:"prompt_tok_s"`
	// Aggregate has the summed decode tokens per second of Seqs sequences.
	Aggregate []Aggregate `json:"aggregate"`
	// PeakRSS is the process's peak resident memory while the file was
	// loaded and measured, in bytes. The engine runs without its prefix
	// cache: the benchmark's prompts are random and share no prefix, and
	// blocks the cache kept from the repeats would mix the cache's
	// budget into the engine's working memory (a server with the cache on
	// keeps up to its KV budget of released prompts resident).
	PeakRSS int64 `json:"peak_rss_bytes"`
	// HugePages is the fraction of the file mapped in huge pages
	// (cpu.Engine.Mapping; -1 where not measured).
	HugePages float64 `json:"huge_pages"`
	// BandwidthHugePages is the fraction of the buffer the read bandwidth
	// was measured on that was mapped in huge pages (-1 where not
	// measured).
	BandwidthHugePages float64 `json:"bandwidth_huge_pages"`
	// WeightBytes is the bytes of weights one decoded token reads.
	WeightBytes int64 `json:"weight_bytes_per_token"`
	// BoundTokS is DecodeBandwidth / WeightBytes: the decode speed at
	// which the weight reads alone use the measured bandwidth.
	BoundTokS float64 `json:"bound_tok_s"`

	bw []float64 // the bandwidth measured before each decode run
}

// Aggregate is the aggregate decode speed of several sequences.
type Aggregate struct {
	Seqs int     `json:"seqs"`
	TokS float64 `json:"tok_s"`
}

// Run measures every file at every thread count.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{Bandwidth: map[int]float64{}}
	for _, f := range o.Files {
		var rs []*Result
		for _, th := range o.Threads {
			r, err := runFile(ctx, o, f, th)
			if err != nil {
				return nil, err
			}
			rs = append(rs, r)
		}
		if err := decodeRounds(ctx, o, f, rs); err != nil {
			return nil, err
		}
		for _, r := range rs {
			rep.Results = append(rep.Results, *r)
		}
	}
	for _, th := range o.Threads {
		var bw []float64
		for _, r := range rep.Results {
			if r.Threads == th {
				bw = append(bw, r.bw...)
			}
		}
		rep.Bandwidth[th] = medianOf(bw)
	}
	return rep, nil
}

// decodeRounds measures decode at batch 1 of file f at every thread count
// of rs (one engine each), Repeat rounds in which the thread counts take
// turns, each run preceded by a bandwidth measurement at its thread count.
func decodeRounds(ctx context.Context, o Options, f string, rs []*Result) error {
	buf, huge, free, err := newBuffer(o.BandwidthBytes)
	if err != nil {
		return err
	}
	defer free()
	for _, r := range rs {
		r.BandwidthHugePages = huge
	}
	es := make([]*cpu.Engine, len(rs))
	defer func() {
		for _, e := range es {
			if e != nil {
				e.Close()
			}
		}
	}()
	for i, r := range rs {
		e, err := cpu.Open(f, cpu.Options{Threads: r.Threads, Kernels: o.Kernels, ContextLength: o.Decode + 8, NoPrefixCache: true, Logger: quiet()})
		if err != nil {
			return fmt.Errorf("cpubench: %s: %w", f, err)
		}
		es[i] = e
	}
	rng := rand.New(rand.NewPCG(2, 3))
	tok := make([][]float64, len(rs))
	frac := make([][]float64, len(rs))
	speed := make([][]float64, len(rs))
	for round := range o.Repeat {
		for i, r := range rs {
			bw := ReadBandwidth(buf, r.Threads, 1)
			seq := engine.SeqID(round)
			p := []int32{int32(3 + rng.IntN(es[i].Info().VocabSize-3))}
			t, err := decode(ctx, es[i], []engine.SeqID{seq}, [][]int32{p}, o.Decode)
			es[i].Release(seq)
			if err != nil {
				return err
			}
			r.bw = append(r.bw, bw)
			tok[i] = append(tok[i], t)
			if r.WeightBytes > 0 && bw > 0 {
				frac[i] = append(frac[i], t/(bw*1e9/float64(r.WeightBytes)))
			}
			speed[i] = append(speed[i], t/tok[0][round])
		}
	}
	for i, r := range rs {
		r.DecodeTokS, r.DecodeBandwidth = medianOf(tok[i]), medianOf(r.bw)
		r.OfBound, r.Speedup = medianOf(frac[i]), medianOf(speed[i])
		if r.WeightBytes > 0 {
			r.BoundTokS = r.DecodeBandwidth * 1e9 / float64(r.WeightBytes)
		}
	}
	return nil
}

// medianOf returns the median of v (the upper one of an even count), or 0.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func runFile(ctx context.Context, o Options, path string, threads int) (*Result, error) {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cpubench: %w", err)
	}
	e, err := cpu.Open(path, cpu.Options{Threads: threads, Kernels: o.Kernels, ContextLength: o.Prompt + o.Decode + 8,
		NoPrefixCache: true, RemeasureKernels: o.Kernels == "", Logger: quiet()})
	if err != nil {
		return nil, fmt.Errorf("cpubench: %s: %w", path, err)
	}
	defer e.Close()
	r := newResult(path, st.Size(), threads, e)
	rng := rand.New(rand.NewPCG(1, uint64(threads)))
	vocab := e.Info().VocabSize
	prompt := func(n int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(3 + rng.IntN(vocab-3))
		}
		return p
	}
	seq := engine.SeqID(0)
	r.PromptTokS, err = median(o.Repeat, func() (float64, error) {
		seq++
		defer e.Release(seq)
		p := prompt(o.Prompt)
		out := make([]engine.Output, 1)
		t0 := time.Now()
		if err := e.Step(ctx, []engine.Input{{Seq: seq, Tokens: p}}, out); err != nil {
			return 0, fmt.Errorf("cpubench: %w", err)
		}
		return float64(len(p)) / time.Since(t0).Seconds(), nil
	})
	if err != nil {
		return nil, err
	}
	for _, B := range o.Seqs {
		tps, err := median(o.Repeat, func() (float64, error) {
			ids := make([]engine.SeqID, B)
			ps := make([][]int32, B)
			for i := range ids {
				seq++
				ids[i] = seq
				ps[i] = prompt(o.Prompt)
			}
			defer func() {
				for _, id := range ids {
					e.Release(id)
				}
			}()
			return decode(ctx, e, ids, ps, o.Decode)
		})
		if err != nil {
			return nil, err
		}
		r.Aggregate = append(r.Aggregate, Aggregate{Seqs: B, TokS: tps})
	}
	r.PeakRSS = peakRSS()
	return r, nil
}

// newResult starts the result of file path (size bytes) at threads
// threads with what engine e reports of itself.
func newResult(path string, size int64, threads int, e *cpu.Engine) *Result {
	r := &Result{File: path, FileBytes: size, Threads: threads, Kernels: planSummary(e.KernelChoice()),
		KernelPlan: e.KernelReport(), WeightBytes: e.WeightBytesPerToken(), HugePages: -1}
	if m := e.Mapping(); m.Measured {
		r.HugePages = m.HugeFraction()
	}
	return r
}

// decode extends each sequence with its prompt (untimed, one sequence per
// step as a server admits them), then times steps decode steps of all of
// them and returns tokens per second.
func decode(ctx context.Context, e *cpu.Engine, ids []engine.SeqID, prompts [][]int32, steps int) (float64, error) {
	in := make([]engine.Input, len(ids))
	out := make([]engine.Output, len(ids))
	for i, id := range ids {
		in[i] = engine.Input{Seq: id, Tokens: prompts[i]}
		if err := e.Step(ctx, in[i:i+1], out[i:i+1]); err != nil {
			return 0, fmt.Errorf("cpubench: %w", err)
		}
	}
	toks := make([]int32, len(ids))
	t0 := time.Now()
	for range steps {
		for i := range in {
			toks[i] = out[i].Token
			in[i].Tokens = toks[i : i+1]
		}
		if err := e.Step(ctx, in, out); err != nil {
			return 0, fmt.Errorf("cpubench: %w", err)
		}
	}
	return float64(steps*len(ids)) / time.Since(t0).Seconds(), nil
}

func median(n int, f func() (float64, error)) (float64, error) {
	v := make([]float64, n)
	for i := range v {
		x, err := f()
		if err != nil {
			return 0, err
		}
		v[i] = x
	}
	slices.Sort(v)
	return v[n/2], nil
}

// resetPeakRSS resets the kernel's peak-RSS counter of this process
// (Linux; elsewhere it does nothing and peaks are process-wide).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS reads the process's peak resident memory (VmHWM) in bytes, or 0.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// percentOrDash formats a fraction as a percentage, or "-" where it is
// negative (not measured).
func percentOrDash(f float64) string {
	if f < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// WriteText prints the report as a table.
func WriteText(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	ths := make([]int, 0, len(r.Bandwidth))
	for th := range r.Bandwidth {
		ths = append(ths, th)
	}
	slices.Sort(ths)
	for _, th := range ths {
		fmt.Fprintf(w, "read bandwidth, %d thread(s), median: %.1f GB/s\n", th, r.Bandwidth[th])
	}
	fmt.Fprintln(tw, "file\tthreads\tkernels\tdecode tok/s\tread GB/s\tbound tok/s\tof bound\tspeed-up\tprompt tok/s\taggregate tok/s\tpeak RSS MiB\tfile MiB\thuge pages: weights, bw buffer\t")
	for _, x := range r.Results {
		var agg []string
		for _, a := range x.Aggregate {
			agg = append(agg, fmt.Sprintf("%d seq %.1f", a.Seqs, a.TokS))
		}
		huge := percentOrDash(x.HugePages) + ", " + percentOrDash(x.BandwidthHugePages)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.1f\t%.1f\t%.0f%%\t%.2fx\t%.1f\t%s\t%.0f\t%.0f\t%s\t\n", x.File, x.Threads, x.Kernels,
			x.DecodeTokS, x.DecodeBandwidth, x.BoundTokS, 100*x.OfBound, x.Speedup, x.PromptTokS, strings.Join(agg, ", "),
			float64(x.PeakRSS)/(1<<20), float64(x.FileBytes)/(1<<20), huge)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "(each decode run follows a bandwidth measurement at its thread count; of bound and speed-up over the first thread count are medians of per-round ratios)"); err != nil {
		return err
	}
	return writeKernelPlans(w, r)
}

// writeKernelPlans prints each result's kernel plan: per class and weight
// type the level chosen and every level's time (the shortest of its runs;
// for a level too slow to time further, its pilot run's estimate).
func writeKernelPlans(w io.Writer, r *Report) error {
	fmt.Fprintln(w, "\nkernel plans (time per timed run of each level; decode: 1 column, batch: 4 and 16 columns, prompt: 64 columns, attention: one row over 512 positions)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\tthreads\tclass\ttype\tchosen\tgeneric ms\tavx2 ms\tavx512 ms\tsource\tfirst start s\tthis start s\t")
	for _, x := range r.Results {
		p := x.KernelPlan
		for _, c := range p.Choices {
			times := make([]string, 3)
			for i, l := range []string{"generic", "avx2", "avx512"} {
				times[i] = "-"
				if v, ok := c.Times[l]; ok {
					times[i] = fmt.Sprintf("%.3f", 1e3*v)
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t\n", x.File, x.Threads, c.Class, c.Type, c.Level,
				strings.Join(times, "\t"), p.Source, p.Cost.Seconds(), p.Took.Seconds())
		}
	}
	return tw.Flush()
}

// planSummary writes a kernel choice (cpu.Engine.KernelChoice) as
// "class level" pairs in class order.
func planSummary(choice map[string]string) string {
	keys := slices.Sorted(maps.Keys(choice))
	order := func(k string) int {
		for i, c := range []string{"decode", "batch", "prompt", "attention"} {
			if strings.HasPrefix(k, c) {
				return i
			}
		}
		return 4
	}
	slices.SortStableFunc(keys, func(a, b string) int { return order(a) - order(b) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + choice[k]
	}
	return strings.Join(parts, ", ")
}

// quiet is the engines' logger: the report carries their kernel plans.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
