package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// The grouped kernels multiply 32-value block weights (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0) against activations in ActQ8G form. Per (weight row,
// activation row) pair they compute, for each block b in order,
//
//	dot = Σ q·a              (the exact integer dot product of the block)
//	acc = fma(float32(dot), d_b·da_b, acc)
//	acc = fma(m_b, s_b, acc) (types with a min)
//
// starting from acc = 0, with q the block's integer weights (offset removed
// for the types without a min), d_b, m_b its scale and min, da_b and s_b the
// activation block's scale and d·Σa. Every operation is a scalar one per
// pair, so a vector lane can hold one activation row (a column of the
// product) and the result does not depend on the shape of the call.

const (
	// groupRows is the number of activation rows of an ActQ8G group.
	groupRows = 16
	// gRecBytes is the size of one block's record in an ActQ8G group.
	gRecBytes = 704
	// Offsets of the parts of a record.
	gRecD, gRecNSum, gRecS = 512, 576, 640
)

// Shapes of the AVX-512 grouped kernels (grouped_amd64.go).
const (
	// gChunk is the number of blocks of a panel (16 KiB of weights, which
	// stay in the first-level cache while every column group passes them).
	gChunk = 32
	// gMaxGroups is the number of column groups whose accumulators one
	// pass over a panel keeps.
	gMaxGroups = 16
	// gWideCols is the fewest columns of a group that go to the 16-column
	// micro-kernel; fewer take the one-column micro-kernel one by one.
	// One column costs about a fifth of the 16-column pass (Q8_0, 960 wide,
	// one thread, AVX-512: 16 columns 3.3-4.0 ms, 20 columns 1.1-1.8 ms
	// more, 24 and 32 columns 5.4-5.8 ms): with eight here, 22 and 23
	// columns took 1.07-1.22x the time of 24, and 21 columns 0.98-1.07x.
	// In BenchmarkMul (Q8_0, AVX-512), 22 columns over 24 measured
	// 1.10-1.16 with eight and 1.05-1.10 with six, in alternate runs.
	gWideCols = 6
	// gMaxBlockBytes is the largest block of a grouped type (Q8_0).
	gMaxBlockBytes = 34
	// gDotCols is the most columns of the fused kernels (gdot_amd64.s),
	// which take calls of few columns; gDotTiles is the most tiles of 16
	// rows one call of them runs.
	gDotCols, gDotTiles = 4, 16
	// gTwiceBytes bounds the weight bytes of the rows one chunk of
	// gKernel.dotTwice passes over twice (well inside a core's L2).
	gTwiceBytes = 256 << 10
)

// quantizeLane writes the n = len(x) values of x as row lane of the ActQ8G
// group at dst.
func quantizeLane(dst []byte, lane int, x []float32) {
	var q [32]byte
	for b := range len(x) / 32 {
		rec := dst[b*gRecBytes : (b+1)*gRecBytes]
		sc, sum := quantizeBlock(q[:], x[b*32:(b+1)*32])
		for g := range 8 {
			copy(rec[g*64+lane*4:g*64+lane*4+4], q[4*g:4*g+4])
		}
		binary.LittleEndian.PutUint32(rec[gRecD+4*lane:], math.Float32bits(sc))
		binary.LittleEndian.PutUint32(rec[gRecNSum+4*lane:], uint32(-sum))
		binary.LittleEndian.PutUint32(rec[gRecS+4*lane:], math.Float32bits(sc*float32(sum)))
	}
}

// gValue returns value j of row lane's block in an ActQ8G record.
func gValue(rec []byte, lane, j int) int32 {
	return int32(int8(rec[j/4*64+lane*4+j%4]))
}

// refGrouped returns the reference kernel of a 32-value block type against
// ActQ8G activations (the arithmetic above).
func refGrouped(t gguf.TensorType) MulFunc {
	bb := legacyBlockBytes(t)
	hasMin := t == gguf.Q4_1 || t == gguf.Q5_1
	return func(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
		var q [32]int32
		for c := range cols {
			grp, lane := a[c/groupRows*aStride:], c%groupRows
			for r := range rows {
				wr := w[r*wStride:]
				var acc float32
				for b := range n / 32 {
					d, m := legacyBlock(t, wr[b*bb:(b+1)*bb], &q)
					rec := grp[b*gRecBytes : (b+1)*gRecBytes]
					var dot int32
					for j := range 32 {
						dot += q[j] * gValue(rec, lane, j)
					}
					acc = fma32(float32(dot), d*f32At(rec[gRecD:], lane), acc)
					if hasMin {
						acc = fma32(m, f32At(rec[gRecS:], lane), acc)
					}
				}
				out[c*outStride+r] = acc
			}
		}
	}
}

// FewCols is the most columns Kernel.Few takes.
const FewCols = 4

// narrowLanes returns the lanes of the narrow records of cols columns.
func narrowLanes(cols int) int {
	if cols == 1 {
		return 1
	}
	return FewCols
}

// NarrowBytes returns the size of NarrowQ8G's copy of cols (1 to FewCols)
// rows of n values.
func NarrowBytes(n, cols int) int { return n / 32 * 44 * narrowLanes(cols) }

// NarrowQ8G copies rows 0 to cols-1 (cols ≤ FewCols) of the ActQ8G group
// a of n values into dst (NarrowBytes) as records of one lane (one row) or
// four: an ActQ8G record's layout with L lanes instead of 16 (row c's
// values 4g..4g+3 at g·4L+4c, its scale, negated sum and scale·sum at 32L,
// 36L and 40L plus 4c). The few-column kernels read 44·L bytes a block
// instead of 704.
func NarrowQ8G(dst, a []byte, n, cols int) {
	L, nb := narrowLanes(cols), n/32
	if cols < 1 || cols > FewCols || len(dst) < NarrowBytes(n, cols) || len(a) < nb*gRecBytes {
		panic(fmt.Sprintf("kernels: NarrowQ8G: %d columns of %d values into %d bytes from %d", cols, n, len(dst), len(a)))
	}
	rb := 44 * L
	for b := range nb {
		rec, d := a[b*gRecBytes:(b+1)*gRecBytes], dst[b*rb:(b+1)*rb]
		for g := range 8 {
			copy(d[g*4*L:g*4*L+4*cols], rec[g*64:g*64+4*cols])
		}
		copy(d[32*L:32*L+4*cols], rec[gRecD:gRecD+4*cols])
		copy(d[36*L:36*L+4*cols], rec[gRecNSum:gRecNSum+4*cols])
		copy(d[40*L:40*L+4*cols], rec[gRecS:gRecS+4*cols])
	}
}
