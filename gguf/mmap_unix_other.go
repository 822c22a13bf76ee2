//go:build unix && !linux

package gguf

import "os"

// populateMapping reads every page of b in; huge pages are not asked for
// on this platform.
func populateMapping(_ *os.File, b []byte) Mapping {
	touch(b)
	return Mapping{Bytes: int64(len(b))}
}
