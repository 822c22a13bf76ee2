//go:build !unix

package bench

import "time"

// processCPU returns false: this system's process CPU time is not read.
func processCPU() (time.Duration, bool) { return 0, false }
