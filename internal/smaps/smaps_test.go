//go:build linux

package smaps

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestField maps 1 MiB of anonymous memory (between inaccessible pages, so
// that no neighbouring mapping merges with it), touches half of it, and
// reads the mapping's resident size: at least the touched half, at most the
// whole; an address that no mapping holds is an error.
func TestField(t *testing.T) {
	const n, guard = 1 << 20, 1 << 16
	all, err := unix.Mmap(-1, 0, n+2*guard, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(all)
	b := all[guard : guard+n]
	if err := unix.Mprotect(b, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps")
	}
	for i := 0; i < n/2; i += 4096 {
		b[i] = 1
	}
	rss, err := Field(uintptr(unsafe.Pointer(&b[0])), "Rss")
	if err != nil {
		t.Fatal(err)
	}
	if rss < n/2 || rss > n {
		t.Fatalf("Rss %d bytes, want between %d and %d", rss, n/2, n)
	}
	if _, err := Field(uintptr(unsafe.Pointer(&b[0])), "NoSuchField"); err == nil {
		t.Fatal("a missing field gave no error")
	}
	if _, err := Field(8, "Rss"); err == nil {
		t.Fatal("an unmapped address gave no error")
	}
}
