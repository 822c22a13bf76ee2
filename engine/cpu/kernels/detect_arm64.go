package kernels

import "golang.org/x/sys/cpu"

// Detect returns the highest level this CPU supports: NEONDot with the
// dot-product extension, NEON without.
func Detect() Level {
	switch {
	case cpu.ARM64.HasASIMD && cpu.ARM64.HasASIMDDP:
		return NEONDot
	case cpu.ARM64.HasASIMD:
		return NEON
	}
	return Generic
}

// supported reports whether this CPU runs the kernels of level l: Generic
// and the arm64 levels up to Detect's (the x86 levels are not arm64's).
func supported(l Level) bool { return l == Generic || l >= NEON && l <= Detect() }
