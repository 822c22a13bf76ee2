//go:build unix

package cluster_test

import "syscall"

// alive reports whether process pid exists.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// freeze stops process pid without ending it (SIGSTOP).
func freeze(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// kill ends process pid at once (SIGKILL).
func kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// askStop asks process pid to stop (SIGTERM).
func askStop(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }
