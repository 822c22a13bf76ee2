package cpu

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Architectures lists the GGUF architectures (general.architecture) the
// engine runs.
func Architectures() []string {
	return []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}
}

// archSpec is what an architecture's files leave to convention: how the
// layers are built, as llama.cpp's GGUF conversion defines them.
type archSpec struct {
	neox   bool    // rotate (i, i+ropeDim/2) pairs
	eps    float32 // RMS norm epsilon when the file gives none
	biases bool    // attn_q/k/v.bias (qwen2)
	qkNorm bool    // attn_q_norm / attn_k_norm (qwen3, gemma3)
	// gemma: embeddings scaled by sqrt(dim), post-attention and post-FFN
	// norms, GELU-tanh gated FFN; the files store the norms' (1+w).
	gemma bool
	// swaPattern is the period of sliding-window layers when the file
	// declares a window: layer l slides when l mod p < p-1 (gemma2: 2,
	// gemma3: 6); 0: every layer slides.
	swaPattern int
	fused      bool // attn_qkv and ffn_up holding gate and up (phi3)
	// localRope: sliding layers rotate with their own base
	// (rope.freq_base_swa, 10000 when absent) and no scaling (gemma3).
	localRope bool
}

// archConventions returns the conventions of arch.
func archConventions(arch string) (archSpec, error) {
	switch arch {
	case "llama":
		return archSpec{eps: 1e-5}, nil
	case "qwen2":
		return archSpec{neox: true, eps: 1e-6, biases: true}, nil
	case "qwen3":
		return archSpec{neox: true, eps: 1e-6, qkNorm: true}, nil
	case "gemma2":
		return archSpec{neox: true, eps: 1e-6, gemma: true, swaPattern: 2}, nil
	case "gemma3":
		return archSpec{neox: true, eps: 1e-6, gemma: true, qkNorm: true, swaPattern: 6, localRope: true}, nil
	case "phi3":
		return archSpec{neox: true, eps: 1e-5, fused: true}, nil
	}
	return archSpec{}, fmt.Errorf("cpu: architecture %q is not supported (supported: %s)", arch, strings.Join(Architectures(), ", "))
}

// ropeSpec describes one set of rotary frequencies: pair j turns by
// pos·scale·base^(−2j/ropeDim)/factor[j], and cos and sin are multiplied
// by mscale.
type ropeSpec struct {
	base    float64
	scale   float64   // linear scaling: 1/rope.scaling.factor
	factors []float32 // per-pair divisors (rope_freqs, llama3, short factors)
	long    []float32 // longrope: factors for contexts beyond origCtx
	origCtx int
	mscale  float64
}

// invFreq returns the per-pair angular frequencies for a context of ctx
// tokens.
func (r *ropeSpec) invFreq(ropeDim, ctx int) []float64 {
	f := r.factors
	if r.long != nil && ctx > r.origCtx {
		f = r.long
	}
	out := make([]float64, ropeDim/2)
	for j := range out {
		out[j] = r.scale * math.Pow(r.base, -2*float64(j)/float64(ropeDim))
		if f != nil && f[j] != 0 {
			out[j] /= float64(f[j])
		}
	}
	return out
}

// meta reads an architecture's hyperparameters from a GGUF file.
type meta struct {
	f    *gguf.File
	arch string
}

// float returns arch.key, or def when absent.
func (m meta) float(key string, def float64) float64 {
	if v, ok := m.f.Float(m.arch + "." + key); ok {
		return v
	}
	return def
}

// uint reads arch.key into dst, failing when it is required and absent or
// too large.
func (m meta) uint(key string, dst *int, required bool) error {
	v, ok := m.f.Uint(m.arch + "." + key)
	if !ok {
		if required {
			return fmt.Errorf("cpu: GGUF lacks %s.%s", m.arch, key)
		}
		return nil
	}
	if v > math.MaxInt32 {
		return fmt.Errorf("cpu: %s.%s = %d is too large", m.arch, key, v)
	}
	*dst = int(v)
	return nil
}

