package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// kquantFast returns the assembly kernel of type t written for level l, or
// nil if there is none.
func kquantFast(t gguf.TensorType, l Level) MulFunc { return nil }
