package gguf

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sameHeader fails unless a and b hold the same header.
func sameHeader(t *testing.T, what string, a, b *File) {
	t.Helper()
	if a.Version != b.Version || a.Alignment != b.Alignment || a.DataOffset != b.DataOffset ||
		!reflect.DeepEqual(a.KVs, b.KVs) || !reflect.DeepEqual(a.Tensors, b.Tensors) {
		t.Fatalf("%s: headers differ: v%d/%d align %d/%d data at %d/%d, %d/%d kvs, %d/%d tensors", what,
			a.Version, b.Version, a.Alignment, b.Alignment, a.DataOffset, b.DataOffset, len(a.KVs), len(b.KVs), len(a.Tensors), len(b.Tensors))
	}
}

// TestOpenMetaMatchesOpen reads the real model's header both ways, and
// again starting from a 64-byte read so the header needs many doublings.
func TestOpenMetaMatchesOpen(t *testing.T) {
	path := filepath.Join(modelsDir(t), "stories260K.gguf")
	full, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	sameHeader(t, "OpenMeta", meta, full)
	if meta.Data != nil {
		t.Fatalf("OpenMeta kept %d data bytes", len(meta.Data))
	}
	small, err := openMeta(path, 64)
	if err != nil {
		t.Fatal(err)
	}
	sameHeader(t, "openMeta from 64 bytes", small, full)
	if tmpl, ok := small.String("tokenizer.ggml.model"); !ok || tmpl != "llama" {
		t.Fatalf("tokenizer.ggml.model = %q, %v", tmpl, ok)
	}
}

// TestOpenMetaRejectsWhatParseRejects writes the broken files and every
// truncation of a valid one and opens them with small first reads.
func TestOpenMetaRejectsWhatParseRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(b []byte) string {
		p := filepath.Join(dir, "f.gguf")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, b := range brokenFiles(t) {
		if _, perr := Parse(b); perr == nil {
			continue
		}
		if _, err := openMeta(write(b), 16); err == nil {
			t.Errorf("%s: Parse fails but openMeta does not", name)
		}
	}
	valid := validFile(t)
	f, err := Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	for n := range dataEnd(f) {
		if _, err := openMeta(write(valid[:n]), 16); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	m, err := openMeta(write(valid), 16)
	if err != nil {
		t.Fatal(err)
	}
	sameHeader(t, "valid file", m, f)
	if _, err := OpenMeta(filepath.Join(dir, "missing.gguf")); err == nil {
		t.Fatal("missing file: no error")
	}
}

// FuzzOpenMeta checks that the header-only reader agrees with Parse: the
// same header when Parse succeeds, an error when it fails.
func FuzzOpenMeta(f *testing.F) {
	f.Add(validFile(f))
	for _, b := range brokenFiles(f) {
		f.Add(b)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "f.gguf")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		whole, perr := Parse(b)
		meta, err := openMeta(p, 16)
		switch {
		case perr != nil && err == nil:
			t.Fatalf("Parse: %v; openMeta: no error", perr)
		case perr == nil && err != nil:
			t.Fatalf("Parse: no error; openMeta: %v", err)
		case perr == nil:
			sameHeader(t, "fuzzed file", meta, whole)
		}
	})
}
