//go:build amd64

#include "textflag.h"

// K-quant kernels for AVX-512 (F, BW, VL, VNNI, VBMI).
//
// func kq<T>AVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
//
// For each weight row, each super-block is decoded once into registers and
// multiplied against every activation column. Every column follows the same
// instruction sequence, so an output's bits do not depend on the call.
//
// Decoded super-block (the common form of kquant.go):
//	Z0-Z3   u, values 64k..64k+63 in chunk k (unsigned bytes)
//	Z4-Z7   per chunk, the scale of each word pair's 16-value group (int16)
//	Y8      mn, one per 16-value group (int16)
//	Z9, Z10 d and dm, broadcast
// Per column and super-block, in 16 int32 lanes (lane L holds values
// 64k+4L..64k+4L+3 of every chunk k):
//	S = Σ_k sc·(u·q pairs)    (VPMADDUBSW, then VPMADDWD/VPDPWSSD)
//	M = mn·bsums pairs         (8 lanes)
//	t = float(S)·d; t[0:8] −= float(M)·dm; acc += t·da
// and at the end of the row the 16 lanes of acc are summed in a fixed tree.
//
// Registers: DI super-block, R14 row start, R8 rows left, R9 super-blocks
// left, R10 aStride, R11 columns left, R12 output, R13 outStride in bytes,
// SI column's activations, DX column's accumulator slot (scratch), AX/BX/CX
// offsets of the super-block's values, scale and bsums in an activation row.
// Z31 holds 0x0f bytes, K1 the eight M lanes, K2 the upper 256 bits (words).

#define KQ_PROLOGUE \
	MOVQ w+0(FP), R14 \
	MOVQ rows+16(FP), R8 \
	MOVQ aStride+40(FP), R10 \
	MOVQ out+56(FP), R12 \
	MOVQ outStride+64(FP), R13 \
	SHLQ $2, R13 \
	MOVL $0xff, AX \
	KMOVW AX, K1 \
	MOVL $0xffff0000, AX \
	KMOVD AX, K2 \
	MOVL $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z31

// KQ_ROW_START clears the accumulators of every column and points the
// offsets at the row's first super-block.
#define KQ_ROW_START \
	MOVQ scratch+72(FP), DX \
	MOVQ cols+48(FP), R11 \
	VPXORD Z11, Z11, Z11 \
clear: \
	VMOVUPS Z11, (DX) \
	ADDQ $64, DX \
	DECQ R11 \
	JNZ clear \
	MOVQ R14, DI \
	XORQ AX, AX \
	MOVQ n+24(FP), BX \
	MOVQ BX, R9 \
	SHRQ $8, R9 \
	LEAQ (BX)(R9*4), CX

// KQ_COLUMNS multiplies the decoded super-block against every column.
#define KQ_COLUMNS \
	MOVQ a+32(FP), SI \
	MOVQ scratch+72(FP), DX \
	MOVQ cols+48(FP), R11 \
column: \
	VPMADDUBSW 0(SI)(AX*1), Z0, Z12 \
	VPMADDUBSW 64(SI)(AX*1), Z1, Z13 \
	VPMADDUBSW 128(SI)(AX*1), Z2, Z14 \
	VPMADDUBSW 192(SI)(AX*1), Z3, Z15 \
	VPMADDWD Z4, Z12, Z12 \
	VPMADDWD Z5, Z13, Z13 \
	VPDPWSSD Z6, Z14, Z12 \
	VPDPWSSD Z7, Z15, Z13 \
	VPADDD Z13, Z12, Z12 \
	VPMADDWD 0(SI)(CX*1), Y8, Y16 \
	VCVTDQ2PS Z12, Z12 \
	VCVTDQ2PS Y16, Y16 \
	VMULPS Z9, Z12, Z12 \
	VFNMADD231PS Z10, Z16, K1, Z12 \
	VMOVUPS (DX), Z11 \
	VFMADD231PS.BCST 0(SI)(BX*1), Z12, Z11 \
	VMOVUPS Z11, (DX) \
	ADDQ R10, SI \
	ADDQ $64, DX \
	DECQ R11 \
	JNZ column

