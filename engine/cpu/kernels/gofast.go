package kernels

import (
	"fmt"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// The Generic level's kernels are pure Go (no build tags: every architecture
// runs them) and give the reference kernels' bits: refLegacy and refFloat
// with eight lanes, mulKRef. They differ from the reference in how they get
// there:
//
//   - Integer dot products several values per multiplication (SWAR): a
//     uint64 holds four weights in 16-bit lanes, W = Σ w_k·2^(16k), and the
//     activations are packed once per call, reversed, P = Σ q_k·2^(16(3-k)).
//     The top lane of W·P (mod 2^64) is then Σ w_k·q_k, and the lanes below
//     it hold smaller cross products: with a bias of 2^47 added, an
//     arithmetic shift by 48 extracts the sum exactly as long as it lies in
//     [-2^15, 2^15) and the lower lanes in (-2^47, 2^47). Each kernel states
//     its bounds where it relies on them.
//   - The float accumulations fma32(x, y, acc) of the 32-value block types
//     and the float types are computed as t = x·y + acc in float64, where
//     the product of two float32 values is exact, then rounded to float32
//     (see the rounding note below).
//
// Activations are packed into a stack buffer per chunk of blocks, so the
// kernels do not allocate.

// halfBits converts the half-precision value h (low 16 bits) to float32
// exactly as gguf.F16ToF32 does, without branches: the half's exponent and
// mantissa put at the bottom of a float32's fields are its value times
// 2^-112 (a subnormal half becomes a float32 subnormal), and the product
// with 2^112 is exact; infinities and NaNs get the top exponent.
func halfBits(h uint32) float32 {
	v := math.Float32frombits(h&0x7fff<<13) * 0x1p112
	inf := -((h&0x7c00 + 0x400) >> 15 & 1) // all ones for infinities and NaNs
	return math.Float32frombits(math.Float32bits(v) | inf&0x7f800000 | h&0x8000<<16)
}

// tie reports whether t lies exactly halfway between two float32 values of
// the normal range: its low 29 mantissa bits are 1 followed by zeros.
func tie(t float64) bool { return math.Float64bits(t)<<35 == 1<<63 }

// tieOrTiny reports whether t is a tie or a non-zero value in float32's
// subnormal range, where ties lie elsewhere: for sums whose operands need
// not be multiples of 2^-149.
func tieOrTiny(t float64) bool {
	return tie(t) || math.Float64bits(t)&^(1<<63)-1 < 0x3810000000000000-1
}

// How the 32-value block kernels reproduce fma32(x, y, acc) (x, y float32,
// the product p = x·y exact in float64): t = p + acc rounded once to
// float64, then to float32. That second rounding gives the exact sum's
// float32 rounding unless t lies exactly halfway between two float32 values
// while the exact sum does not: so t may be trusted when the float64 sum
// is exact, or when t is no tie. The kernels know it one of two ways:
//
//   - Exactness by bounds. If every operand so far is a multiple of G (a
//     power of two) and every |t| stays below 2^53·G, every float64 sum is
//     exact. The accumulators start at zero and only ever hold float32
//     roundings of such sums, which are multiples of G too (a float32 of
//     magnitude at least 2^24·G has an ulp that is a multiple of G; a
//     smaller multiple of G is exact in float32). track takes G as the
//     smallest ulp of a block scale seen so far in the row and bounds |t|
//     by 2^S·Σ|scale| (2^S bounding the lane sums). The bound only grows
//     and G only shrinks along a row, so once it fails it fails for the
//     rest of the row.
//   - Otherwise, per lane: t is no tie (the exact sum then rounds the same
//     way), or fma32 decides. The kernels return to their caller before a
//     block where some lane's t is a tie, and the caller adds that block
//     with the reference code (refLegacyBlock).
//
// Ties in float32's subnormal range are not of tie's form; there the block
// kernels' operands (integer sums times float32 scales, float32
// accumulators) are multiples of 2^-149, so t is exact, and the other sums
// are checked with tieOrTiny. Infinities and NaNs in t give float32(t), as
// fma32 does.

// track counts a block of scale sc whose lane sums have magnitude at most
// 2^logS into the bound above and reports whether the row's float64 sums
// are still exact. Its state: sum, Σ|scale| so far rounded to float32;
// emin, the smallest float32 exponent field of a non-zero scale (at least
// 1; 255 before any), so that the smallest ulp of a scale is
// G = 2^(emin-150); lim, the largest sum for which the bound holds. The
// accumulators grow by at most a factor 1+2^-24 per rounding and sum falls
// short of Σ|scale| by at most as much, so |t| < 2·2^logS·sum for rows of
// fewer than 2^22 blocks, and the bound holds (with a factor 2 to spare)
// while 2^logS·sum ≤ 2^51·G, that is sum ≤ 2^(emin+28-logS-127), capped
// below infinity (so NaN and infinite sums fail).
func track(sum, lim float32, emin uint32, sc float32, logS uint32) (float32, float32, uint32, bool) {
	mag := math.Float32bits(sc) &^ (1 << 31)
	if e := mag >> 23; e < emin && mag != 0 {
		emin = max(e, 1)
		lim = math.Float32frombits(min(emin+28-logS, 254) << 23)
	}
	sum += math.Float32frombits(mag)
	return sum, lim, emin, sum <= lim
}

// newLanes returns the state of an output before its first block.
func newLanes() lanes { return lanes{emin: 255, lim: 0x1p127} }

// reduce8 sums eight lanes as reduce does.
func reduce8(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// lanes is the state of one output of a 32-value block kernel across the
// chunks of a row: the eight accumulators, the exactness bound, and
// whether every lane must be checked for ties from here on.
type lanes struct {
	acc     [8]float32
	sum     float32 // track's state
	lim     float32
	emin    uint32
	careful bool
	wide    float64 // the lean kernels' sum of the scales' magnitudes
}

// refLegacyBlock adds one block of type t (blk) times activations q (32
// ActQ8 values, ad[0:4] the block's scale, s[0:4] its scaled sum) to lanes
// lane.. of acc exactly as refLegacy does.
func refLegacyBlock(t gguf.TensorType, blk, q, ad, s []byte, lane int, acc *[8]float32) {
	var w [32]int32
	d, m := legacyBlock(t, blk, &w)
	sc := d * f32At(ad, 0)
	for i := lane; i < 8; i++ {
		var sum int32
		for j := 4 * i; j < 4*i+4; j++ {
			sum += w[j] * int32(int8(q[j]))
		}
		acc[i] = fma32(float32(sum), sc, acc[i])
	}
	if t == gguf.Q4_1 || t == gguf.Q5_1 {
		acc[0] = fma32(m, f32At(s, 0), acc[0])
	}
}

// checkShape panics unless w, a and out hold rows weight rows of rowBytes
// bytes wStride apart, cols activation rows of actBytes aStride apart and
// their outputs, with non-negative strides.
func checkShape(name string, rowBytes, actBytes int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	if wStride < 0 || aStride < 0 || outStride < 0 || (rows-1)*wStride+rowBytes > len(w) ||
		(cols-1)*aStride+actBytes > len(a) || (cols-1)*outStride+rows > len(out) {
		panic(fmt.Sprintf("kernels: %s kernel: operands shorter than the shape (rows=%d cols=%d strides %d, %d, %d)",
			name, rows, cols, wStride, aStride, outStride))
	}
}

// goKernel returns the Generic level's kernel for weight type t, and
// whether there is one.
func goKernel(t gguf.TensorType) (Kernel, bool) {
	switch t {
	case gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1:
		return Kernel{Act: ActQ8, Mul: legacyGo(t)}, true
	case gguf.F32, gguf.F16, gguf.BF16:
		return Kernel{Act: ActF32, Mul: floatGo(t)}, true
	}
	if f := kquantGo(t); f != nil {
		return Kernel{Act: ActQ8K, Mul: f}, true
	}
	return Kernel{}, false
}
