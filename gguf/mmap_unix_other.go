//go:build unix && !linux

package gguf

import "os"

// populateMapping reads every page of b in, telling progress (if set);
// huge pages are not asked for on this platform.
func populateMapping(_ *os.File, b []byte, progress func(done, total int64)) Mapping {
	inChunks(b, touchAll, progress, 0, int64(len(b)))
	return Mapping{Bytes: int64(len(b))}
}