// KQ_NEXT_BLOCK steps to the next super-block of bytes size.
#define KQ_NEXT_BLOCK(size) \
	ADDQ $size, DI \
	ADDQ $256, AX \
	ADDQ $4, BX \
	ADDQ $32, CX \
	DECQ R9 \
	JNZ block

// KQ_ROW_END sums each column's lanes, stores the outputs and steps to the
// next row.
#define KQ_ROW_END \
	MOVQ scratch+72(FP), DX \
	MOVQ cols+48(FP), R11 \
	MOVQ R12, SI \
sum: \
	VMOVUPS (DX), Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS Y1, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0x4e, X0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0xb1, X0, X1 \
	VADDSS X1, X0, X0 \
	VMOVSS X0, (SI) \
	ADDQ R13, SI \
	ADDQ $64, DX \
	DECQ R11 \
	JNZ sum \
	ADDQ wStride+8(FP), R14 \
	ADDQ $4, R12 \
	DECQ R8 \
	JNZ row \
	VZEROUPPER \
	RET

// KQ_HALVES broadcasts the half-precision values at off1 and off2 of the
// super-block into Z9 and Z10.
#define KQ_HALVES(off1, off2) \
	VPBROADCASTW off1(DI), Y9 \
	VCVTPH2PS Y9, Z9 \
	VPBROADCASTW off2(DI), Y10 \
	VCVTPH2PS Y10, Z10

// KQ_SCALES16 expands the table of 16 group scales (words) in Z21 into the
// per-chunk scale vectors.
#define KQ_SCALES16 \
	VMOVDQU64 kq512idx16<>+0(SB), Z4 \
	VPERMW Z21, Z4, Z4 \
	VMOVDQU64 kq512idx16<>+64(SB), Z5 \
	VPERMW Z21, Z5, Z5 \
	VMOVDQU64 kq512idx16<>+128(SB), Z6 \
	VPERMW Z21, Z6, Z6 \
	VMOVDQU64 kq512idx16<>+192(SB), Z7 \
	VPERMW Z21, Z7, Z7

// KQ_PLANES2(off) puts the 2-bit planes of the 64 bytes at off (Q2_K and
// Q3_K qs) in Z0-Z3: chunk 2h+j/2 takes planes j (lower 32) and j+1 (upper)
// of bytes 32h..32h+31.
#define KQ_PLANES2(off) \
	VMOVDQU64 kq512q2ctl<>+0(SB), Z24 \
	VMOVDQU64 kq512q2ctl<>+64(SB), Z25 \
	VBROADCASTI64X4 off(DI), Z22 \
	VBROADCASTI64X4 off+32(DI), Z23 \
	VPMULTISHIFTQB Z22, Z24, Z0 \
	VPMULTISHIFTQB Z22, Z25, Z1 \
	VPMULTISHIFTQB Z23, Z24, Z2 \
	VPMULTISHIFTQB Z23, Z25, Z3 \
	VPANDD.BCST kq512c03<>(SB), Z0, Z0 \
	VPANDD.BCST kq512c03<>(SB), Z1, Z1 \
	VPANDD.BCST kq512c03<>(SB), Z2, Z2 \
	VPANDD.BCST kq512c03<>(SB), Z3, Z3

// KQ_HIGHBIT(chunk, ctl, bit) ors into chunk the bits its multishift
// control brings from Z22 to the position of the constant bit.
#define KQ_HIGHBIT(chunk, ctl, bit) \
	VMOVDQU64 ctl, Z24 \
	VPMULTISHIFTQB Z22, Z24, Z24 \
	VPTERNLOGD.BCST $0xf8, bit, Z24, chunk

