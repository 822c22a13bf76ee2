//go:build linux

package gguf

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tokenrouter/tokenrouter/internal/smaps"
)

// hugeSize is the size of the pages a mapping's page-table entries one
// level up (PMDs) map on amd64 and arm64 with 4 KiB base pages.
const hugeSize = 2 << 20

// populateMapping asks for b (fh mapped from offset 0) to be mapped in huge
// pages (MADV_HUGEPAGE), reads every page in, and measures how much of it
// got them. The kernel maps a file in huge pages only where its page cache
// holds them as large folios, which it builds when it reads the file in
// after the advice, not when the file was cached before in small pages
// (written by a generator, read without the advice), nor where it has
// split large folios since (60-82% measured for files that other programs
// had read meanwhile). So when less than 90% is mapped huge, it drops this
// mapping's pages and the file's cached pages that nobody maps
// (POSIX_FADV_DONTNEED, after writing out any that are dirty), and reads
// them in once more. Errors of the advice are not errors of the mapping:
// kernels without transparent huge pages for files just map small pages.
//
// Huge pages matter for weights: a decode step streams through every page
// of them, and with 4 KiB pages that is one page-table entry (and a TLB
// miss) per 4 KiB. On the virtual machine this was measured on, decode
// steps of a 1.6 GB file in small pages stalled periodically (one in ten
// took 2-4x as long) and in huge pages did not.
//
// progress, if set, is told the bytes read in (OpenOptions.Progress).
func populateMapping(fh *os.File, b []byte, progress func(done, total int64)) Mapping {
	m := Mapping{Bytes: int64(len(b))}
	if len(b) < hugeSize {
		inChunks(b, touchAll, progress, 0, m.Bytes)
		return m
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	inChunks(b, populate, progress, 0, m.Bytes)
	huge, err := pmdMapped(b)
	if err != nil {
		return m // no smaps (no /proc): the pages are read in, nothing measured
	}
	m.HugeBytes, m.Measured = huge, true
	if 10*huge >= 9*m.Bytes {
		return m
	}
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		return m
	}
	_ = unix.Fdatasync(int(fh.Fd())) // dirty pages are not dropped: write them out first
	if err := unix.Fadvise(int(fh.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		populate(b) // from the page cache: no reads to report
		return m
	}
	inChunks(b, populate, progress, m.Bytes, 2*m.Bytes)
	m.Reread = true
	if m.HugeBytes, err = pmdMapped(b); err != nil {
		m.HugeBytes, m.Measured = 0, false // read in, as above, but not measured
	}
	return m
}

// populate maps every page of b, in one call where the kernel can
// (MADV_POPULATE_READ, Linux 5.14), else by reading a byte of each.
func populate(b []byte) {
	if err := unix.Madvise(b, unix.MADV_POPULATE_READ); err != nil {
		touch(b)
	}
}

// pmdMapped returns how many bytes of the mapping that holds b's first
// byte are mapped in huge pages (FilePmdMapped in /proc/self/smaps).
func pmdMapped(b []byte) (int64, error) {
	return smaps.Field(uintptr(unsafe.Pointer(&b[0])), "FilePmdMapped")
}
