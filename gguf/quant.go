package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrRange reports a value that cannot be quantised: NaN or infinite.
var ErrRange = errors.New("gguf: value not finite")

// Quantize encodes src (len a multiple of the block size) as type t and
// returns the new bytes. See QuantizeInto.
func Quantize(t TensorType, src []float32) ([]byte, error) {
	if !t.Supported() {
		return nil, fmt.Errorf("%w: tensor type %s", ErrUnsupported, t)
	}
	out := make([]byte, t.RowBytes(len(src)))
	if err := QuantizeInto(t, out, src); err != nil {
		return nil, err
	}
	return out, nil
}

// QuantizeInto encodes src (len a multiple of the block size) as type t
// into dst, which must hold RowBytes(len(src)) bytes. It allocates nothing,
// and blocks are independent, so rows may be encoded concurrently.
//
// F32 is copied; F16 and BF16 round to nearest even, saturating finite
// values beyond their range at the largest finite value. The block types choose their scales
// to minimise the block's squared error (see the encoders), store them
// rounded as the format does, then round each value to the nearest level of
// the stored scales, so a block's error never depends on unrounded scales.
// Quantised types reject NaN and infinities (ErrRange); any finite input,
// however large or small, gives finite output.
func QuantizeInto(t TensorType, dst []byte, src []float32) error {
	if !t.Supported() {
		return fmt.Errorf("%w: tensor type %s", ErrUnsupported, t)
	}
	bs, ts := t.blockInfo()
	if len(src)%bs != 0 {
		return fmt.Errorf("%w: %d elements not a multiple of %s block size %d", ErrFormat, len(src), t, bs)
	}
	if need := t.RowBytes(len(src)); len(dst) < need {
		return fmt.Errorf("%w: %d %s elements need %d bytes, have %d", ErrFormat, len(src), t, need, len(dst))
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	case F16:
		for i, v := range src {
			if v == v && !math.IsInf(float64(v), 0) {
				v = max(-65504, min(v, 65504))
			}
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
		return nil
	case BF16:
		for i, v := range src {
			h := F32ToBF16(v)
			if h&0x7FFF == 0x7F80 && v-v == 0 { // finite, rounded up to infinity
				h--
			}
			binary.LittleEndian.PutUint16(dst[2*i:], h)
		}
		return nil
	}
	for i, v := range src {
		if v-v != 0 {
			return fmt.Errorf("%w: element %d is %v", ErrRange, i, v)
		}
	}
	enc := blockEncoder(t)
	for b := range len(src) / bs {
		enc(dst[b*ts:(b+1)*ts], src[b*bs:(b+1)*bs])
	}
	return nil
}

// blockEncoder returns the encoder of one block of a quantised type.
func blockEncoder(t TensorType) func(dst []byte, x []float32) {
	switch t {
	case Q4_0:
		return encodeQ4_0
	case Q4_1:
		return encodeQ4_1
	case Q5_0:
		return encodeQ5_0
	case Q5_1:
		return encodeQ5_1
	case Q8_0:
		return encodeQ8_0
	case Q8_1:
		return encodeQ8_1
	case Q2_K:
		return encodeQ2K
	case Q3_K:
		return encodeQ3K
	case Q4_K:
		return encodeQ4K
	case Q5_K:
		return encodeQ5K
	case Q6_K:
		return encodeQ6K
	case Q8_K:
		return encodeQ8K
	}
	return nil
}

// putHalf stores d as float16, saturating at ±65504, and returns the
// stored value.
func putHalf(dst []byte, d float32) float32 {
	h := F32ToF16(max(-65504, min(d, 65504)))
	binary.LittleEndian.PutUint16(dst, h)
	return F16ToF32(h)
}

// level rounds v to the nearest integer in [lo, hi] (ties to even).
func level(v, lo, hi float32) float32 {
	if v < lo {
		v = lo
	} else if v > hi {
		v = hi
	}
	// Adding and removing 1.5·2^23 leaves the nearest integer for |v| < 2^22.
	return v + 0x1.8p23 - 0x1.8p23
}

// inverse is 1/d, or 0 when d is 0 (every value then encodes as level 0).
func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// absMax returns the largest magnitude in x and the element holding it.
func absMax(x []float32) (amax, v float32) {
	for _, e := range x {
		if a := float32(math.Abs(float64(e))); a > amax {
			amax, v = a, e
		}
	}
	return amax, v
}

// maxGroup is the most elements fitSym and fitMin take at once.
const maxGroup = 32

// symSearch lists the levels at which fitSym tries to put the element of
// largest magnitude: offsets from lo (neg) and from hi (pos).
type symSearch struct {
	neg, pos []float32
}

// fitSym finds a scale d for x ≈ d·q with integer q in [lo, hi] (len(x) ≤
// maxGroup). Each candidate inverse scale puts the element of largest
// magnitude at a level near lo (or hi), rounds every element to its level,
// and takes the least-squares d for those levels; the candidate with the
// least squared error wins. The search runs on x divided by that extreme, so no sum
// overflows whatever the magnitudes.
func fitSym(x []float32, lo, hi float32, s symSearch) float32 {
	amax, ext := absMax(x)
	if amax == 0 {
		return 0
	}
	var buf [maxGroup]float32
	u := buf[:len(x)]
	iext := 1 / ext
	if math.IsInf(float64(iext), 0) { // ext subnormal: scale up first
		var big [maxGroup]float32
		for i, v := range x {
			big[i] = v * 0x1p100
		}
		return fitSym(big[:len(x)], lo, hi, s) * 0x1p-100
	}
	for i, v := range x {
		u[i] = v * iext // in [-1, 1], the extreme near 1
	}
	var best, bestNum, bestDen float32 = 0, 0, 1
	try := func(c float32) {
		var suq, sqq float32
		for _, v := range u {
			q := level(v*c, lo, hi)
			suq += v * q
			sqq += q * q
		}
		// Error for the least-squares scale suq/sqq is Σu² − suq²/sqq.
		if sqq > 0 && suq*suq*bestDen > bestNum*sqq {
			best, bestNum, bestDen = suq/sqq, suq*suq, sqq
		}
	}
	for _, c := range s.neg {
		try(lo + c)
	}
	for _, c := range s.pos {
		try(hi + c)
	}
	return best * ext
}

// fitMin finds a scale a ≥ 0 and offset o for x ≈ a·q + o with integer q in
// [0, qmax] (len(x) ≤ maxGroup); with nonPos the offset must be ≤ 0, as
// K-quant mins are. Each candidate c maps the range [min, max] onto
// qmax + c levels, rounds, and solves the least-squares (a, o) for those
// levels; the best candidate is then refined by re-rounding to its levels
// and solving again. The work is done on (x − min)/s, s the largest
// magnitude, so sums stay well conditioned and finite whatever the values.
func fitMin(x []float32, qmax float32, nonPos bool, cands []float32) (a, o float32) {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	if nonPos {
		lo = min(lo, 0)
	}
	if hi == lo {
		return 0, lo
	}
	s := max(-lo, hi, lo, -hi)
	is := 1 / s
	if math.IsInf(float64(is), 0) { // s subnormal: scale up first
		return scaleFit(x, qmax, nonPos, cands)
	}
	lo, hi = lo*is, hi*is
	// In terms of u = x/s − lo ≥ 0 the offset is p = o/s − lo, at most −lo
	// when o ≤ 0 is required.
	pmax := float32(math.Inf(1))
	if nonPos {
		pmax = -lo
	}
	var buf [maxGroup]float32
	u := buf[:len(x)]
	var su, suu float32
	for i, v := range x {
		u[i] = v*is - lo
		su += u[i]
		suu += u[i] * u[i]
	}
	n := float32(len(x))
	bestErr := float32(math.Inf(1))
	a, p := (hi-lo)/qmax, float32(0)
	solve := func(is, off float32) {
		var sq, sqq, suq float32
		for _, v := range u {
			q := level((v-off)*is, 0, qmax)
			sq += q
			sqq += q * q
			suq += v * q
		}
		ca, cp, ok := lsMin(n, su, sq, sqq, suq, pmax)
		if !ok {
			return
		}
		e := suu - 2*ca*suq - 2*cp*su + ca*ca*sqq + 2*ca*cp*sq + n*cp*cp
		if e < bestErr {
			bestErr, a, p = e, ca, cp
		}
	}
	for _, c := range cands {
		solve((qmax+c)/(hi-lo), 0)
	}
	if a > 0 {
		solve(1/a, p)
	}
	return a * s, (p + lo) * s
}

// scaleFit is fitMin on x scaled up by 2^100, for subnormal x.
func scaleFit(x []float32, qmax float32, nonPos bool, cands []float32) (a, o float32) {
	var big [maxGroup]float32
	for i, v := range x {
		big[i] = v * 0x1p100
	}
	a, o = fitMin(big[:len(x)], qmax, nonPos, cands)
	return a * 0x1p-100, o * 0x1p-100
}

// lsMin solves least squares for u ≈ a·q + p from the sums over n values
// (Σu, Σq, Σq², Σuq), with p capped at pmax (a refitted alone when the cap
// binds). ok is false when the levels admit no solution with a ≥ 0.
func lsMin(n, su, sq, sqq, suq, pmax float32) (a, p float32, ok bool) {
	det := n*sqq - sq*sq
	if det <= 0 {
		return 0, 0, false
	}
	a = (n*suq - sq*su) / det
	p = (su - a*sq) / n
	if p > pmax {
		p = pmax
		a = (suq - p*sq) / sqq
	}
	return a, p, a >= 0
}
