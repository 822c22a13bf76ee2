//go:build linux

package cpu

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// pinThread restricts the calling OS thread (locked to its goroutine by
// the caller) to CPU cpu.
func pinThread(cpu int) error {
	var s unix.CPUSet
	s.Set(cpu)
	if !s.IsSet(cpu) {
		return fmt.Errorf("cpu: CPU %d out of range", cpu)
	}
	if err := unix.SchedSetaffinity(0, &s); err != nil {
		return fmt.Errorf("cpu: pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// pinThreadFor is pinThread that returns a function restoring the thread's
// previous CPU set.
func pinThreadFor(cpu int) (restore func(), err error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("cpu: thread CPU set: %w", err)
	}
	if err := pinThread(cpu); err != nil {
		return nil, err
	}
	return func() { _ = unix.SchedSetaffinity(0, &old) }, nil
}
