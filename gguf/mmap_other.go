//go:build !unix

package gguf

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the first size bytes of fh into memory on platforms without
// mmap (populated by construction); the returned function releases nothing.
func mapFile(fh *os.File, size int64, _ bool) ([]byte, func() error, Mapping, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fh, b); err != nil {
		return nil, nil, Mapping{}, fmt.Errorf("gguf: %w", err)
	}
	return b, func() error { return nil }, Mapping{Bytes: size}, nil
}
