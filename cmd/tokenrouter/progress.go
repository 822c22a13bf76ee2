package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/internal/progress"
	"github.com/tokenrouter/tokenrouter/loader"
)

// newBar returns a progress bar on the command's stderr, drawn only when
// that is a terminal (package progress).
func newBar(cmd *cobra.Command, label string, total int64, unit progress.Unit) *progress.Bar {
	return progress.New(cmd.ErrOrStderr(), label, total, progress.Options{Unit: unit})
}

// loadDelay is how long a model's weights may take to read in before a
// bar shows it: models read from the page cache show none.
const loadDelay = 300 * time.Millisecond

// withLoadBars returns ctx telling the engines opened with it to draw a
// bar per model on w as their weights are read in (loader.LoadProgress).
func withLoadBars(ctx context.Context, w io.Writer) context.Context {
	return loader.WithLoadProgress(ctx, newLoadBars(w, progress.Options{Delay: loadDelay}).report)
}

// loadBars draws the bars of models being read in.
type loadBars struct {
	mu   sync.Mutex
	w    io.Writer
	o    progress.Options         // of every bar, in bytes
	bars map[string]*progress.Bar // by model, while it is read in
	read map[string]int64         // by model, the total of its last finished bar
}

// newLoadBars returns the load bars on w, with options o.
func newLoadBars(w io.Writer, o progress.Options) *loadBars {
	o.Unit = progress.Bytes
	return &loadBars{w: w, o: o, bars: map[string]*progress.Bar{}, read: map[string]int64{}}
}

// report is the loader.LoadProgress: a bar per model, ended when the
// total is reached. A file read in a second time for huge pages (its
// total doubled) gets a bar of its own, labelled so.
func (l *loadBars) report(model string, done, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bars[model]
	if b == nil {
		label := "loading " + model
		if prev := l.read[model]; prev > 0 && total == 2*prev {
			label += " again, in huge pages"
		}
		b = progress.New(l.w, label, total, l.o)
		l.bars[model] = b
	}
	b.Update(done, total, "")
	if done >= total {
		b.Done()
		delete(l.bars, model)
		l.read[model] = total
	}
}

// ggufSize is the size of the GGUF file gguf.NewEncoder writes for kvs
// and tensors: the header (padded to the alignment) and each tensor's data
// padded to the alignment.
func ggufSize(kvs []gguf.KV, tensors []gguf.TensorInfo) (int64, error) {
	var header byteCounter
	if _, err := gguf.NewEncoder(&header, kvs, tensors); err != nil {
		return 0, err
	}
	align := uint64(gguf.DefaultAlignment)
	for _, kv := range kvs {
		if a, ok := kv.Value.Uint(); ok && kv.Key == "general.alignment" && a > 0 {
			align = a
		}
	}
	n := uint64(header)
	for _, t := range tensors {
		n += (t.Size() + align - 1) / align * align
	}
	return int64(n), nil
}

// byteCounter counts the bytes written to it.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

// benchBars shows bench run's and bench compare's progress on w: a bar
// per measured run (or slice) of its seconds, with its tokens per second
// and finished requests once the warm-up is over, the slice's number
// among bench compare's. Lines written to it go above the bar.
type benchBars struct {
	mu          sync.Mutex
	w           io.Writer
	o           progress.Options // of every bar, in seconds
	bar         *progress.Bar
	done, total int // bench compare's slices
}

// newBenchBars returns the bars of a bench command on w, with options o.
func newBenchBars(w io.Writer, o progress.Options) *benchBars {
	o.Unit = progress.Duration
	return &benchBars{w: w, o: o}
}

// tick is bench.Options.Progress: it draws the run's bar, ended with the
// run.
func (b *benchBars) tick(k bench.Tick) {
	b.mu.Lock()
	defer b.mu.Unlock()
	note := "warm-up"
	if !k.Warmup {
		note = fmt.Sprintf("%.1f tok/s, requests done %d", k.TokensPerSecond, k.Requests)
	}
	if b.bar == nil {
		label := k.Label
		if b.total > 0 {
			label = fmt.Sprintf("slice %d/%d %s", b.done+1, b.total, k.Label)
		}
		b.bar = progress.New(b.w, label, int64(k.Total), b.o)
	}
	b.bar.Update(int64(k.Elapsed), int64(k.Total), note)
	if k.Elapsed >= k.Total {
		b.bar.Done()
		b.bar = nil
	}
}

// slice is lab.CompareRun.Progress: it counts the slices.
func (b *benchBars) slice(done, total int, _ bench.Row) {
	b.mu.Lock()
	b.done, b.total = done, total
	b.mu.Unlock()
}

// Write prints p above the bar under way, if any.
func (b *benchBars) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		return b.bar.Write(p)
	}
	return b.w.Write(p)
}

// end ends the bar under way (a run that failed).
func (b *benchBars) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Done()
		b.bar = nil
	}
}
