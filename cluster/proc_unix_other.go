//go:build unix && !linux

package cluster

import "syscall"

// dieWithParent does nothing: macOS, the BSDs and the other Unix systems
// have no parent-death signal. A child still exits when this process
// dies, because its standard input (a pipe only this process holds)
// closes then and the child runs with --exit-on-stdin-eof.
func dieWithParent(*syscall.SysProcAttr) {}
