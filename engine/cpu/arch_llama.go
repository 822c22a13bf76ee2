package cpu

// llamaSpec is Llama 1 to 3 and the models converted as llama (Mistral,
// SmolLM, TinyLlama): rotary pairs of adjacent dimensions, separate Q, K,
// V, gate and up matrices, SwiGLU. Llama 3's rope scaling, partial
// rotary dimensions and Mistral's sliding window (on every layer) come
// from the file's metadata.
func llamaSpec() archSpec {
	return archSpec{name: "llama", eps: 1e-5, rope: ropeNormal, ffn: ffnSwiGLU}
}
