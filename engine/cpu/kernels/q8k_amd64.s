//go:build amd64

#include "textflag.h"
#include "quant_amd64.h"

// func q8kQuantize(x *float32, nb int, dst *byte, n int)
// quantises nb blocks of 256 values at x into an ActQ8K row of n values
// at dst, as QuantizeRow does (see quant_amd64.h), and sums each 16 values
// by a tree over the sixteen vectors of a block (one vector per 16 values).
// Registers: SI values, DI quants, R8 scales, R9 sums, Z0-Z15 a block's
// values (then quants), Z16-Z23 and Z29 temporaries, Z24-Z28 constants.

// Q8K_ABSMAX(k) puts max(|Zk|, |Zk+8|) into Z(16+k).
#define Q8K_ABSMAX(zk, zk8, m) \
	VPANDD Z24, zk, m \
	VPANDD Z24, zk8, Z29 \
	VMAXPS Z29, m, m

// Q8K_VEC quantises the 16 values in z and stores their bytes at off(DI).
#define Q8K_VEC(z, off) \
	Q_ROUND(z, Z17, Z24, Z25, Z26, Z27, Z28, Z18, Z19, K1) \
	VMOVDQA32 Z19, z \
	VPMOVDB z, off(DI)

// Q8K_PAIRSUM(a, b, s) leaves in each 128-bit lane of s the sums of lanes
// 0+2 and 1+3 of a and b, interleaved; a is overwritten.
#define Q8K_PAIRSUM(a, b, s) \
	VPUNPCKLDQ b, a, s \
	VPUNPCKHDQ b, a, a \
	VPADDD a, s, s

// Q8K_QUADSUM(a, b, s, t) sums qword pairs of a and b per 128-bit lane.
#define Q8K_QUADSUM(a, b, s, t) \
	VPUNPCKLQDQ b, a, s \
	VPUNPCKHQDQ b, a, t \
	VPADDD t, s, s

// Q8K_LANESUM(a, b, s, t) sums 128-bit lanes 0+1 and 2+3 of a and b.
#define Q8K_LANESUM(a, b, s, t) \
	VSHUFI32X4 $0x88, b, a, s \
	VSHUFI32X4 $0xdd, b, a, t \
	VPADDD t, s, s

TEXT ·q8kQuantize(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ n+24(FP), AX
	LEAQ (DI)(AX*1), R8
	LEAQ (R8)(CX*4), R9
	Q_CONSTS(Z24, Z25, Z26, Z27)
	VPXORD Z28, Z28, Z28
	TESTQ CX, CX
	JZ done
block:
	Z_LOAD16(SI)
	Q8K_ABSMAX(Z0, Z8, Z16)
	Q8K_ABSMAX(Z1, Z9, Z17)
	Q8K_ABSMAX(Z2, Z10, Z18)
	Q8K_ABSMAX(Z3, Z11, Z19)
	Q8K_ABSMAX(Z4, Z12, Z20)
	Q8K_ABSMAX(Z5, Z13, Z21)
	Q8K_ABSMAX(Z6, Z14, Z22)
	Q8K_ABSMAX(Z7, Z15, Z23)
	VMAXPS Z17, Z16, Z16
	VMAXPS Z19, Z18, Z18
	VMAXPS Z21, Z20, Z20
	VMAXPS Z23, Z22, Z22
	VMAXPS Z18, Z16, Z16
	VMAXPS Z22, Z20, Z20
	VMAXPS Z20, Z16, Z16
	Q_HMAX(Z16, Y16, X16, Y17, X17)
	VXORPS X17, X17, X17
	VUCOMISS X17, X16
	JEQ zero
	VDIVSS X27, X16, X16 // d = amax/127
	VMOVSS X16, (R8)
	VDIVSS X16, X26, X17 // id = 1/d
	VBROADCASTSS X17, Z17
	Q8K_VEC(Z0, 0)
	Q8K_VEC(Z1, 16)
	Q8K_VEC(Z2, 32)
	Q8K_VEC(Z3, 48)
	Q8K_VEC(Z4, 64)
	Q8K_VEC(Z5, 80)
	Q8K_VEC(Z6, 96)
	Q8K_VEC(Z7, 112)
	Q8K_VEC(Z8, 128)
	Q8K_VEC(Z9, 144)
	Q8K_VEC(Z10, 160)
	Q8K_VEC(Z11, 176)
	Q8K_VEC(Z12, 192)
	Q8K_VEC(Z13, 208)
	Q8K_VEC(Z14, 224)
	Q8K_VEC(Z15, 240)
	Q8K_PAIRSUM(Z0, Z1, Z16)
	Q8K_PAIRSUM(Z2, Z3, Z17)
	Q8K_PAIRSUM(Z4, Z5, Z18)
	Q8K_PAIRSUM(Z6, Z7, Z19)
	Q8K_PAIRSUM(Z8, Z9, Z20)
	Q8K_PAIRSUM(Z10, Z11, Z21)
	Q8K_PAIRSUM(Z12, Z13, Z22)
	Q8K_PAIRSUM(Z14, Z15, Z23)
	Q8K_QUADSUM(Z16, Z17, Z0, Z4)
	Q8K_QUADSUM(Z18, Z19, Z1, Z5)
	Q8K_QUADSUM(Z20, Z21, Z2, Z6)
	Q8K_QUADSUM(Z22, Z23, Z3, Z7)
	Q8K_LANESUM(Z0, Z1, Z8, Z10)
	Q8K_LANESUM(Z2, Z3, Z9, Z11)
	Q8K_LANESUM(Z8, Z9, Z12, Z13)
	VPMOVDW Z12, (R9)
	JMP next
zero:
	VPXORD Z0, Z0, Z0
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU32 Z0, 64(DI)
	VMOVDQU32 Z0, 128(DI)
	VMOVDQU32 Z0, 192(DI)
	VMOVDQU Y0, (R9)
	MOVL $0, (R8)
next:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ block
done:
	VZEROUPPER
	RET
