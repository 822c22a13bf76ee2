//go:build !unix

package cpu

import "time"

// cpuTime returns 0: this system's process CPU time is not read, and the
// benchmarks leave out their per-CPU-second rates.
func cpuTime() time.Duration { return 0 }
