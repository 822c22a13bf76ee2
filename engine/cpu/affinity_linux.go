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

// checkCPUs reports an error unless every CPU in cpus is one this process
// may run on.
func checkCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("cpu: process CPU set: %w", err)
	}
	for _, c := range cpus {
		if c < 0 || !allowed.IsSet(c) {
			return fmt.Errorf("cpu: CPU %d is not one this process may run on (%d allowed)", c, allowed.Count())
		}
	}
	return nil
}
