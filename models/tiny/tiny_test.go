package tiny

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestFilesMatchSources: every embedded file is byte for byte the file in
// this folder, and its sha256 is the one SOURCES.md lists on its row.
func TestFilesMatchSources(t *testing.T) {
	sources, err := os.ReadFile("SOURCES.md")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range Names() {
		b, ok := File(name)
		if !ok || len(b) == 0 {
			t.Fatalf("%s: not embedded", name)
		}
		total += len(b)
		disk, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, disk) {
			t.Errorf("%s: the embedded bytes differ from the file", name)
		}
		sum := sha256.Sum256(b)
		row := ""
		for line := range strings.Lines(string(sources)) {
			if strings.HasPrefix(line, "| `"+name+"` |") {
				row = line
			}
		}
		if !strings.Contains(row, "`"+hex.EncodeToString(sum[:])+"`") {
			t.Errorf("%s: sha256 %x not on its SOURCES.md row %q", name, sum, row)
		}
		if !Known(name) {
			t.Errorf("Known(%q) = false", name)
		}
	}
	if total < 2<<20 || total > 5<<19 {
		t.Errorf("embedded %d bytes, want about 2.2 MB", total)
	}
	if b, ok := File(Licenses); !ok || !bytes.Contains(b, []byte("MIT License")) || !bytes.Contains(b, []byte("Copyright (c) 2023 Andrej")) || Known(Licenses) {
		t.Errorf("the licence notices are not built in beside the models")
	}
	for _, name := range []string{"", "stories260K.gguf", "../go.mod", "SOURCES.md"} {
		if _, ok := File(name); ok || Known(name) {
			t.Errorf("%q is embedded", name)
		}
	}
}
