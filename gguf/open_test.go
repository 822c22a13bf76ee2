package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// writeTemp writes b to a fresh file and returns its path.
func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenCloseLifecycle opens a file, checks its data against the bytes on
// disk, closes it and checks that the data are gone and Close is idempotent.
func TestOpenCloseLifecycle(t *testing.T) {
	valid := validFile(t)
	f, err := Open(writeTemp(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	sameHeader(t, "Open", f, want)
	if !bytes.Equal(f.Data, want.Data) {
		t.Fatal("mapped data differ from the file's bytes")
	}
	ti, _ := f.Tensor("v")
	if d, err := f.TensorData(ti); err != nil || len(d) != 16 {
		t.Fatalf("TensorData before Close: %d bytes, %v", len(d), err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Data != nil {
		t.Fatal("Data kept after Close")
	}
	if _, err := f.TensorData(ti); !errors.Is(err, ErrNoData) {
		t.Fatalf("TensorData after Close: %v, want ErrNoData", err)
	}
	if v, ok := f.Uint("a.n"); !ok || v != 3 {
		t.Fatalf("metadata after Close: %v %v", v, ok)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := want.Close(); err != nil {
		t.Fatalf("Close of a parsed file: %v", err)
	}
	meta, err := OpenMeta(writeTemp(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.TensorData(ti); !errors.Is(err, ErrNoData) {
		t.Fatalf("TensorData of OpenMeta: %v, want ErrNoData", err)
	}
}

// TestOpenRejectsWhatParseRejects maps every broken file and truncation.
func TestOpenRejectsWhatParseRejects(t *testing.T) {
	for name, b := range brokenFiles(t) {
		if _, perr := Parse(b); perr == nil {
			continue
		}
		if f, err := Open(writeTemp(t, b)); err == nil {
			f.Close()
			t.Errorf("%s: Parse fails but Open does not", name)
		}
	}
	valid := validFile(t)
	whole, err := Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	p := writeTemp(t, nil)
	for _, n := range []int{0, 3, 24, int(whole.DataOffset) - 1, dataEnd(whole) - 1} {
		if err := os.WriteFile(p, valid[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		if f, err := Open(p); err == nil {
			f.Close()
			t.Errorf("truncated to %d bytes: no error", n)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Fatal("missing file: no error")
	}
}

// TestOpenDoesNotCopyWeights opens a 32 MiB file and checks the Go heap
// grew by far less than that: the weights are mapped, not read.
func TestOpenDoesNotCopyWeights(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no mmap on this platform: Open reads the file")
	}
	const n = 8 << 20 // F32 elements
	w := NewWriter()
	w.AddTensor("big", F32, []uint64{1024, n / 1024}, make([]byte, 4*n))
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	p := writeTemp(t, b)
	b = nil
	w = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Fatalf("Open grew the heap by %d bytes for a %d-byte file", grew, 4*n)
	}
	ti, _ := f.Tensor("big")
	d, err := f.TensorData(ti)
	if err != nil || len(d) != 4*n || d[len(d)-1] != 0 {
		t.Fatalf("TensorData: %d bytes, %v", len(d), err)
	}
}

// TestWriteFileReplacesOnlyOnSuccess checks that a failed write leaves
// neither the target nor a temporary file behind.
func TestWriteFileReplacesOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.gguf")
	if err := WriteFile(p, func(w io.Writer) error { _, err := w.Write(validFile(t)); return err }); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	boom := errors.New("boom")
	if err := WriteFile(filepath.Join(dir, "n.gguf"), func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries after a failed write, want 1", len(entries))
	}
}
