package cpu

// qwen3Spec is Qwen 3 (dense): NeoX rotary pairs, an RMS norm of every
// query and key head before rotation, no biases, SwiGLU.
func qwen3Spec() archSpec {
	return archSpec{
		name: "qwen3", eps: 1e-6, rope: ropeNeoX, ffn: ffnSwiGLU,
		blocks: blockTensors{qkNorm: true},
	}
}
