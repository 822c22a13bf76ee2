package kernels

import "github.com/tokenrouter/tokenrouter/gguf"

// legacyTypes are the float types and the 32-value block types.
var legacyTypes = [...]gguf.TensorType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0}

// addLegacy adds the kernels of level l for the float types and the 32-value
// block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0). The generic kernels
// (gofast*.go) give the bits of the reference ones with eight lanes, so
// those of the AVX2 kernels.
func addLegacy(m map[gguf.TensorType]Kernel, l Level) {
	if l == Generic {
		for _, t := range legacyTypes {
			m[t], _ = goKernel(t)
		}
		return
	}
	for t, tl := range fastTiles(l) {
		m[t] = Kernel{Act: tl.act(), Mul: tl.mul}
	}
	if l == AVX512 || l == AVX512NoGather {
		for t, k := range groupedFast(l == AVX512NoGather) {
			m[t] = k
		}
	}
}

// levelRef returns the pure-Go reference kernel that gives level l's bits
// for a float or 32-value block type, and whether there is one: the float
// kernels with Lanes(l) lanes; the block types with eight lanes below
// AVX512 and the grouped arithmetic at AVX512 (and AVX512NoGather).
func levelRef(l Level, t gguf.TensorType) (Kernel, bool) {
	if l.base() == AVX512 && legacyBlockBytes(t) != 0 {
		return Kernel{Act: ActQ8G, Mul: refGrouped(t)}, true
	}
	return RefKernel(t, Lanes(l))
}

// refKernel returns the reference kernel of a legacy type with L lanes.
func refKernel(t gguf.TensorType, L int) Kernel {
	if legacyBlockBytes(t) == 0 {
		return Kernel{Act: ActF32, Mul: refFloat(t, L)}
	}
	return Kernel{Act: ActQ8, Mul: refLegacy(t, L)}
}

// Lanes reports the accumulator width of level l's kernels for the float
// types and, below AVX512, the 32-value block types (8 for Generic and
// AVX2, 16 for AVX512 and AVX512NoGather); RefKernel with that width
// gives the level's bits.
func Lanes(l Level) int {
	if l.base() == AVX512 {
		return 16
	}
	return 8
}

// RefKernel returns the pure-Go reference kernel for a float or 32-value
// block weight type computing with L accumulator lanes (8 or 16), and
// whether there is one.
func RefKernel(t gguf.TensorType, L int) (Kernel, bool) {
	for _, lt := range legacyTypes {
		if lt == t && (L == 8 || L == 16) {
			return refKernel(t, L), true
		}
	}
	return Kernel{}, false
}

// tiler drives the generated tile functions of one weight type and level
// over a whole multiplication.
type tiler struct {
	typ       gguf.TensorType
	float     bool
	step      int // values per step of a tile function (a block, or L lanes)
	stepBytes int // weight bytes per step
	maxC      int
	maxR      []int        // largest tile rows for C columns
	fn        [][]tileFunc // fn[C][R]
}

// tileFunc computes an R×C tile over nb steps: out + c·os bytes receives
// row r's result at float r, for weight rows at w + r·ws and activation
// columns at a + c·as (their block scales at ad + c·as).
type tileFunc func(nb int, w *byte, ws int, a *byte, as int, ad *byte, out *float32, os int)

func (t *tiler) act() Act {
	if t.float {
		return ActF32
	}
	return ActQ8
}

// mul implements MulFunc with the tiles: row tiles outside, column tiles
// inside, so each tile's weight rows stay in the first-level cache while
// every column passes them.
func (t *tiler) mul(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	nb := n / t.step
	rowBytes := nb * t.stepBytes
	if t.float {
		rowBytes = n * (t.stepBytes / t.step)
	}
	act := t.act()
	if (rows-1)*wStride+rowBytes > len(w) || (cols-1)*aStride+act.RowBytes(n) > len(a) ||
		(cols-1)*outStride+rows > len(out) || n%t.step != 0 && !t.float {
		panic("kernels: operands shorter than the shape")
	}
	adOff := n
	if t.float {
		adOff = 0
	}
	C0 := min(t.maxC, cols)
	for r0 := 0; r0 < rows; {
		R := min(t.maxR[C0], rows-r0)
		for c0 := 0; c0 < cols; {
			C := min(t.maxC, cols-c0)
			ca := c0 * aStride
			t.fn[C][R](nb, &w[r0*wStride], wStride, &a[ca], aStride, &a[ca+adOff], &out[c0*outStride+r0], 4*outStride)
			c0 += C
		}
		r0 += R
	}
	if tail := n % t.step; t.float && tail != 0 {
		for c := range cols {
			act := a[c*aStride:]
			for r := range rows {
				s := out[c*outStride+r]
				wr := w[r*wStride:]
				for i := n - tail; i < n; i++ {
					s = fma32(floatAt(t.typ, wr, i), f32At(act, i), s)
				}
				out[c*outStride+r] = s
			}
		}
	}
}
