package lab

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/loader"
)

// TestInterference measures the tiny pair alone and together, unpinned
// and (on Linux, with two CPUs) pinned to a CPU each; no timing is asserted.
func TestInterference(t *testing.T) {
	ms := tinyPair(t)
	ms[0].Threads, ms[1].Threads = 1, 1
	ctx := context.Background()
	timing := loader.StepTiming{Batch: 2, Steps: 3, PromptLen: 4}
	f, err := MeasureInterference(ctx, loader.Builtin(), ms, timing, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.Pinned || f.Batch != 2 || len(f.Alone) != 2 || len(f.Together) != 2 || f.Threads[1] != 1 || f.Slowdown(0) <= -1 {
		t.Fatalf("%+v", f)
	}
	cpus, err := allowedCPUs()
	if runtime.GOOS != "linux" || err != nil || len(cpus) < 2 {
		t.Logf("pinned: not measured (%s, CPUs %v, %v)", runtime.GOOS, cpus, err)
	} else if f, err = MeasureInterference(ctx, loader.Builtin(), ms, timing, true); err != nil || !f.Pinned || f.Together[0] <= 0 {
		t.Fatalf("pinned: %+v, %v", f, err)
	}
	ms[0].Threads = 2
	if _, err := MeasureInterference(ctx, loader.Builtin(), ms, timing, true); err == nil || !strings.Contains(err.Error(), "one thread per model") {
		t.Fatalf("pinning a two-thread model: %v", err)
	}
}
