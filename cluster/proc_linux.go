package cluster

import "syscall"

// dieWithParent has the kernel kill the child (SIGKILL) when the thread
// that started it exits, which for a Go program is in practice when the
// process exits: a child never outlives this process, even one that
// ignores its standard input's end.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
