package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// Class is a class of operation whose kernel level is chosen on its own:
// the multiplications by the number of activation columns of the call
// (Decode, Batch, Prompt), and attention. A Plan holds the choice.
type Class uint8

// Classes of operation.
const (
	// Decode is a multiplication by one activation column (a GEMV): one
	// sequence decoding.
	Decode Class = iota
	// Batch is a multiplication by 2 to BatchCols columns: a few sequences
	// decoding together.
	Batch
	// Prompt is a multiplication by more than BatchCols columns (a GEMM):
	// prompts and large batches.
	Prompt
	// Attention is the attention kernels (ScoresFunc and ValuesFunc).
	Attention
)

// MulClasses is the number of multiplication classes; they come first.
const MulClasses = 3

// NumClasses is the number of classes.
const NumClasses = 4

// BatchCols is the most activation columns of a Batch multiplication.
const BatchCols = 16

var classNames = [NumClasses]string{Decode: "decode", Batch: "batch", Prompt: "prompt", Attention: "attention"}

// String names the class as ParseClass accepts it.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ParseClass reads a class name ("decode", "batch", "prompt", "attention").
func ParseClass(s string) (Class, error) {
	for c, n := range classNames {
		if n == s {
			return Class(c), nil
		}
	}
	return 0, fmt.Errorf("kernels: unknown class %q", s)
}

// ClassOf returns the multiplication class of a call with cols activation
// columns.
func ClassOf(cols int) Class {
	switch {
	case cols <= 1:
		return Decode
	case cols <= BatchCols:
		return Batch
	}
	return Prompt
}

// Arithmetic names the arithmetic of the kernel for weight type t written
// for level l: the sequence of rounded operations that gives each output.
// Kernels of the same arithmetic give the same bits for every input and
// every call shape (TestArithmeticNamesBitIdenticalKernels checks it), so
// only they may serve different classes of one weight type: with kernels of
// different arithmetic, a sequence's results would depend on how many
// columns its batch has. The block types compute with eight float lanes per
// output below AVX512 and with the grouped arithmetic (grouped.go) at it;
// the float types with Lanes(l) lanes; the K-quant types per super-block
// in Go and with eight or sixteen lanes in assembly (kquant.go).
// AVX512NoGather computes as AVX512 does.
func Arithmetic(l Level, t gguf.TensorType) string {
	l = l.base()
	switch {
	case l != Generic && l != AVX2 && l != AVX512:
		return l.String() // a level of its own
	case legacyBlockBytes(t) != 0 && l == AVX512:
		return "grouped"
	case legacyBlockBytes(t) != 0, t == gguf.F32, t == gguf.F16, t == gguf.BF16:
		return fmt.Sprintf("lanes%d", Lanes(l))
	case isKQuant(t) && l == Generic:
		return "superblock"
	case isKQuant(t):
		return fmt.Sprintf("lanes%d", Lanes(l))
	}
	return l.String()
}

// Available returns the levels this CPU runs, lowest first (Generic, then
// those of its architecture up to Detect's).
func Available() []Level {
	var ls []Level
	for l := Generic; int(l) < len(levelNames); l++ {
		if supported(l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// isKQuant reports whether t is one of the 256-value super-block types.
func isKQuant(t gguf.TensorType) bool {
	for _, kt := range kTypes() {
		if kt.t == t {
			return true
		}
	}
	return false
}

// Arithmetic names the arithmetic of the set's kernel for t (see the
// function Arithmetic).
func (s *Set) Arithmetic(t gguf.TensorType) string { return Arithmetic(s.Source(t), t) }

// Agree reports whether kernels a and b give the same bits for rows weight
// rows of n values at w (wStride bytes apart) against the same random
// activations, quantised into each kernel's form, in one column, three
// columns and 2·BatchCols+1 columns (through Few too where a kernel has
// one). It is a probe, run before two levels whose Arithmetic is the same
// serve different classes of one matrix.
func Agree(n int, w []byte, wStride, rows int, a, b Kernel) bool {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(rows)))
	for _, cols := range []int{1, 3, 2*BatchCols + 1} {
		x := make([]float32, cols*n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		}
		if !slices.EqualFunc(probe(a, n, w, wStride, rows, x, cols), probe(b, n, w, wStride, rows, x, cols), sameFloat) {
			return false
		}
	}
	return true
}

// sameFloat reports whether x and y have the same bits or are both NaN.
func sameFloat(x, y float32) bool {
	return math.Float32bits(x) == math.Float32bits(y) || x != x && y != y
}

// probe runs k on the rows of x (cols rows of n values) quantised into its
// form and returns the outputs, through Few if k has one and takes cols.
func probe(k Kernel, n int, w []byte, wStride, rows int, x []float32, cols int) []float32 {
	stride := k.Act.RowBytes(n)
	a := make([]byte, k.Act.Bytes(n, cols))
	QuantizeRows(k.Act, a, stride, x, n, 0, cols)
	out := make([]float32, cols*rows)
	if k.Few != nil && cols <= FewCols {
		narrow := make([]byte, NarrowBytes(n, cols))
		NarrowQ8G(narrow, a, n, cols)
		k.Few(n, w, wStride, rows, a, narrow, stride, cols, out, rows)
		return out
	}
	k.Mul(n, w, wStride, rows, a, stride, cols, out, rows)
	return out
}