// KQ_NIBBLES(off) puts the nibbles of the 128 bytes at off (Q4_K and Q5_K
// qs) in Z0-Z3: chunk k is the low nibbles of bytes 32k..32k+31, then their
// high nibbles.
#define KQ_NIBBLES(off) \
	VBROADCASTI64X4 off(DI), Z0 \
	VBROADCASTI64X4 off+32(DI), Z1 \
	VBROADCASTI64X4 off+64(DI), Z2 \
	VBROADCASTI64X4 off+96(DI), Z3 \
	VPSRLW $4, Z0, K2, Z0 \
	VPSRLW $4, Z1, K2, Z1 \
	VPSRLW $4, Z2, K2, Z2 \
	VPSRLW $4, Z3, K2, Z3 \
	VPANDD Z31, Z0, Z0 \
	VPANDD Z31, Z1, Z1 \
	VPANDD Z31, Z2, Z2 \
	VPANDD Z31, Z3, Z3

// KQ_Q4SCALES decodes the 8 scales and 8 mins of Q4_K and Q5_K (6 bits
// each, 12 bytes at offset 4) into the scale vectors and mn.
#define KQ_Q4SCALES \
	VMOVDQU64 4(DI), X20 \
	VPSHUFB kq512q4shuf<>+0(SB), X20, X21 \
	VPSHUFB kq512q4shuf<>+16(SB), X20, X22 \
	VPSRLW $4, X21, K3, X21 \
	VPANDD kq512q4mask<>(SB), X21, X21 \
	VPSRLW $2, X22, X22 \
	VPTERNLOGD.BCST $0xf8, kq512c30<>(SB), X22, X21 \
	VPMOVZXBW X21, Y21 \
	VMOVDQU64 kq512idx32<>+0(SB), Z4 \
	VPERMW Z21, Z4, Z4 \
	VMOVDQU64 kq512idx32<>+64(SB), Z5 \
	VPERMW Z21, Z5, Z5 \
	VMOVDQU64 kq512idx32<>+128(SB), Z6 \
	VPERMW Z21, Z6, Z6 \
	VMOVDQU64 kq512idx32<>+192(SB), Z7 \
	VPERMW Z21, Z7, Z7 \
	VMOVDQU kq512idxmin32<>(SB), Y8 \
	VPERMW Y21, Y8, Y8

// word p of chunk k: the scale of group 4k+p/8 (one scale per 16 values)
DATA kq512idx16<>+0(SB)/8, $0x0000000000000000
DATA kq512idx16<>+8(SB)/8, $0x0000000000000000
DATA kq512idx16<>+16(SB)/8, $0x0001000100010001
DATA kq512idx16<>+24(SB)/8, $0x0001000100010001
DATA kq512idx16<>+32(SB)/8, $0x0002000200020002
DATA kq512idx16<>+40(SB)/8, $0x0002000200020002
DATA kq512idx16<>+48(SB)/8, $0x0003000300030003
DATA kq512idx16<>+56(SB)/8, $0x0003000300030003
DATA kq512idx16<>+64(SB)/8, $0x0004000400040004
DATA kq512idx16<>+72(SB)/8, $0x0004000400040004
DATA kq512idx16<>+80(SB)/8, $0x0005000500050005
DATA kq512idx16<>+88(SB)/8, $0x0005000500050005
DATA kq512idx16<>+96(SB)/8, $0x0006000600060006
DATA kq512idx16<>+104(SB)/8, $0x0006000600060006
DATA kq512idx16<>+112(SB)/8, $0x0007000700070007
DATA kq512idx16<>+120(SB)/8, $0x0007000700070007
DATA kq512idx16<>+128(SB)/8, $0x0008000800080008
DATA kq512idx16<>+136(SB)/8, $0x0008000800080008
DATA kq512idx16<>+144(SB)/8, $0x0009000900090009
DATA kq512idx16<>+152(SB)/8, $0x0009000900090009
DATA kq512idx16<>+160(SB)/8, $0x000a000a000a000a
DATA kq512idx16<>+168(SB)/8, $0x000a000a000a000a
DATA kq512idx16<>+176(SB)/8, $0x000b000b000b000b
DATA kq512idx16<>+184(SB)/8, $0x000b000b000b000b
DATA kq512idx16<>+192(SB)/8, $0x000c000c000c000c
DATA kq512idx16<>+200(SB)/8, $0x000c000c000c000c
DATA kq512idx16<>+208(SB)/8, $0x000d000d000d000d
DATA kq512idx16<>+216(SB)/8, $0x000d000d000d000d
DATA kq512idx16<>+224(SB)/8, $0x000e000e000e000e
DATA kq512idx16<>+232(SB)/8, $0x000e000e000e000e
DATA kq512idx16<>+240(SB)/8, $0x000f000f000f000f
DATA kq512idx16<>+248(SB)/8, $0x000f000f000f000f
GLOBL kq512idx16<>(SB), RODATA|NOPTR, $256

