//go:build linux

package cpu

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// threadsOnCPU counts this process's threads whose CPU set is exactly the
// given list (as /proc shows it, e.g. "1").
func threadsOnCPU(t *testing.T, list string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) == list {
				n++
			}
		}
	}
	return n
}

func TestCPUsPinWorkersAndRestoreTheCaller(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	cpu := -1
	for c := 1; c < 1024 && cpu < 0; c++ {
		if all.IsSet(c) {
			cpu = c
		}
	}
	list := strconv.Itoa(cpu)
	before := threadsOnCPU(t, list)
	e := openModel(t, "stories260K.gguf", Options{Threads: 3, CPUs: []int{cpu}})
	if got := threadsOnCPU(t, list); got < before+2 {
		t.Fatalf("%d threads pinned to CPU %d, want the 2 workers more than the %d before", got, cpu, before)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was, is unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	pinned := greedy(t, e, 1, []int32{1}, 8)
	if err := unix.SchedGetaffinity(0, &is); err != nil {
		t.Fatal(err)
	}
	if is != was {
		t.Fatal("the calling thread's CPU set changed across Step")
	}
	free := openModel(t, "stories260K.gguf", Options{Threads: 3})
	if want := greedy(t, free, 1, []int32{1}, 8); !slices.Equal(pinned, want) {
		t.Fatalf("pinned engine generated %v, unpinned %v", pinned, want)
	}
	e.Close()
	if _, err := Open(filepath.Join(modelsDir(t), "stories260K.gguf"), Options{Threads: 2, CPUs: []int{1 << 20}}); err == nil {
		t.Fatal("a CPU number out of range was accepted")
	}
}
