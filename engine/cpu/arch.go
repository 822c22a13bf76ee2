package cpu

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Architectures lists the GGUF architectures (general.architecture) the
// engine runs, in the order archSpecs registers them.
func Architectures() []string {
	specs := archSpecs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	return names
}

// archSpecs lists the supported architectures, one registration a line;
// each is defined in its own arch_<name>.go file. Adding an architecture
// is that file and its line here.
func archSpecs() []archSpec {
	return []archSpec{
		llamaSpec(),
		qwen2Spec(),
		qwen3Spec(),
		gemma2Spec(),
		gemma3Spec(),
		phi3Spec(),
	}
}

// archConventions returns the conventions of the architecture named arch.
func archConventions(arch string) (archSpec, error) {
	for _, s := range archSpecs() {
		if s.name == arch {
			return s, nil
		}
	}
	return archSpec{}, fmt.Errorf("cpu: architecture %q is not supported (supported: %s)", arch, strings.Join(Architectures(), ", "))
}

// archSpec is what an architecture's files leave to convention, as
// llama.cpp's GGUF conversion defines them: the tensors of a block, how
// the layers compute, and the defaults of what the metadata may omit.
// The loader turns it into the model's config and layers; the forward
// pass reads only those, never the architecture's name.
type archSpec struct {
	name   string    // general.architecture
	eps    float32   // RMS norm epsilon when the file gives none
	rope   ropeStyle // how a head's dimensions pair up for rotation
	ffn    ffnGate   // the gated feed-forward activation
	blocks blockTensors
	// embedSqrtDim: token embeddings are multiplied by sqrt(dim) (gemma).
	embedSqrtDim bool
	// swaPattern is the period of sliding-window layers when the file
	// declares a window: layer l slides when l mod p < p-1; 0: every
	// layer slides. The file's attention.sliding_window_pattern wins.
	swaPattern int
	// localRope: sliding layers rotate with their own base
	// (rope.freq_base_swa, 10000 when absent) and no scaling.
	localRope bool
	// window, attnCap and finalCap are the sliding window and the
	// soft-capping of attention scores and logits for files that do not
	// give them (0: none).
	window            int
	attnCap, finalCap float64
}

// blockTensors says which tensors a block holds beyond the common ones
// (attn_norm, attn_output, ffn_norm, ffn_down and, unless fused, attn_q,
// attn_k, attn_v, ffn_gate and ffn_up).
type blockTensors struct {
	fusedQKV    bool // attn_qkv holds Q, K and V, when the file has it
	fusedGateUp bool // ffn_up holds the gate's rows, then the up rows
	qkvBias     bool // attn_q/k/v.bias
	qkNorm      bool // attn_q_norm and attn_k_norm, per head
	// postNorms: post_attention_norm and post_ffw_norm normalise the
	// attention and FFN outputs before the residual adds them (the
	// conversion stores these norms' weights, like all others, as 1+w).
	postNorms bool
}

// ropeStyle is how rotary embeddings pair the dimensions of a head.
type ropeStyle uint8

// Rotary pairings.
const (
	ropeNormal ropeStyle = iota // pairs (2j, 2j+1)
	ropeNeoX                    // pairs (j, j+ropeDim/2)
)

// pairs returns, for half = ropeDim/2, the first dimension of pair j as
// j·step and the second as j·step+off.
func (s ropeStyle) pairs(half int) (step, off int) {
	if s == ropeNeoX {
		return 1, half
	}
	return 2, 1
}

// ffnGate is the activation of a gated feed-forward block, applied to the
// gate and multiplied by up.
type ffnGate uint8

// Gated activations.
const (
	ffnSwiGLU ffnGate = iota // SiLU
	ffnGeGLU                 // GELU, tanh approximation
)

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

// readLayout reads the sliding window and the soft-capping, and sets the
// embedding scale and the FFN activation of spec.
func (c *config) readLayout(m meta, spec archSpec) error {
	if err := m.uint("attention.sliding_window", &c.window, false); err != nil {
		return err
	}
	c.window = cmp.Or(c.window, spec.window)
	c.swaPattern = spec.swaPattern
	if err := m.uint("attention.sliding_window_pattern", &c.swaPattern, false); err != nil {
		return err
	}
	c.attnCap = float32(m.float("attn_logit_softcapping", spec.attnCap))
	c.finalCap = float32(m.float("final_logit_softcapping", spec.finalCap))
	if spec.embedSqrtDim {
		c.embedScale = float32(math.Sqrt(float64(c.dim)))
	}
	c.gelu = spec.ffn == ffnGeGLU
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
