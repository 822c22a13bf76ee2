package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TensorType is a ggml tensor data type.
type TensorType uint32

// Tensor types. Only F32, F16, BF16, Q8_0 and Q4_0 can be read; the others
// are named so errors can say what a file holds.
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
	BF16 TensorType = 30
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

// RowBytes is the size in bytes of n elements (n a multiple of BlockSize).
func (t TensorType) RowBytes(n int) int {
	bs, ts := t.blockInfo()
	if bs == 0 {
		return 0
	}
	return n / bs * ts
}

// blockInfo returns elements per block and bytes per block.
func (t TensorType) blockInfo() (int, int) {
	switch t {
	case F32:
		return 1, 4
	case F16, BF16:
		return 1, 2
	case Q8_0:
		return 32, 34
	case Q4_0:
		return 32, 18
	}
	return 0, 0
}

// Dequantize converts n = len(dst) elements of type t from src into dst.
// len(dst) must be a multiple of the block size and src must hold at least
// RowBytes(len(dst)) bytes.
func Dequantize(t TensorType, dst []float32, src []byte) error {
	need := t.RowBytes(len(dst))
	if !t.Supported() {
		return fmt.Errorf("%w: tensor type %s", ErrUnsupported, t)
	}
	if len(dst)%t.BlockSize() != 0 || len(src) < need {
		return fmt.Errorf("%w: %d %s elements need %d bytes, have %d", ErrFormat, len(dst), t, need, len(src))
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*34 : b*34+34]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			out := dst[b*32 : b*32+32]
			for j := range 32 {
				out[j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*18 : b*18+18]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			out := dst[b*32 : b*32+32]
			for j := range 16 {
				q := blk[2+j]
				out[j] = float32(int(q&0x0f)-8) * d
				out[j+16] = float32(int(q>>4)-8) * d
			}
		}
	}
	return nil
}

// F16ToF32 converts an IEEE 754 half-precision value to float32.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 converts a float32 to half precision, rounding to nearest even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // inf or nan
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// F32ToBF16 converts a float32 to bfloat16, rounding to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Quantize encodes src (len a multiple of the block size) as type t, the
// way ggml's reference quantisers do. It is meant for tests and tools.
func Quantize(t TensorType, src []float32) ([]byte, error) {
	if !t.Supported() {
		return nil, fmt.Errorf("%w: tensor type %s", ErrUnsupported, t)
	}
	if len(src)%t.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: %d elements not a multiple of %d", ErrFormat, len(src), t.BlockSize())
	}
	out := make([]byte, t.RowBytes(len(src)))
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			x := src[b*32 : b*32+32]
			amax := float32(0)
			for _, v := range x {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			id := float32(0)
			if d != 0 {
				id = 1 / d
			}
			blk := out[b*34:]
			binary.LittleEndian.PutUint16(blk, F32ToF16(d))
			for j, v := range x {
				blk[2+j] = byte(int8(math.RoundToEven(float64(v * id))))
			}
		}
	case Q4_0:
		for b := 0; b < len(src)/32; b++ {
			x := src[b*32 : b*32+32]
			amax, mx := float32(0), float32(0)
			for _, v := range x {
				if a := float32(math.Abs(float64(v))); a > amax {
					amax, mx = a, v
				}
			}
			d := mx / -8
			id := float32(0)
			if d != 0 {
				id = 1 / d
			}
			blk := out[b*18:]
			binary.LittleEndian.PutUint16(blk, F32ToF16(d))
			for j := range 16 {
				q0 := min(15, int(x[j]*id+8.5))
				q1 := min(15, int(x[j+16]*id+8.5))
				blk[2+j] = byte(q0) | byte(q1)<<4
			}
		}
	}
	return out, nil
}
