//go:build unix

package server

import "syscall"

// fdLimit returns the process's soft limit on open descriptors (0 when
// unknown).
func fdLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
