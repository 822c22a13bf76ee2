package cpubench

import "golang.org/x/sys/cpu"

// readSum reads every byte of b (len a multiple of 256) and returns a
// checksum, so the reads cannot be skipped.
func readSum(b []byte) uint64 {
	if cpu.X86.HasAVX2 {
		return readSumAVX2(&b[0], len(b)/256)
	}
	return readSumGeneric(b)
}

// readSumAVX2 streams over n 256-byte chunks at p with 32-byte loads.
//
//go:noescape
func readSumAVX2(p *byte, n int) uint64
