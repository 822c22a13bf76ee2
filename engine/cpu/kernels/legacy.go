package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// addLegacy adds the kernels of level l for the float types and the 32-value
// block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
func addLegacy(m map[gguf.TensorType]Kernel, l Level) {
	if l == Generic {
		m[gguf.Q8_0] = Kernel{Act: ActQ8, Mul: mulQ8_0Ref}
	}
}
