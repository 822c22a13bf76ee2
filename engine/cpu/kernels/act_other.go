//go:build !amd64

package kernels

// swigluFast returns the reference: there is no assembly on this
// architecture.
func swigluFast(Level) SwiGLUFunc { return swigluRef }

// expShiftFast returns the reference: there is no assembly on this
// architecture.
func expShiftFast(Level) ExpShiftFunc { return expShiftRef }
