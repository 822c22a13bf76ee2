package gguf

// populateChunk is how much of a file is read in between two calls of
// OpenOptions.Progress.
const populateChunk = 64 << 20

// inChunks calls read on b, a chunk at a time when progress is set, which
// is then told base plus the bytes of b read so far, of total; without
// progress, read takes all of b at once.
func inChunks(b []byte, read func([]byte), progress func(done, total int64), base, total int64) {
	if progress == nil {
		read(b)
		return
	}
	for off := 0; off < len(b); off += populateChunk {
		end := min(off+populateChunk, len(b))
		read(b[off:end])
		progress(base+int64(end), total)
	}
}
