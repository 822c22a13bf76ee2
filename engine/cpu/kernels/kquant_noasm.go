//go:build !amd64 && !arm64

package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// kquantFast returns the assembly kernel of type t written for level l, or
// nil: there are none on this architecture.
func kquantFast(t gguf.TensorType, l Level) MulFunc { return nil }

// quantizeQ8KFast reports that there is no assembly quantisation here.
func quantizeQ8KFast([]byte, []float32) bool { return false }
