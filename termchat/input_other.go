//go:build !linux

package termchat

import (
	"io"
	"os"
)

// cancelable returns f itself: on this platform a read blocked on the
// input cannot be woken, so the reading goroutine ends with the input (or
// the process), not when the session does.
func cancelable(f *os.File) (r io.Reader, wake, release func(), err error) {
	return f, nil, func() {}, nil
}