// readRope reads the rotary scaling of the file into c.rope and, for
// architectures with local layers, c.ropeLocal; factor tensors come from
// vec (nil when absent).
func (c *config) readRope(m meta, vec func(name string, n int) []float32) error {
	c.rope = ropeSpec{base: c.ropeBase, scale: 1, mscale: m.float("rope.scaling.attn_factor", 1), origCtx: c.ctx}
	if err := m.uint("rope.scaling.original_context_length", &c.rope.origCtx, false); err != nil {
		return err
	}
	half := c.ropeDim / 2
	c.rope.factors = vec("rope_freqs.weight", half)
	typ, _ := m.f.String(m.arch + ".rope.scaling.type")
	factor := m.float("rope.scaling.factor", 0)
	switch typ {
	case "", "none":
	case "linear":
		if factor > 0 {
			c.rope.scale = 1 / factor
		}
	case "llama3":
		if c.rope.factors == nil {
			if !(factor > 0) {
				factor = 8
			}
			orig := 8192
			if err := m.uint("rope.scaling.original_context_length", &orig, false); err != nil {
				return err
			}
			low, high := m.float("rope.scaling.low_freq_factor", 1), m.float("rope.scaling.high_freq_factor", 4)
			if !(high > low) || !(low > 0) || orig <= 0 {
				return fmt.Errorf("cpu: bad llama3 rope scaling (low %v, high %v, original context %d)", low, high, orig)
			}
			c.rope.factors = gguf.Llama3RopeFactors(c.ropeBase, c.ropeDim, factor, low, high, orig)
		}
	case "longrope", "su":
	default:
		return fmt.Errorf("cpu: rope scaling %q is not supported (none, linear, llama3, longrope)", typ)
	}
	if short := vec("rope_factors_short.weight", half); short != nil {
		c.rope.factors = short
	}
	c.rope.long = vec("rope_factors_long.weight", half)
	if !(c.rope.mscale > 0) || math.IsInf(c.rope.mscale, 0) || !(c.rope.scale > 0) || math.IsInf(c.rope.scale, 0) {
		return fmt.Errorf("cpu: bad rope scaling (attention factor %v, position scale %v)", c.rope.mscale, c.rope.scale)
	}
	c.ropeLocal = ropeSpec{base: m.float("rope.freq_base_swa", 10000), scale: 1, mscale: 1}
	if !(c.ropeLocal.base > 0) || math.IsInf(c.ropeLocal.base, 0) {
		return fmt.Errorf("cpu: bad local rope base %v", c.ropeLocal.base)
	}
	return nil
}

// readLayout reads the sliding window, the soft-capping and the gemma
// conventions.
func (c *config) readLayout(m meta, spec archSpec) error {
	if err := m.uint("attention.sliding_window", &c.window, false); err != nil {
		return err
	}
	c.swaPattern = spec.swaPattern
	if err := m.uint("attention.sliding_window_pattern", &c.swaPattern, false); err != nil {
		return err
	}
	attnCap, finalCap := 0.0, 0.0
	if m.arch == "gemma2" { // Gemma 2's values, for files that do not say
		c.window = cmp.Or(c.window, 4096)
		attnCap, finalCap = 50, 30
	}
	c.attnCap = float32(m.float("attn_logit_softcapping", attnCap))
	c.finalCap = float32(m.float("final_logit_softcapping", finalCap))
	if spec.gemma {
		c.embedScale = float32(math.Sqrt(float64(c.dim)))
		c.gelu = true
	}
	if !(c.attnCap >= 0) || !(c.finalCap >= 0) || math.IsInf(float64(c.attnCap), 0) || math.IsInf(float64(c.finalCap), 0) {
		return fmt.Errorf("cpu: bad soft-capping %v/%v", c.attnCap, c.finalCap)
	}
	return nil
}

// sliding reports whether layer l attends within the sliding window.
func (c *config) sliding(l int) bool {
	if c.window <= 0 {
		return false
	}
	p := c.swaPattern
	return p <= 1 || l%p < p-1
}
