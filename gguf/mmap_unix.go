//go:build unix

package gguf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of fh read-only and shared, so the
// pages come from the page cache and are not copied into the heap. The
// returned function unmaps them. With o.Populate, every page is read in
// before it returns (see populate); m says how the pages ended up mapped.
func mapFile(fh *os.File, size int64, o OpenOptions) (b []byte, unmap func() error, m Mapping, err error) {
	if size == 0 {
		return nil, func() error { return nil }, m, nil
	}
	if int64(int(size)) != size {
		return nil, nil, m, fmt.Errorf("%w: file of %d bytes cannot be mapped", ErrLimit, size)
	}
	b, err = unix.Mmap(int(fh.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, m, fmt.Errorf("gguf: mmap %s: %w", fh.Name(), err)
	}
	unmap = func() error { return unix.Munmap(b) }
	m.Bytes = size
	if o.Populate {
		m = populateMapping(fh, b, o.Progress)
	}
	return b, unmap, m, nil
}

// touchAll is touch without its result.
func touchAll(b []byte) { touch(b) }

// touch reads one byte of every page of b, so that each is mapped, and
// returns their sum (so the reads are not optimised away).
func touch(b []byte) byte {
	var sum byte
	for i := 0; i < len(b); i += 4096 {
		sum += b[i]
	}
	return sum
}