// word p of chunk k: the scale of sub-block 2k+p/16 (one scale per 32 values)
DATA kq512idx32<>+0(SB)/8, $0x0000000000000000
DATA kq512idx32<>+8(SB)/8, $0x0000000000000000
DATA kq512idx32<>+16(SB)/8, $0x0000000000000000
DATA kq512idx32<>+24(SB)/8, $0x0000000000000000
DATA kq512idx32<>+32(SB)/8, $0x0001000100010001
DATA kq512idx32<>+40(SB)/8, $0x0001000100010001
DATA kq512idx32<>+48(SB)/8, $0x0001000100010001
DATA kq512idx32<>+56(SB)/8, $0x0001000100010001
DATA kq512idx32<>+64(SB)/8, $0x0002000200020002
DATA kq512idx32<>+72(SB)/8, $0x0002000200020002
DATA kq512idx32<>+80(SB)/8, $0x0002000200020002
DATA kq512idx32<>+88(SB)/8, $0x0002000200020002
DATA kq512idx32<>+96(SB)/8, $0x0003000300030003
DATA kq512idx32<>+104(SB)/8, $0x0003000300030003
DATA kq512idx32<>+112(SB)/8, $0x0003000300030003
DATA kq512idx32<>+120(SB)/8, $0x0003000300030003
DATA kq512idx32<>+128(SB)/8, $0x0004000400040004
DATA kq512idx32<>+136(SB)/8, $0x0004000400040004
DATA kq512idx32<>+144(SB)/8, $0x0004000400040004
DATA kq512idx32<>+152(SB)/8, $0x0004000400040004
DATA kq512idx32<>+160(SB)/8, $0x0005000500050005
DATA kq512idx32<>+168(SB)/8, $0x0005000500050005
DATA kq512idx32<>+176(SB)/8, $0x0005000500050005
DATA kq512idx32<>+184(SB)/8, $0x0005000500050005
DATA kq512idx32<>+192(SB)/8, $0x0006000600060006
DATA kq512idx32<>+200(SB)/8, $0x0006000600060006
DATA kq512idx32<>+208(SB)/8, $0x0006000600060006
DATA kq512idx32<>+216(SB)/8, $0x0006000600060006
DATA kq512idx32<>+224(SB)/8, $0x0007000700070007
DATA kq512idx32<>+232(SB)/8, $0x0007000700070007
DATA kq512idx32<>+240(SB)/8, $0x0007000700070007
DATA kq512idx32<>+248(SB)/8, $0x0007000700070007
GLOBL kq512idx32<>(SB), RODATA|NOPTR, $256

// word g: the min of sub-block g/2, mins at words 8-15
DATA kq512idxmin32<>+0(SB)/8, $0x0009000900080008
DATA kq512idxmin32<>+8(SB)/8, $0x000b000b000a000a
DATA kq512idxmin32<>+16(SB)/8, $0x000d000d000c000c
DATA kq512idxmin32<>+24(SB)/8, $0x000f000f000e000e
GLOBL kq512idxmin32<>(SB), RODATA|NOPTR, $32

