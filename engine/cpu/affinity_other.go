//go:build !linux

package cpu

import (
	"errors"
	"fmt"
)

// errNoPinning is the error of Options.CPUs on platforms other than Linux.
var errNoPinning = errors.New("cpu: pinning threads to CPUs (Options.CPUs) needs Linux")

// pinThread fails: threads cannot be pinned here.
func pinThread(int) error { return errNoPinning }

// pinThreadFor fails: threads cannot be pinned here.
func pinThreadFor(cpu int) (func(), error) { return nil, fmt.Errorf("CPU %d: %w", cpu, errNoPinning) }

// checkCPUs fails for any CPU set: threads cannot be pinned here.
func checkCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	return errNoPinning
}
