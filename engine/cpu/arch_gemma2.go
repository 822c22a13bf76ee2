package cpu

// gemma2Spec is Gemma 2: NeoX rotary pairs, embeddings scaled by
// sqrt(dim), norms of the attention and FFN outputs, GELU-gated FFN,
// sliding windows on even layers, and soft-capping of attention scores
// and logits; files that omit them get Gemma 2's window of 4096 and caps
// of 50 and 30.
func gemma2Spec() archSpec {
	return archSpec{
		name: "gemma2", eps: 1e-6, rope: ropeNeoX, ffn: ffnGeGLU,
		blocks:       blockTensors{postNorms: true},
		embedSqrtDim: true,
		swaPattern:   2,
		window:       4096, attnCap: 50, finalCap: 30,
	}
}
