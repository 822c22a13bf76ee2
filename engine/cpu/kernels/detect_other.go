//go:build !arm64

package kernels

import "golang.org/x/sys/cpu"

// Detect returns the highest level this CPU supports (AVX512NoGather, which
// holds AVX512's kernels and its own, where AVX-512 runs).
func Detect() Level {
	x := cpu.X86
	if !(x.HasAVX2 && x.HasFMA && x.HasF16C && x.HasOSXSAVE) {
		return Generic
	}
	if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI {
		return AVX512NoGather
	}
	return AVX2
}

// supported reports whether this CPU runs the kernels of level l: the x86
// levels up to Detect's.
func supported(l Level) bool { return l <= Detect() && l <= AVX512NoGather }
