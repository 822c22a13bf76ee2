package gguf

import (
	"io"
	"os"
)

// IsFile reports whether the file at path starts with the GGUF magic. It
// reads four bytes; an unreadable file is not GGUF.
func IsFile(path string) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	var magic [4]byte
	n, _ := io.ReadFull(fh, magic[:])
	return string(magic[:n]) == Magic
}