// Q2_K/Q3_K: the 2-bit planes of chunks 2h and 2h+1 to bits 0-1
DATA kq512q2ctl<>+0(SB)/8, $0x3830282018100800
DATA kq512q2ctl<>+8(SB)/8, $0x3830282018100800
DATA kq512q2ctl<>+16(SB)/8, $0x3830282018100800
DATA kq512q2ctl<>+24(SB)/8, $0x3830282018100800
DATA kq512q2ctl<>+32(SB)/8, $0x3a322a221a120a02
DATA kq512q2ctl<>+40(SB)/8, $0x3a322a221a120a02
DATA kq512q2ctl<>+48(SB)/8, $0x3a322a221a120a02
DATA kq512q2ctl<>+56(SB)/8, $0x3a322a221a120a02
DATA kq512q2ctl<>+64(SB)/8, $0x3c342c241c140c04
DATA kq512q2ctl<>+72(SB)/8, $0x3c342c241c140c04
DATA kq512q2ctl<>+80(SB)/8, $0x3c342c241c140c04
DATA kq512q2ctl<>+88(SB)/8, $0x3c342c241c140c04
DATA kq512q2ctl<>+96(SB)/8, $0x3e362e261e160e06
DATA kq512q2ctl<>+104(SB)/8, $0x3e362e261e160e06
DATA kq512q2ctl<>+112(SB)/8, $0x3e362e261e160e06
DATA kq512q2ctl<>+120(SB)/8, $0x3e362e261e160e06
GLOBL kq512q2ctl<>(SB), RODATA|NOPTR, $128

// Q3_K: hmask bits 2k, 2k+1 of chunk k to bit 2
DATA kq512q3hctl<>+0(SB)/8, $0x362e261e160e063e
DATA kq512q3hctl<>+8(SB)/8, $0x362e261e160e063e
DATA kq512q3hctl<>+16(SB)/8, $0x362e261e160e063e
DATA kq512q3hctl<>+24(SB)/8, $0x362e261e160e063e
DATA kq512q3hctl<>+32(SB)/8, $0x372f271f170f073f
DATA kq512q3hctl<>+40(SB)/8, $0x372f271f170f073f
DATA kq512q3hctl<>+48(SB)/8, $0x372f271f170f073f
DATA kq512q3hctl<>+56(SB)/8, $0x372f271f170f073f
DATA kq512q3hctl<>+64(SB)/8, $0x3830282018100800
DATA kq512q3hctl<>+72(SB)/8, $0x3830282018100800
DATA kq512q3hctl<>+80(SB)/8, $0x3830282018100800
DATA kq512q3hctl<>+88(SB)/8, $0x3830282018100800
DATA kq512q3hctl<>+96(SB)/8, $0x3931292119110901
DATA kq512q3hctl<>+104(SB)/8, $0x3931292119110901
DATA kq512q3hctl<>+112(SB)/8, $0x3931292119110901
DATA kq512q3hctl<>+120(SB)/8, $0x3931292119110901
DATA kq512q3hctl<>+128(SB)/8, $0x3a322a221a120a02
DATA kq512q3hctl<>+136(SB)/8, $0x3a322a221a120a02
DATA kq512q3hctl<>+144(SB)/8, $0x3a322a221a120a02
DATA kq512q3hctl<>+152(SB)/8, $0x3a322a221a120a02
DATA kq512q3hctl<>+160(SB)/8, $0x3b332b231b130b03
DATA kq512q3hctl<>+168(SB)/8, $0x3b332b231b130b03
DATA kq512q3hctl<>+176(SB)/8, $0x3b332b231b130b03
DATA kq512q3hctl<>+184(SB)/8, $0x3b332b231b130b03
DATA kq512q3hctl<>+192(SB)/8, $0x3c342c241c140c04
DATA kq512q3hctl<>+200(SB)/8, $0x3c342c241c140c04
DATA kq512q3hctl<>+208(SB)/8, $0x3c342c241c140c04
DATA kq512q3hctl<>+216(SB)/8, $0x3c342c241c140c04
DATA kq512q3hctl<>+224(SB)/8, $0x3d352d251d150d05
DATA kq512q3hctl<>+232(SB)/8, $0x3d352d251d150d05
DATA kq512q3hctl<>+240(SB)/8, $0x3d352d251d150d05
DATA kq512q3hctl<>+248(SB)/8, $0x3d352d251d150d05
GLOBL kq512q3hctl<>(SB), RODATA|NOPTR, $256

