package cpubench

import "encoding/binary"

// readSumGeneric is the pure-Go streaming read: the sum of b's 8-byte words.
func readSumGeneric(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+32 <= len(b); i += 32 {
		s0 += binary.LittleEndian.Uint64(b[i:])
		s1 += binary.LittleEndian.Uint64(b[i+8:])
		s2 += binary.LittleEndian.Uint64(b[i+16:])
		s3 += binary.LittleEndian.Uint64(b[i+24:])
	}
	return s0 + s1 + s2 + s3
}
