//go:build !amd64

package kernels

// attnFast returns the reference attention kernels: there is no assembly
// on this architecture.
func attnFast(Level) (ScoresFunc, ValuesFunc) { return scoresRef, valuesRef }
