//go:build !linux

package cpubench

// newBuffer returns n bytes for ReadBandwidth, every page written; where
// huge pages cannot be asked for or measured, huge is -1.
func newBuffer(n int) (b []byte, huge float64, free func(), err error) {
	b = make([]byte, n)
	fill(b)
	return b, -1, func() {}, nil
}
