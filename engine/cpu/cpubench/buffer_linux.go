//go:build linux

package cpubench

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tokenrouter/tokenrouter/internal/smaps"
)

// newBuffer returns n bytes of anonymous memory for ReadBandwidth, every
// page written (so present), advised to be backed by huge pages as the
// engine's weights are (the CPU engine maps its GGUF file so): read in 4
// KiB pages the same buffer streamed 6-12% slower on the machine this was
// measured on, and a bound from it would lie below what the weights can
// be read at. huge is the fraction of the buffer in huge pages (-1 where
// it cannot be measured); free unmaps it.
func newBuffer(n int) (b []byte, huge float64, free func(), err error) {
	b, err = unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, -1, nil, fmt.Errorf("cpubench: bandwidth buffer: %w", err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // without huge pages the buffer keeps small ones
	fill(b)
	huge = -1
	if h, err := smaps.Field(uintptr(unsafe.Pointer(&b[0])), "AnonHugePages"); err == nil {
		huge = min(1, float64(h)/float64(n))
	}
	return b, huge, func() { _ = unix.Munmap(b) }, nil
}
