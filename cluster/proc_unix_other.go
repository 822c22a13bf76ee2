//go:build unix && !linux

package cluster

import "syscall"

// dieWithParent does nothing: macOS, the BSDs and the other Unix systems
// have no parent-death signal. A child still exits when this process
// dies, because its standard input (a pipe only this process holds)
// closes then and the child (subserver --spec-on-stdin) exits at its EOF.
func dieWithParent(*syscall.SysProcAttr) {}
