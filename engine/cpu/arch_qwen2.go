package cpu

// qwen2Spec is Qwen 2 and 2.5: NeoX rotary pairs, biases on the Q, K and
// V projections, SwiGLU.
func qwen2Spec() archSpec {
	return archSpec{
		name: "qwen2", eps: 1e-6, rope: ropeNeoX, ffn: ffnSwiGLU,
		blocks: blockTensors{qkvBias: true},
	}
}
