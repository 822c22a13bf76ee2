package cluster_test

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// alive reports whether process pid exists and has not exited.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	const stillActive = 259 // STILL_ACTIVE: the exit code of a running process
	return windows.GetExitCodeProcess(h, &code) == nil && code == stillActive
}

// freeze would stop process pid without ending it: Windows has no
// SIGSTOP.
func freeze(pid int) error {
	return fmt.Errorf("freeze process %d: %w on windows", pid, errors.ErrUnsupported)
}

// kill ends process pid at once.
func kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("kill process %d: %w", pid, err)
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill process %d: %w", pid, err)
	}
	return nil
}

// askStop would ask process pid to stop: Windows has no SIGTERM (a
// child stops when its standard input ends).
func askStop(pid int) error {
	return fmt.Errorf("ask process %d to stop: %w on windows", pid, errors.ErrUnsupported)
}
