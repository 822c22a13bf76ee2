//go:build unix

package main

import "syscall"

// alive reports whether process pid exists.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// kill ends process pid at once (SIGKILL).
func kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
