package cluster

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
)

// Child processes on Windows: each child starts in a new process group,
// so the console's Ctrl-C reaches only this process, which then stops the
// children in order. Windows has no SIGTERM: stop closes the child's
// standard input, which it treats as a request to stop (it runs with
// --spec-on-stdin), and after StopTimeout terminates the process. A
// child also exits when this process dies, since its standard input, a
// pipe only this process holds, closes then. Only the child itself is
// terminated, not processes it started (a job object would cover those;
// the sub-server starts none).

// prepare sets up cmd, before it starts, as a supervised child.
func prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// terminate asks the child to stop by closing its standard input.
func terminate(_ *exec.Cmd, stdin io.Closer) error {
	if err := stdin.Close(); err != nil {
		return fmt.Errorf("cluster: close the child's stdin: %w", err)
	}
	return nil
}

// killGroup terminates the child process at once.
func killGroup(cmd *exec.Cmd) error {
	if err := cmd.Process.Kill(); err != nil {
		return fmt.Errorf("cluster: kill process %d: %w", cmd.Process.Pid, err)
	}
	return nil
}
