package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

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
