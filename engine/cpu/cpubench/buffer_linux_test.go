//go:build linux

package cpubench

import (
	"os"
	"strings"
	"testing"
)

// TestNewBufferUsesHugePages checks that the bandwidth buffer is written
// and, where transparent huge pages can be asked for (not "never"), that
// at least part of it got them: with the advice removed and the system in
// "madvise" mode it would get none.
func TestNewBufferUsesHugePages(t *testing.T) {
	const n = 64 << 20
	b, huge, free, err := newBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	if len(b) != n || b[n-1] != byte((n-1)%256) || b[12345] != byte(12345%256) {
		t.Fatalf("buffer of %d bytes not written", len(b))
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("no transparent huge pages to ask for (%q, %v)", mode, err)
	}
	if huge <= 0 || huge > 1 {
		t.Fatalf("%.3f of the buffer in huge pages, want some (transparent huge pages: %s)", huge, strings.TrimSpace(string(mode)))
	}
	t.Logf("%.0f%% in huge pages", 100*huge)
}
