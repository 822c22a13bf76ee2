//go:build !unix

package gguf

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the first size bytes of fh into memory on platforms without
// mmap (populated by construction; o.Progress is told as they are read);
// the returned function releases nothing.
func mapFile(fh *os.File, size int64, o OpenOptions) ([]byte, func() error, Mapping, error) {
	b := make([]byte, size)
	var err error
	inChunks(b, func(p []byte) {
		if err == nil {
			_, err = io.ReadFull(fh, p)
		}
	}, o.Progress, 0, size)
	if err != nil {
		return nil, nil, Mapping{}, fmt.Errorf("gguf: %w", err)
	}
	return b, func() error { return nil }, Mapping{Bytes: size}, nil
}
