package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// addKQuant adds the kernels of level l for the 256-value super-block types
// (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). None are written yet.
func addKQuant(m map[gguf.TensorType]Kernel, l Level) {}
