package gguf

import "fmt"

// TensorType is a ggml tensor data type.
type TensorType uint32

// Tensor types. Those with a block layout below (Supported) can be read and
// written; the others are named so errors can say what a file holds.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q4_0 TensorType = 2
	Q4_1 TensorType = 3
	Q5_0 TensorType = 6
	Q5_1 TensorType = 7
	Q8_0 TensorType = 8
	Q8_1 TensorType = 9
	Q2_K TensorType = 10
	Q3_K TensorType = 11
	Q4_K TensorType = 12
	Q5_K TensorType = 13
	Q6_K TensorType = 14
	Q8_K TensorType = 15
	// IQ4_NL is named for errors only: it cannot be read or written.
	IQ4_NL TensorType = 20
	BF16   TensorType = 30
)

var tensorTypeNames = map[TensorType]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
	10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
	16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
	22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
	29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}

// String names the tensor type as ggml does.
func (t TensorType) String() string {
	if s, ok := tensorTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Supported reports whether the type can be dequantised.
func (t TensorType) Supported() bool {
	bs, _ := t.blockInfo()
	return bs != 0
}

// BlockSize is the number of elements per block (1 for float types, 0 for
// unsupported types).
func (t TensorType) BlockSize() int {
	bs, _ := t.blockInfo()
	return bs
}

// BlockBytes is the number of bytes per block (0 for unsupported types).
func (t TensorType) BlockBytes() int {
	_, ts := t.blockInfo()
	return ts
}

// RowBytes is the size in bytes of n elements (n a multiple of BlockSize).
func (t TensorType) RowBytes(n int) int {
	bs, ts := t.blockInfo()
	if bs == 0 {
		return 0
	}
	return n / bs * ts
}

// QK is the number of elements in a K-quant super-block (Q2_K … Q8_K).
const QK = 256

// blockInfo returns elements per block and bytes per block, as the ggml
// block structs lay them out (little-endian, no padding).
func (t TensorType) blockInfo() (int, int) {
	switch t {
	case F32:
		return 1, 4
	case F16, BF16:
		return 1, 2
	case Q4_0:
		return 32, 2 + 16 // d, 32 nibbles
	case Q4_1:
		return 32, 2 + 2 + 16 // d, m, 32 nibbles
	case Q5_0:
		return 32, 2 + 4 + 16 // d, 32 fifth bits, 32 nibbles
	case Q5_1:
		return 32, 2 + 2 + 4 + 16 // d, m, 32 fifth bits, 32 nibbles
	case Q8_0:
		return 32, 2 + 32 // d, 32 int8
	case Q8_1:
		return 32, 2 + 2 + 32 // d, s = d·Σq, 32 int8
	case Q2_K:
		return QK, 16 + 64 + 2 + 2 // 16 scale|min nibble pairs, 256 crumbs, d, dmin
	case Q3_K:
		return QK, 32 + 64 + 12 + 2 // high bits, 256 crumbs, 16 6-bit scales, d
	case Q4_K:
		return QK, 2 + 2 + 12 + 128 // d, dmin, 8 6-bit scale/min pairs, 256 nibbles
	case Q5_K:
		return QK, 2 + 2 + 12 + 32 + 128 // d, dmin, scales/mins, fifth bits, nibbles
	case Q6_K:
		return QK, 128 + 64 + 16 + 2 // low nibbles, high crumbs, 16 int8 scales, d
	case Q8_K:
		return QK, 4 + 256 + 32 // float32 d, 256 int8, 16 int16 group sums
	}
	return 0, 0
}
