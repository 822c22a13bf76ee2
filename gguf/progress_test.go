package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenProgress: a populated open tells Progress the bytes read in,
// growing, ending at the total: the file's size, or twice it when the
// file was read in again for huge pages.
func TestOpenProgress(t *testing.T) {
	for _, size := range []int{1 << 10, 3 << 20} { // below and above a huge page
		w := NewWriter()
		blocks := size / 34 // Q8_0 blocks: 34 bytes for 32 values
		w.AddTensor("w", Q8_0, []uint64{32 * uint64(blocks)}, make([]byte, 34*blocks))
		b, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var calls [][2]int64
		f, err := OpenWith(p, OpenOptions{Populate: true, Progress: func(done, total int64) {
			calls = append(calls, [2]int64{done, total})
		}})
		if err != nil {
			t.Fatal(err)
		}
		m := f.Mapping()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		want := int64(len(b))
		if m.Reread {
			want *= 2
		}
		if len(calls) == 0 || calls[len(calls)-1] != [2]int64{want, want} {
			t.Fatalf("%d bytes: progress %v, want it to end at %d of %d (mapping %+v)", len(b), calls, want, want, m)
		}
		for i := 1; i < len(calls); i++ {
			if calls[i][0] < calls[i-1][0] {
				t.Fatalf("%d bytes: progress went back: %v", len(b), calls)
			}
		}
	}
}
