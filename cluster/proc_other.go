//go:build !unix && !windows

package cluster

import (
	"fmt"
	"io"
	"os/exec"
)

// Child processes elsewhere (Plan 9, WebAssembly hosts that can start
// processes at all): no process groups and no signals beyond a kill. Stop
// closes the child's standard input, which it treats as a request to stop
// (it runs with --spec-on-stdin), and after StopTimeout kills the
// process. A child also exits when this process dies, since its standard
// input, a pipe only this process holds, closes then.

// prepare sets up cmd, before it starts, as a supervised child: nothing
// to set here.
func prepare(*exec.Cmd) {}

// terminate asks the child to stop by closing its standard input.
func terminate(_ *exec.Cmd, stdin io.Closer) error {
	if err := stdin.Close(); err != nil {
		return fmt.Errorf("cluster: close the child's stdin: %w", err)
	}
	return nil
}

// killGroup kills the child process at once.
func killGroup(cmd *exec.Cmd) error {
	if err := cmd.Process.Kill(); err != nil {
		return fmt.Errorf("cluster: kill process %d: %w", cmd.Process.Pid, err)
	}
	return nil
}
