//go:build linux

package gguf

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPopulateMapsHugePages writes a 12 MiB file in 4 KiB writes (which
// leave it cached in small pages), maps it plainly to see how it is
// cached, then opens it with Populate and checks that the mapping was
// measured, that the data are intact and, where the kernel gives files
// huge pages (transparent huge pages not "never", an ext4 or XFS
// directory), that at least 90% ended up in them, read in again if the
// plain mapping found it cached in small pages.
func TestPopulateMapsHugePages(t *testing.T) {
	w := NewWriter()
	blocks := (12 << 20) / 34 // Q8_0 blocks: 34 bytes for 32 values
	data := make([]byte, 34*blocks)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	w.AddTensor("w", Q8_0, []uint64{32 * uint64(blocks)}, data)
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "big.gguf")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 4096 { // small writes: small cached pages
		if _, err := fh.Write(b[off:min(off+4096, len(b))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if pm := plain.Mapping(); pm.Measured || pm.Bytes != int64(len(b)) {
		t.Fatalf("Open without Populate: mapping %+v, want %d bytes, not measured", pm, len(b))
	}
	touch(plain.Data)
	cachedHuge, err := pmdMapped(plain.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := OpenWith(p, OpenOptions{Populate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := f.Mapping()
	t.Logf("mapping: %+v", m)
	if m.Bytes != int64(len(b)) || !m.Measured {
		t.Fatalf("mapping %+v: want %d bytes, measured", m, len(b))
	}
	ti, _ := f.Tensor("w")
	got, err := f.TensorData(ti)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("tensor data after populating differ from the file's (%v)", err)
	}
	if why := noFileTHP(dir); why != "" {
		t.Logf("huge pages not required: %s", why)
		return
	}
	if m.HugeFraction() < 0.9 {
		t.Fatalf("%.0f%% of the mapping in huge pages, want at least 90%%", 100*m.HugeFraction())
	}
	if 10*cachedHuge < 9*int64(len(b)) && !m.Reread {
		t.Fatalf("the file was cached in small pages (%d of %d bytes mappable huge) and was not read in again", cachedHuge, len(b))
	}
}

// noFileTHP says why the kernel would not map files in dir in huge pages
// ("" when it should).
func noFileTHP(dir string) string {
	en, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return err.Error()
	}
	if strings.Contains(string(en), "[never]") {
		return "transparent huge pages are off"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err.Error()
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC:
		return ""
	}
	return "the temporary directory's file system may not cache files in large folios"
}
