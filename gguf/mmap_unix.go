//go:build unix

package gguf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of fh read-only and shared, so the
// pages come from the page cache and are not copied into the heap. The
// returned function unmaps them.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%w: file of %d bytes cannot be mapped", ErrLimit, size)
	}
	b, err := unix.Mmap(int(fh.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("gguf: mmap %s: %w", fh.Name(), err)
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
