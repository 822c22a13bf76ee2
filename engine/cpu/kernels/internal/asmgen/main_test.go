package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedFilesAreGenerated checks that the generated files of the
// kernels package are byte for byte what the generator writes now: an edit
// by hand, or a generator change without `go generate`, fails here.
func TestCommittedFilesAreGenerated(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("the generator wrote no file")
	}
	for _, f := range files {
		path := filepath.Join("..", "..", f.name)
		have, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if !bytes.Equal(have, f.data) {
			t.Errorf("%s differs from the generator's output (%d bytes committed, %d generated): run `go generate ./engine/cpu/kernels/`", f.name, len(have), len(f.data))
		}
	}
	// the command writes the same bytes where -out points
	dir := t.TempDir()
	if err := run([]string{"-out", dir}); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s: the command wrote other bytes than generate returns", f.name)
		}
	}
}
