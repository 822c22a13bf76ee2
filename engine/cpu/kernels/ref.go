package kernels

import (
	"encoding/binary"
	"math"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// levelKernels returns the kernels written for level l exactly (NewSet
// layers the levels). Each family of weight types adds its own.
func levelKernels(l Level) map[gguf.TensorType]Kernel {
	m := make(map[gguf.TensorType]Kernel)
	addLegacy(m, l)
	addKQuant(m, l)
	return m
}

// QuantizeRow writes x in form a to dst (a.RowBytes(len(x)) bytes);
// len(x) must be a multiple of a.Block(). Each block's scale is its largest
// magnitude over 127 and values round to the nearest integer, so the
// quantised values lie in [-127, 127].
func QuantizeRow(a Act, dst []byte, x []float32) {
	n := len(x)
	switch a {
	case ActF32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case ActQ8:
		nb := n / 32
		d, s := dst[n:n+4*nb], dst[n+4*nb:n+8*nb]
		for b := range nb {
			sc, sum := quantizeBlock(dst[b*32:(b+1)*32], x[b*32:(b+1)*32])
			binary.LittleEndian.PutUint32(d[4*b:], math.Float32bits(sc))
			binary.LittleEndian.PutUint32(s[4*b:], math.Float32bits(sc*float32(sum)))
		}
	case ActQ8K:
		nb := n / 256
		d, bs := dst[n:n+4*nb], dst[n+4*nb:n+4*nb+2*(n/16)]
		for b := range nb {
			q := dst[b*256 : (b+1)*256]
			sc, _ := quantizeBlock(q, x[b*256:(b+1)*256])
			binary.LittleEndian.PutUint32(d[4*b:], math.Float32bits(sc))
			for g := range 16 {
				var sum int16
				for _, v := range q[16*g : 16*g+16] {
					sum += int16(int8(v))
				}
				binary.LittleEndian.PutUint16(bs[2*(16*b+g):], uint16(sum))
			}
		}
	}
}

// quantizeBlock quantises x into q with one scale and returns the scale and
// the sum of the quantised values.
func quantizeBlock(q []byte, x []float32) (float32, int32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		clear(q)
		return 0, 0
	}
	d := amax / 127
	id := 1 / d
	var sum int32
	for i, v := range x {
		iv := int32(math.Round(float64(v * id)))
		iv = max(-127, min(127, iv))
		q[i] = byte(int8(iv))
		sum += iv
	}
	return d, sum
}

// f32At reads the little-endian float32 at b[4*i:].
func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// f16At reads the little-endian half-precision value at b[off:].
func f16At(b []byte, off int) float32 {
	return gguf.F16ToF32(binary.LittleEndian.Uint16(b[off:]))
}

// mulQ8_0Ref is the reference Q8_0 kernel: per block, the integer dot
// product of the 32 weights and activations, scaled by the weight and
// activation scales, summed over blocks in order.
func mulQ8_0Ref(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	nb := n / 32
	for c := range cols {
		act := a[c*aStride:]
		for r := range rows {
			wr := w[r*wStride:]
			var acc float32
			for b := range nb {
				blk := wr[b*34 : b*34+34]
				q := act[b*32 : b*32+32]
				var isum int32
				for j := range 32 {
					isum += int32(int8(blk[2+j])) * int32(int8(q[j]))
				}
				acc += f16At(blk, 0) * f32At(act[n:], b) * float32(isum)
			}
			out[c*outStride+r] = acc
		}
	}
}
