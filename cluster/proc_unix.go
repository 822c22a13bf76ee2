//go:build unix

package cluster

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
)

// Child processes on Unix (Linux, macOS, the BSDs, Solaris, AIX): each
// child leads a process group of its own, so the terminal's Ctrl-C reaches
// only this process (which then stops the children in order) and the
// group's signals reach whatever the child started. Stop sends SIGTERM to
// the group and, after StopTimeout, SIGKILL. A child also exits when its
// standard input (a pipe this process holds) closes, which happens when
// this process dies however it dies; on Linux the kernel kills it too
// (proc_linux.go).

// prepare sets up cmd, before it starts, as a supervised child.
func prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// terminate asks cmd's process group to stop (SIGTERM). stdin is the
// child's standard input; closing it would stop the child too, but the
// signal reaches the whole group, so it stays open.
func terminate(cmd *exec.Cmd, _ io.Closer) error { return signalGroup(cmd, syscall.SIGTERM) }

// killGroup ends cmd's process group at once (SIGKILL).
func killGroup(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGKILL) }

// signalGroup sends sig to the process group that cmd's process leads.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("cluster: signal %v to process group %d: %w", sig, cmd.Process.Pid, err)
	}
	return nil
}
