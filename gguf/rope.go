package gguf

import "math"

// Llama3RopeFactors returns Llama 3.x's per-pair rotary frequency divisors
// for a head of ropeDim rotated dimensions at base frequency base (the
// values llama.cpp's conversion stores in rope_freqs.weight): pair j, of
// wavelength 2π·base^(2j/ropeDim), keeps its frequency (1) below
// origCtx/high, is slowed by factor above origCtx/low, and blends smoothly
// between. It needs high > low > 0.
func Llama3RopeFactors(base float64, ropeDim int, factor, low, high float64, origCtx int) []float32 {
	out := make([]float32, ropeDim/2)
	orig := float64(origCtx)
	lowWave, highWave := orig/low, orig/high
	for j := range out {
		wave := 2 * math.Pi * math.Pow(base, 2*float64(j)/float64(ropeDim))
		switch {
		case wave < highWave:
			out[j] = 1
		case wave > lowWave:
			out[j] = float32(factor)
		default:
			s := (orig/wave - low) / (high - low)
			out[j] = float32(1 / ((1-s)/factor + s))
		}
	}
	return out
}
