package lab

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("bench: CPUs: %w", err)
	}
	var out []int
	for c := range 1024 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// pinThread locks the calling goroutine to its thread and pins the thread
// to cpu; undo restores the thread's CPUs and unlocks it.
func pinThread(cpu int) (undo func(), err error) {
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("bench: pin: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("bench: pin to CPU %d: %w", cpu, err)
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &old) // the thread had these CPUs a moment ago
		runtime.UnlockOSThread()
	}, nil
}
