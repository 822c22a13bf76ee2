//go:build !amd64

package kernels

// swigluFast returns the reference: there is no assembly on this
// architecture.
func swigluFast(Level) SwiGLUFunc { return swigluRef }
