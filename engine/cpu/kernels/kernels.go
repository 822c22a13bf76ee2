// Package kernels holds the CPU engine's weight-times-activation kernels:
// for each GGUF weight type, a function that multiplies rows of quantised
// weights, read in place, against activations quantised per block.
//
// Every kernel has a plain pure-Go reference version and, where the CPU
// allows, fast versions in assembly, one file per instruction set. A Set
// binds each weight type to the fastest kernel of one Level; Detect reports
// the highest Level the CPU runs. A Plan gives each class of operation
// (one-column decode, small batches, prompts, attention: Class) its own
// level, chosen by Decide from timings among the levels whose kernels share
// one Arithmetic, and PlanCache keeps it per CPU and kernel build.
//
// Kernels are exact with respect to batching: the value written for one
// (weight row, activation row) pair has the same bits whatever the number of
// rows and columns of the call, their strides, and the pair's place in it.
// So a sequence's outputs do not depend on what it is batched with or how
// rows are split across threads. Kernels of different levels may round
// differently (Arithmetic names the difference): a Plan serves the classes
// of one weight type only with levels of one arithmetic, so that the
// promise holds whichever class a call falls in.
package kernels

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Level is an instruction-set level kernels are written for.
type Level uint8

// Levels, from the portable reference up.
const (
	// Generic is pure Go (gofast*.go), with the reference kernels' bits.
	Generic Level = iota
	// AVX2 needs AVX2, FMA and F16C.
	AVX2
	// AVX512 needs AVX-512 F, BW, VL and VNNI on top of AVX2.
	AVX512
	// AVX512NoGather ("avx512ng") is AVX512 with Q8_0's fused few-column
	// kernels loading the 16 rows' block scales with scalar loads instead
	// of one gather (VPGATHERDD), which the Gather Data Sampling
	// mitigation makes slow on some Intel CPUs. It needs what AVX512 needs
	// and computes the same bits; the start-up measurement decides between
	// the two (Decide).
	AVX512NoGather
	// NEON is arm64's Advanced SIMD (every arm64 CPU has it).
	NEON
	// NEONDot needs the dot-product extension (SDOT) on top of NEON.
	NEONDot
)

var levelNames = [...]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512", AVX512NoGather: "avx512ng", NEON: "neon", NEONDot: "neondot"}

// base returns the level whose kernels l shares apart from its own few:
// AVX512 for AVX512NoGather, l itself for the others.
func (l Level) base() Level {
	if l == AVX512NoGather {
		return AVX512
	}
	return l
}

// String names the level as ParseLevel accepts it.
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// ParseLevel reads a level name ("generic", "avx2", "avx512", "avx512ng",
// "neon", "neondot").
func ParseLevel(s string) (Level, error) {
	for l, n := range levelNames {
		if n == s {
			return Level(l), nil
		}
	}
	return 0, fmt.Errorf("kernels: unknown level %q (want generic, avx2, avx512, avx512ng, neon or neondot)", s)
}

// Act is the form activations take for one weight type's kernel.
type Act uint8

// Activation forms. A row of n activations is stored as one byte slice of
// RowBytes(n) bytes, structure of arrays, quantised values first:
//
//	ActF32: f [n]float32 (little-endian)
//	ActQ8:  q [n]int8 | d [n/32]float32 | s [n/32]float32   (s[b] = d[b]·Σ q of block b)
//	ActQ8K: q [n]int8 | d [n/256]float32 | bsums [n/16]int16 (Σ q of each 16 values)
//
// x ≈ d[b]·q for each value of block b.
//
// ActQ8G holds the values of ActQ8 for groups of Group() = 16 rows (a
// batch's columns), interleaved so that one vector register holds four
// values of each of the 16 rows. A group of n values takes RowBytes(n)
// bytes: for each block b of 32 values, a record of 704 bytes,
//
//	q [8][16][4]int8 | d [16]float32 | nsum [16]int32 | s [16]float32
//
// where q[g][c] are values 4g..4g+3 of row c's block, nsum = −Σ q and
// s = d·Σ q. Rows past the last of a batch's final group are unused.
const (
	ActF32 Act = iota
	ActQ8
	ActQ8K
	ActQ8G
)

// Block is the number of values one scale covers (1 for ActF32).
func (a Act) Block() int {
	switch a {
	case ActQ8, ActQ8G:
		return 32
	case ActQ8K:
		return 256
	}
	return 1
}

// Group is the number of rows a form stores together: 16 for ActQ8G, 1
// for the others.
func (a Act) Group() int {
	if a == ActQ8G {
		return groupRows
	}
	return 1
}

// RowBytes is the size of a row of n activations (n a multiple of Block),
// or for grouped forms of a group of Group() rows.
func (a Act) RowBytes(n int) int {
	switch a {
	case ActQ8:
		return n + 8*(n/32)
	case ActQ8K:
		return n + 4*(n/256) + 2*(n/16)
	case ActQ8G:
		return n / 32 * gRecBytes
	}
	return 4 * n
}

// Bytes is the size of rows rows of n activations.
func (a Act) Bytes(n, rows int) int {
	g := a.Group()
	return (rows + g - 1) / g * a.RowBytes(n)
}

// MulFunc computes, for r < rows and c < cols,
//
//	out[c*outStride+r] = Σ_i W[r][i]·A[c][i]   (i < n)
//
// where weight row r is the n values of one GGUF type at w[r*wStride:] and
// activation row c is in the kernel's Act form at a[c*aStride:] (for a
// grouped form, row c%G of the group at a[c/G*aStride:], G = Act.Group()).
// n is a multiple of the weight type's block size and of the Act's block.
type MulFunc func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int)

// Kernel multiplies one weight type against activations in one form.
type Kernel struct {
	// Act is the form Mul wants its activations in.
	Act Act
	// Mul is the multiplication.
	Mul MulFunc
	// Few, if set, is Mul for up to FewCols columns in one ActQ8G group
	// that also takes them narrowed (NarrowQ8G): it gives Mul's results
	// bit for bit and reads a sixteenth (one column) or a quarter of the
	// activation bytes per weight block.
	Few FewFunc
}

// FewFunc is MulFunc for cols ≤ FewCols columns in one ActQ8G group a,
// with narrow the group's NarrowQ8G copy.
type FewFunc func(n int, w []byte, wStride, rows int, a, narrow []byte, aStride, cols int, out []float32, outStride int)

// Set binds weight types to the kernels of one level.
type Set struct {
	level   Level
	kernels map[gguf.TensorType]Kernel
	from    map[gguf.TensorType]Level // the level each kernel was written for
}

// NewSet returns the kernels of level l, falling back to lower levels (and
// finally the reference) for types without a kernel at l. A level above what
// Detect reports must not be requested: its instructions would fault.
func NewSet(l Level) *Set {
	s := &Set{level: l, kernels: make(map[gguf.TensorType]Kernel), from: make(map[gguf.TensorType]Level)}
	for lv := Generic; lv <= l; lv++ {
		for t, k := range levelKernels(lv) {
			s.kernels[t] = k
			s.from[t] = lv
		}
	}
	return s
}

// Level reports the level the set was built for.
func (s *Set) Level() Level { return s.level }

// For returns the kernel for weight type t.
func (s *Set) For(t gguf.TensorType) (Kernel, bool) {
	k, ok := s.kernels[t]
	return k, ok
}

// Source reports the level the set's kernel for t was written for: the
// set's own level, or a lower one it fell back to.
func (s *Set) Source(t gguf.TensorType) Level { return s.from[t] }
