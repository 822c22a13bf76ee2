//go:build !linux

package lab

import (
	"errors"
	"runtime"
)

var errPin = errors.New("bench: pinning threads to CPUs works on Linux only (this is " + runtime.GOOS + ")")

// allowedCPUs is unavailable off Linux.
func allowedCPUs() ([]int, error) { return nil, errPin }

// pinThread is unavailable off Linux.
func pinThread(int) (func(), error) { return nil, errPin }
