package cpu

// phi3Spec is Phi-3 and Phi-3.5: NeoX rotary pairs, Q, K and V in one
// matrix (attn_qkv, when the file fused them), gate and up in one
// (ffn_up), SwiGLU; longrope scaling and the sliding window come from the
// file's metadata.
func phi3Spec() archSpec {
	return archSpec{
		name: "phi3", eps: 1e-5, rope: ropeNeoX, ffn: ffnSwiGLU,
		blocks: blockTensors{fusedQKV: true, fusedGateUp: true},
	}
}
