//go:build !amd64

package cpubench

// readSum reads every byte of b and returns a checksum.
func readSum(b []byte) uint64 { return readSumGeneric(b) }