// Q5_K: qh bits 2k, 2k+1 of chunk k to bit 4
DATA kq512q5hctl<>+0(SB)/8, $0x342c241c140c043c
DATA kq512q5hctl<>+8(SB)/8, $0x342c241c140c043c
DATA kq512q5hctl<>+16(SB)/8, $0x342c241c140c043c
DATA kq512q5hctl<>+24(SB)/8, $0x342c241c140c043c
DATA kq512q5hctl<>+32(SB)/8, $0x352d251d150d053d
DATA kq512q5hctl<>+40(SB)/8, $0x352d251d150d053d
DATA kq512q5hctl<>+48(SB)/8, $0x352d251d150d053d
DATA kq512q5hctl<>+56(SB)/8, $0x352d251d150d053d
DATA kq512q5hctl<>+64(SB)/8, $0x362e261e160e063e
DATA kq512q5hctl<>+72(SB)/8, $0x362e261e160e063e
DATA kq512q5hctl<>+80(SB)/8, $0x362e261e160e063e
DATA kq512q5hctl<>+88(SB)/8, $0x362e261e160e063e
DATA kq512q5hctl<>+96(SB)/8, $0x372f271f170f073f
DATA kq512q5hctl<>+104(SB)/8, $0x372f271f170f073f
DATA kq512q5hctl<>+112(SB)/8, $0x372f271f170f073f
DATA kq512q5hctl<>+120(SB)/8, $0x372f271f170f073f
DATA kq512q5hctl<>+128(SB)/8, $0x3830282018100800
DATA kq512q5hctl<>+136(SB)/8, $0x3830282018100800
DATA kq512q5hctl<>+144(SB)/8, $0x3830282018100800
DATA kq512q5hctl<>+152(SB)/8, $0x3830282018100800
DATA kq512q5hctl<>+160(SB)/8, $0x3931292119110901
DATA kq512q5hctl<>+168(SB)/8, $0x3931292119110901
DATA kq512q5hctl<>+176(SB)/8, $0x3931292119110901
DATA kq512q5hctl<>+184(SB)/8, $0x3931292119110901
DATA kq512q5hctl<>+192(SB)/8, $0x3a322a221a120a02
DATA kq512q5hctl<>+200(SB)/8, $0x3a322a221a120a02
DATA kq512q5hctl<>+208(SB)/8, $0x3a322a221a120a02
DATA kq512q5hctl<>+216(SB)/8, $0x3a322a221a120a02
DATA kq512q5hctl<>+224(SB)/8, $0x3b332b231b130b03
DATA kq512q5hctl<>+232(SB)/8, $0x3b332b231b130b03
DATA kq512q5hctl<>+240(SB)/8, $0x3b332b231b130b03
DATA kq512q5hctl<>+248(SB)/8, $0x3b332b231b130b03
GLOBL kq512q5hctl<>(SB), RODATA|NOPTR, $256

// Q6_K: the 2-bit qh planes of chunks 2h and 2h+1 to bits 4-5
DATA kq512q6hctl<>+0(SB)/8, $0x342c241c140c043c
DATA kq512q6hctl<>+8(SB)/8, $0x342c241c140c043c
DATA kq512q6hctl<>+16(SB)/8, $0x342c241c140c043c
DATA kq512q6hctl<>+24(SB)/8, $0x342c241c140c043c
DATA kq512q6hctl<>+32(SB)/8, $0x362e261e160e063e
DATA kq512q6hctl<>+40(SB)/8, $0x362e261e160e063e
DATA kq512q6hctl<>+48(SB)/8, $0x362e261e160e063e
DATA kq512q6hctl<>+56(SB)/8, $0x362e261e160e063e
DATA kq512q6hctl<>+64(SB)/8, $0x3830282018100800
DATA kq512q6hctl<>+72(SB)/8, $0x3830282018100800
DATA kq512q6hctl<>+80(SB)/8, $0x3830282018100800
DATA kq512q6hctl<>+88(SB)/8, $0x3830282018100800
DATA kq512q6hctl<>+96(SB)/8, $0x3a322a221a120a02
DATA kq512q6hctl<>+104(SB)/8, $0x3a322a221a120a02
DATA kq512q6hctl<>+112(SB)/8, $0x3a322a221a120a02
DATA kq512q6hctl<>+120(SB)/8, $0x3a322a221a120a02
GLOBL kq512q6hctl<>(SB), RODATA|NOPTR, $128

