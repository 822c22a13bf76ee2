package termchat

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// pollReader reads a file descriptor after poll(2) says it is readable, so
// that a read blocked on a terminal or a pipe can be woken: wake writes to
// a pipe that the same poll watches.
type pollReader struct {
	fd           int
	wakeR, wakeW int
}

// cancelable returns a reader of f whose blocked Read wake ends (with
// errStopped), and release, which closes what it opened once the reading
// has stopped.
func cancelable(f *os.File) (r io.Reader, wake, release func(), err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, nil, fmt.Errorf("termchat: wake pipe: %w", err)
	}
	pr := &pollReader{fd: int(f.Fd()), wakeR: p[0], wakeW: p[1]}
	wake = func() { _, _ = unix.Write(pr.wakeW, []byte{0}) }
	release = func() {
		_ = unix.Close(pr.wakeR)
		_ = unix.Close(pr.wakeW)
	}
	return pr, wake, release, nil
}

// Read waits for input or a wake, then reads.
func (r *pollReader) Read(p []byte) (int, error) {
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.wakeR), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return 0, fmt.Errorf("termchat: poll: %w", err)
		}
		if fds[1].Revents != 0 {
			return 0, errStopped
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(r.fd, p)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return 0, fmt.Errorf("termchat: read: %w", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
