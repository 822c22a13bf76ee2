package cpu

// gemma3Spec is Gemma 3 (text): Gemma 2's layout without soft-capping,
// with per-head query and key norms, five sliding layers in six (unless
// the file says otherwise), and sliding layers rotating at their own
// base without the global layers' scaling.
func gemma3Spec() archSpec {
	return archSpec{
		name: "gemma3", eps: 1e-6, rope: ropeNeoX, ffn: ffnGeGLU,
		blocks:       blockTensors{qkNorm: true, postNorms: true},
		embedSqrtDim: true,
		swaPattern:   6,
		localRope:    true,
	}
}