// Q4_K/Q5_K scales: s0-3, s8-11, s4-7, s8-11; then the top bits s0-3 (for scales 4-7), s4-7 (for mins 4-7)
DATA kq512q4shuf<>+0(SB)/8, $0x0b0a090803020100
DATA kq512q4shuf<>+8(SB)/8, $0x0b0a090807060504
DATA kq512q4shuf<>+16(SB)/8, $0x0302010080808080
DATA kq512q4shuf<>+24(SB)/8, $0x0706050480808080
GLOBL kq512q4shuf<>(SB), RODATA|NOPTR, $32

// Q4_K/Q5_K: low bits kept of each scale and min
DATA kq512q4mask<>+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA kq512q4mask<>+8(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL kq512q4mask<>(SB), RODATA|NOPTR, $16

// Q3_K scales: s0-7 twice (low nibbles, high nibbles); s8-11 four times
DATA kq512q3shuf<>+0(SB)/8, $0x0908070605040302
DATA kq512q3shuf<>+8(SB)/8, $0x0908070605040302
DATA kq512q3shuf<>+16(SB)/8, $0x0d0c0b0a0d0c0b0a
DATA kq512q3shuf<>+24(SB)/8, $0x0d0c0b0a0d0c0b0a
GLOBL kq512q3shuf<>(SB), RODATA|NOPTR, $32

// Q3_K: bits 2(g/4), +1 of byte g to bits 4-5
DATA kq512q3sctl<>+0(SB)/8, $0x362e261e140c043c
DATA kq512q3sctl<>+8(SB)/8, $0x3a322a2218100800
GLOBL kq512q3sctl<>(SB), RODATA|NOPTR, $16

// 0x03 bytes (broadcast)
DATA kq512c03<>+0(SB)/4, $0x03030303
GLOBL kq512c03<>(SB), RODATA|NOPTR, $4

// 0x04 bytes (broadcast)
DATA kq512c04<>+0(SB)/4, $0x04040404
GLOBL kq512c04<>(SB), RODATA|NOPTR, $4

// 0x10 bytes (broadcast)
DATA kq512c10<>+0(SB)/4, $0x10101010
GLOBL kq512c10<>(SB), RODATA|NOPTR, $4

// 0x30 bytes (broadcast)
DATA kq512c30<>+0(SB)/4, $0x30303030
GLOBL kq512c30<>(SB), RODATA|NOPTR, $4

// 0x20 bytes
DATA kq512c20<>+0(SB)/8, $0x2020202020202020
DATA kq512c20<>+8(SB)/8, $0x2020202020202020
GLOBL kq512c20<>(SB), RODATA|NOPTR, $16

// func kqQ2KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ2KAVX512(SB), NOSPLIT, $0-80
	KQ_PROLOGUE
row:
	KQ_ROW_START
block:
	KQ_HALVES(80, 82)
	KQ_PLANES2(16)
	VMOVDQU64 0(DI), X20
	VPANDD X31, X20, X21
	VPSRLW $4, X20, X22
	VPANDD X31, X22, X22
	VPMOVZXBW X21, Y21
	VPMOVZXBW X22, Y8
	KQ_SCALES16
	KQ_COLUMNS
	KQ_NEXT_BLOCK(84)
	KQ_ROW_END

// func kqQ3KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ3KAVX512(SB), NOSPLIT, $0-80
	KQ_PROLOGUE
	MOVL $0xf0, AX
	KMOVW AX, K3
row:
	KQ_ROW_START
block:
	KQ_HALVES(108, 108)
	KQ_PLANES2(32)
	VBROADCASTI64X4 0(DI), Z22
	KQ_HIGHBIT(Z0, kq512q3hctl<>+0(SB), kq512c04<>(SB))
	KQ_HIGHBIT(Z1, kq512q3hctl<>+64(SB), kq512c04<>(SB))
	KQ_HIGHBIT(Z2, kq512q3hctl<>+128(SB), kq512c04<>(SB))
	KQ_HIGHBIT(Z3, kq512q3hctl<>+192(SB), kq512c04<>(SB))
	VMOVDQU64 94(DI), X20
	VPSHUFB kq512q3shuf<>+0(SB), X20, X21
	VPSHUFB kq512q3shuf<>+16(SB), X20, X22
	VPSRLW $4, X21, K3, X21
	VPANDD X31, X21, X21
	VMOVDQU64 kq512q3sctl<>(SB), X23
	VPMULTISHIFTQB X22, X23, X22
	VPTERNLOGD.BCST $0xf8, kq512c30<>(SB), X22, X21
	VPSUBB kq512c20<>(SB), X21, X21
	VPMOVSXBW X21, Y21
	VPSLLW $2, Y21, Y8
	KQ_SCALES16
	KQ_COLUMNS
	KQ_NEXT_BLOCK(110)
	KQ_ROW_END

// func kqQ4KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ4KAVX512(SB), NOSPLIT, $0-80
	KQ_PROLOGUE
	MOVL $0xc0, AX
	KMOVW AX, K3
row:
	KQ_ROW_START
block:
	KQ_HALVES(0, 2)
	KQ_Q4SCALES
	KQ_NIBBLES(16)
	KQ_COLUMNS
	KQ_NEXT_BLOCK(144)
	KQ_ROW_END

// func kqQ5KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ5KAVX512(SB), NOSPLIT, $0-80
	KQ_PROLOGUE
	MOVL $0xc0, AX
	KMOVW AX, K3
row:
	KQ_ROW_START
block:
	KQ_HALVES(0, 2)
	KQ_Q4SCALES
	KQ_NIBBLES(48)
	VBROADCASTI64X4 16(DI), Z22
	KQ_HIGHBIT(Z0, kq512q5hctl<>+0(SB), kq512c10<>(SB))
	KQ_HIGHBIT(Z1, kq512q5hctl<>+64(SB), kq512c10<>(SB))
	KQ_HIGHBIT(Z2, kq512q5hctl<>+128(SB), kq512c10<>(SB))
	KQ_HIGHBIT(Z3, kq512q5hctl<>+192(SB), kq512c10<>(SB))
	KQ_COLUMNS
	KQ_NEXT_BLOCK(176)
	KQ_ROW_END

// func kqQ6KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ6KAVX512(SB), NOSPLIT, $0-80
	KQ_PROLOGUE
row:
	KQ_ROW_START
block:
	KQ_HALVES(208, 208)
	VMOVDQU64 0(DI), Z0
	VPSRLW $4, Z0, Z1
	VMOVDQU64 64(DI), Z2
	VPSRLW $4, Z2, Z3
	VPANDD Z31, Z0, Z0
	VPANDD Z31, Z1, Z1
	VPANDD Z31, Z2, Z2
	VPANDD Z31, Z3, Z3
	VBROADCASTI64X4 128(DI), Z22
	KQ_HIGHBIT(Z0, kq512q6hctl<>+0(SB), kq512c30<>(SB))
	KQ_HIGHBIT(Z1, kq512q6hctl<>+64(SB), kq512c30<>(SB))
	VBROADCASTI64X4 160(DI), Z22
	KQ_HIGHBIT(Z2, kq512q6hctl<>+0(SB), kq512c30<>(SB))
	KQ_HIGHBIT(Z3, kq512q6hctl<>+64(SB), kq512c30<>(SB))
	VPMOVSXBW 192(DI), Y21
	VPSLLW $5, Y21, Y8
	KQ_SCALES16
	KQ_COLUMNS
	KQ_NEXT_BLOCK(210)
	KQ_ROW_END
