//go:build amd64

#include "textflag.h"

// K-quant kernels for AVX2 (with FMA and F16C), and a streaming read loop.
//
// func kq<T>AVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
//
// For each weight row, each super-block is decoded once into the scratch
// area and multiplied against every activation column; every column follows
// the same instruction sequence, so an output's bits do not depend on the
// call.
//
// Decoded super-block, at R12 (scratch) in the common form of kquant.go:
//	0     u, values 32k..32k+31 in chunk k (unsigned bytes)
//	256   per chunk, the scale of each word pair's 16-value group (int16)
//	512   mn, one per 16-value group (int16)
//	544   d, 548 dm (float32)
//	1024  the columns' accumulators, 32 bytes each
// Per column and super-block, in 8 int32 lanes (lane L holds values
// 32k+4L..32k+4L+3 of every chunk k):
//	S = Σ_k sc·(u·q pairs)    (VPMADDUBSW, VPMADDWD)
//	M = mn·bsums pairs
//	t = float(S)·d − float(M)·dm; acc += t·da
// and at the end of the row the 8 lanes of acc are summed in a fixed tree.
//
// Registers: DI super-block, R14 row start, R8 rows left, R9 super-blocks
// left, R10 aStride, R11 columns left, R12 scratch, SI column's
// activations, DX column's accumulator, AX/BX/CX offsets of the
// super-block's values, scale and bsums in an activation row.

// KQ2_SPLAT fills x and y with the 32-bit value v repeated (R13 scratch).
#define KQ2_SPLAT(v, x, y) \
	MOVL $v, R13 \
	VMOVD R13, x \
	VPBROADCASTD x, y

#define KQ2_PROLOGUE \
	MOVQ w+0(FP), R14 \
	MOVQ rows+16(FP), R8 \
	MOVQ aStride+40(FP), R10 \
	MOVQ scratch+72(FP), R12

#define KQ2_ROW_START \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
	VXORPS Y0, Y0, Y0 \
clear: \
	VMOVUPS Y0, (DX) \
	ADDQ $32, DX \
	DECQ R11 \
	JNZ clear \
	MOVQ R14, DI \
	XORQ AX, AX \
	MOVQ n+24(FP), BX \
	MOVQ BX, R9 \
	SHRQ $8, R9 \
	LEAQ (BX)(R9*4), CX

// KQ2_CHUNK(k, acc) adds chunk k (its values in register u) times the
// column's values, scaled, into acc (Y8 scratch).
#define KQ2_CHUNK(k, u, acc) \
	VPMADDUBSW (32*k)(SI)(AX*1), u, Y8 \
	VPMADDWD (256+32*k)(R12), Y8, Y8 \
	VPADDD Y8, acc, acc

// KQ2_COLUMNS multiplies the decoded super-block, its values loaded into
// Y0-Y7 once, against every column.
#define KQ2_COLUMNS \
	VBROADCASTSS 544(R12), Y13 \
	VBROADCASTSS 548(R12), Y14 \
	VMOVDQU 0(R12), Y0 \
	VMOVDQU 32(R12), Y1 \
	VMOVDQU 64(R12), Y2 \
	VMOVDQU 96(R12), Y3 \
	VMOVDQU 128(R12), Y4 \
	VMOVDQU 160(R12), Y5 \
	VMOVDQU 192(R12), Y6 \
	VMOVDQU 224(R12), Y7 \
	MOVQ a+32(FP), SI \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
column: \
	VPMADDUBSW 0(SI)(AX*1), Y0, Y9 \
	VPMADDWD 256(R12), Y9, Y9 \
	VPMADDUBSW 32(SI)(AX*1), Y1, Y10 \
	VPMADDWD 288(R12), Y10, Y10 \
	KQ2_CHUNK(2, Y2, Y9) \
	KQ2_CHUNK(3, Y3, Y10) \
	KQ2_CHUNK(4, Y4, Y9) \
	KQ2_CHUNK(5, Y5, Y10) \
	KQ2_CHUNK(6, Y6, Y9) \
	KQ2_CHUNK(7, Y7, Y10) \
	VPADDD Y10, Y9, Y9 \
	VMOVDQU 512(R12), Y11 \
	VPMADDWD 0(SI)(CX*1), Y11, Y11 \
	VCVTDQ2PS Y9, Y9 \
	VCVTDQ2PS Y11, Y11 \
	VMULPS Y13, Y9, Y9 \
	VFNMADD231PS Y14, Y11, Y9 \
	VBROADCASTSS 0(SI)(BX*1), Y15 \
	VMOVUPS (DX), Y12 \
	VFMADD231PS Y15, Y9, Y12 \
	VMOVUPS Y12, (DX) \
	ADDQ R10, SI \
	ADDQ $32, DX \
	DECQ R11 \
	JNZ column

#define KQ2_NEXT_BLOCK(size) \
	ADDQ $size, DI \
	ADDQ $256, AX \
	ADDQ $4, BX \
	ADDQ $32, CX \
	DECQ R9 \
	JNZ block

#define KQ2_ROW_END \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
	MOVQ rows+16(FP), R13 \
	SUBQ R8, R13 \
	MOVQ out+56(FP), SI \
	LEAQ (SI)(R13*4), SI \
	MOVQ outStride+64(FP), R13 \
	SHLQ $2, R13 \
sum: \
	VMOVUPS (DX), Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0x4e, X0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0xb1, X0, X1 \
	VADDSS X1, X0, X0 \
	VMOVSS X0, (SI) \
	ADDQ R13, SI \
	ADDQ $32, DX \
	DECQ R11 \
	JNZ sum \
	ADDQ wStride+8(FP), R14 \
	DECQ R8 \
	JNZ row \
	VZEROUPPER \
	RET

// KQ2_HALVES stores the half-precision values at off1 and off2 of the
// super-block as d and dm.
#define KQ2_HALVES(off1, off2) \
	MOVWLZX off1(DI), R13 \
	MOVWLZX off2(DI), R11 \
	SHLL $16, R11 \
	ORL R11, R13 \
	VMOVD R13, X0 \
	VCVTPH2PS X0, X0 \
	VMOVQ X0, 544(R12)

// KQ2_SCX(k, ext, sc) stores chunk k's scale vector from the 16 group
// scales (bytes) in sc, widened by ext (VPMOVZXBW or VPMOVSXBW).
#define KQ2_SCX(k, ext, sc) \
	VPSHUFB kq256sidx16<>+16*k(SB), sc, X4 \
	ext X4, Y4 \
	VMOVDQU Y4, (256+32*k)(R12)

#define KQ2_SCX16(ext, sc) \
	KQ2_SCX(0, ext, sc) \
	KQ2_SCX(1, ext, sc) \
	KQ2_SCX(2, ext, sc) \
	KQ2_SCX(3, ext, sc) \
	KQ2_SCX(4, ext, sc) \
	KQ2_SCX(5, ext, sc) \
	KQ2_SCX(6, ext, sc) \
	KQ2_SCX(7, ext, sc)

// KQ2_Q4SCALES decodes the 8 scales and 8 mins of Q4_K and Q5_K (6 bits
// each, 12 bytes at offset 4) into the scale vectors and mn.
#define KQ2_Q4SCALES \
	VMOVDQU 4(DI), X1 \
	VPSHUFB ·kqQ4Shuf+0(SB), X1, X2 \
	VPSRLW $4, X2, X3 \
	VPBLENDW $0xc0, X3, X2, X2 \
	VPAND ·kqQ4Mask(SB), X2, X2 \
	VPSHUFB ·kqQ4Shuf+16(SB), X1, X3 \
	VPSRLW $2, X3, X3 \
	KQ2_SPLAT(0x30303030, X14, Y14) \
	VPAND X14, X3, X3 \
	VPOR X3, X2, X2 \
	VINSERTI128 $1, X2, Y2, Y2 \
	KQ2_Q4SCX(0) \
	KQ2_Q4SCX(1) \
	KQ2_Q4SCX(2) \
	KQ2_Q4SCX(3) \
	KQ2_Q4SCX(4) \
	KQ2_Q4SCX(5) \
	KQ2_Q4SCX(6) \
	KQ2_Q4SCX(7) \
	VPSHUFB kq256q4midx<>(SB), Y2, Y3 \
	VMOVDQU Y3, 512(R12)

#define KQ2_Q4SCX(k) \
	VPSHUFB kq256q4sidx<>+32*k(SB), Y2, Y3 \
	VMOVDQU Y3, (256+32*k)(R12)

// KQ2_NIBBLES(off) stores the nibbles of the 128 bytes at off (Q4_K and
// Q5_K qs): chunk 2k the low nibbles of bytes 32k..32k+31, chunk 2k+1 their
// high nibbles.
#define KQ2_NIBBLES(off) \
	KQ2_SPLAT(0x0f0f0f0f, X15, Y15) \
	KQ2_NIBBLE(off, 0) \
	KQ2_NIBBLE(off, 1) \
	KQ2_NIBBLE(off, 2) \
	KQ2_NIBBLE(off, 3)

#define KQ2_NIBBLE(off, k) \
	VMOVDQU (off+32*k)(DI), Y0 \
	VPAND Y15, Y0, Y1 \
	VMOVDQU Y1, (64*k)(R12) \
	VPSRLW $4, Y0, Y0 \
	VPAND Y15, Y0, Y0 \
	VMOVDQU Y0, (64*k+32)(R12)

// KQ2_OR_BIT(k, shift, src, mask) ors into chunk k the bits of src that
// shift (a VPSLLW or VPSRLW with its count) brings under mask.
#define KQ2_OR_BIT(k, shift, src, mask) \
	shift, src, Y1 \
	VPAND mask, Y1, Y1 \
	VPOR (32*k)(R12), Y1, Y1 \
	VMOVDQU Y1, (32*k)(R12)

// KQ2_PLANES(off, k0) stores the four 2-bit planes of the 32 bytes at off
// as chunks k0..k0+3 (Y15 holds 0x03 bytes).
#define KQ2_PLANES(off, k0) \
	VMOVDQU off(DI), Y0 \
	VPAND Y15, Y0, Y1 \
	VMOVDQU Y1, (32*k0)(R12) \
	VPSRLW $2, Y0, Y1 \
	VPAND Y15, Y1, Y1 \
	VMOVDQU Y1, (32*k0+32)(R12) \
	VPSRLW $4, Y0, Y1 \
	VPAND Y15, Y1, Y1 \
	VMOVDQU Y1, (32*k0+64)(R12) \
	VPSRLW $6, Y0, Y1 \
	VPAND Y15, Y1, Y1 \
	VMOVDQU Y1, (32*k0+96)(R12)

// KQ2_Q6LOW(k, off, shift) stores as chunk k the nibbles of the 32 bytes of
// ql at off, shifted right by shift (0: low nibbles, 4: high).
#define KQ2_Q6LOW(k, off, shift) \
	VMOVDQU off(DI), Y0 \
	VPSRLW $shift, Y0, Y0 \
	VPAND Y15, Y0, Y0 \
	VMOVDQU Y0, (32*k)(R12)

// Shared with kquant_avx512_amd64.s.
// Q4_K/Q5_K scales: s0-3, s8-11, s4-7, s8-11; then the top bits s0-3 (for scales 4-7), s4-7 (for mins 4-7)
DATA ·kqQ4Shuf+0(SB)/8, $0x0b0a090803020100
DATA ·kqQ4Shuf+8(SB)/8, $0x0b0a090807060504
DATA ·kqQ4Shuf+16(SB)/8, $0x0302010080808080
DATA ·kqQ4Shuf+24(SB)/8, $0x0706050480808080
GLOBL ·kqQ4Shuf(SB), RODATA|NOPTR, $32

// Q4_K/Q5_K: low bits kept of each scale and min
DATA ·kqQ4Mask+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA ·kqQ4Mask+8(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL ·kqQ4Mask(SB), RODATA|NOPTR, $16

// Q4_K/Q5_K: scale k as 16 words (chunk k is sub-block k)
DATA kq256q4sidx<>+0(SB)/8, $0x8000800080008000
DATA kq256q4sidx<>+8(SB)/8, $0x8000800080008000
DATA kq256q4sidx<>+16(SB)/8, $0x8000800080008000
DATA kq256q4sidx<>+24(SB)/8, $0x8000800080008000
DATA kq256q4sidx<>+32(SB)/8, $0x8001800180018001
DATA kq256q4sidx<>+40(SB)/8, $0x8001800180018001
DATA kq256q4sidx<>+48(SB)/8, $0x8001800180018001
DATA kq256q4sidx<>+56(SB)/8, $0x8001800180018001
DATA kq256q4sidx<>+64(SB)/8, $0x8002800280028002
DATA kq256q4sidx<>+72(SB)/8, $0x8002800280028002
DATA kq256q4sidx<>+80(SB)/8, $0x8002800280028002
DATA kq256q4sidx<>+88(SB)/8, $0x8002800280028002
DATA kq256q4sidx<>+96(SB)/8, $0x8003800380038003
DATA kq256q4sidx<>+104(SB)/8, $0x8003800380038003
DATA kq256q4sidx<>+112(SB)/8, $0x8003800380038003
DATA kq256q4sidx<>+120(SB)/8, $0x8003800380038003
DATA kq256q4sidx<>+128(SB)/8, $0x8004800480048004
DATA kq256q4sidx<>+136(SB)/8, $0x8004800480048004
DATA kq256q4sidx<>+144(SB)/8, $0x8004800480048004
DATA kq256q4sidx<>+152(SB)/8, $0x8004800480048004
DATA kq256q4sidx<>+160(SB)/8, $0x8005800580058005
DATA kq256q4sidx<>+168(SB)/8, $0x8005800580058005
DATA kq256q4sidx<>+176(SB)/8, $0x8005800580058005
DATA kq256q4sidx<>+184(SB)/8, $0x8005800580058005
DATA kq256q4sidx<>+192(SB)/8, $0x8006800680068006
DATA kq256q4sidx<>+200(SB)/8, $0x8006800680068006
DATA kq256q4sidx<>+208(SB)/8, $0x8006800680068006
DATA kq256q4sidx<>+216(SB)/8, $0x8006800680068006
DATA kq256q4sidx<>+224(SB)/8, $0x8007800780078007
DATA kq256q4sidx<>+232(SB)/8, $0x8007800780078007
DATA kq256q4sidx<>+240(SB)/8, $0x8007800780078007
DATA kq256q4sidx<>+248(SB)/8, $0x8007800780078007
GLOBL kq256q4sidx<>(SB), RODATA|NOPTR, $256

// Q4_K/Q5_K: the min of sub-block g/2 as word g
DATA kq256q4midx<>+0(SB)/8, $0x8009800980088008
DATA kq256q4midx<>+8(SB)/8, $0x800b800b800a800a
DATA kq256q4midx<>+16(SB)/8, $0x800d800d800c800c
DATA kq256q4midx<>+24(SB)/8, $0x800f800f800e800e
GLOBL kq256q4midx<>(SB), RODATA|NOPTR, $32

// chunk k: the scales of groups 2k and 2k+1, eight bytes each
DATA kq256sidx16<>+0(SB)/8, $0x0000000000000000
DATA kq256sidx16<>+8(SB)/8, $0x0101010101010101
DATA kq256sidx16<>+16(SB)/8, $0x0202020202020202
DATA kq256sidx16<>+24(SB)/8, $0x0303030303030303
DATA kq256sidx16<>+32(SB)/8, $0x0404040404040404
DATA kq256sidx16<>+40(SB)/8, $0x0505050505050505
DATA kq256sidx16<>+48(SB)/8, $0x0606060606060606
DATA kq256sidx16<>+56(SB)/8, $0x0707070707070707
DATA kq256sidx16<>+64(SB)/8, $0x0808080808080808
DATA kq256sidx16<>+72(SB)/8, $0x0909090909090909
DATA kq256sidx16<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA kq256sidx16<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA kq256sidx16<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA kq256sidx16<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA kq256sidx16<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA kq256sidx16<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kq256sidx16<>(SB), RODATA|NOPTR, $128

// Q3_K scales: s0-7 twice (low nibbles, high nibbles); s8-11 four times
DATA ·kqQ3Shuf+0(SB)/8, $0x0908070605040302
DATA ·kqQ3Shuf+8(SB)/8, $0x0908070605040302
DATA ·kqQ3Shuf+16(SB)/8, $0x0d0c0b0a0d0c0b0a
DATA ·kqQ3Shuf+24(SB)/8, $0x0d0c0b0a0d0c0b0a
GLOBL ·kqQ3Shuf(SB), RODATA|NOPTR, $32


// func kqStreamRead(p *byte, n int) uint64
// Reads n bytes (a multiple of 256) with 32-byte loads and returns their
// xor: the machine's plain streaming-read bandwidth, for benchmarks.
TEXT ·kqStreamRead(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $8, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ done
loop:
	VPXOR 0(SI), Y0, Y0
	VPXOR 32(SI), Y1, Y1
	VPXOR 64(SI), Y2, Y2
	VPXOR 96(SI), Y3, Y3
	VPXOR 128(SI), Y0, Y0
	VPXOR 160(SI), Y1, Y1
	VPXOR 192(SI), Y2, Y2
	VPXOR 224(SI), Y3, Y3
	ADDQ $256, SI
	DECQ CX
	JNZ loop
done:
	VPXOR Y1, Y0, Y0
	VPXOR Y3, Y2, Y2
	VPXOR Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR X1, X0, X0
	VPSRLDQ $8, X0, X1
	VPXOR X1, X0, X0
	VMOVQ X0, AX
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET

// KQ2_KERNEL is a kernel's body: per super-block of size bytes, dec
// decodes it into scratch, then it is multiplied against every column.
#define KQ2_KERNEL(dec, size) \
	KQ2_PROLOGUE \
row: \
	KQ2_ROW_START \
block: \
	dec \
	KQ2_COLUMNS \
	KQ2_NEXT_BLOCK(size) \
	KQ2_ROW_END

// KQ2_DEC_Q2K decodes a Q2_K super-block into scratch.
#define KQ2_DEC_Q2K \
	KQ2_HALVES(80, 82) \
	KQ2_SPLAT(0x03030303, X15, Y15) \
	KQ2_PLANES(16, 0) \
	KQ2_PLANES(48, 4) \
	VMOVDQU 0(DI), X1 \
	KQ2_SPLAT(0x0f0f0f0f, X14, Y14) \
	VPAND X14, X1, X2 \
	VPSRLW $4, X1, X3 \
	VPAND X14, X3, X3 \
	KQ2_SCX16(VPMOVZXBW, X2) \
	VPMOVZXBW X3, Y3 \
	VMOVDQU Y3, 512(R12)

// KQ2_DEC_Q3K decodes a Q3_K super-block into scratch.
#define KQ2_DEC_Q3K \
	KQ2_HALVES(108, 108) \
	KQ2_SPLAT(0x03030303, X15, Y15) \
	KQ2_PLANES(32, 0) \
	KQ2_PLANES(64, 4) \
	VMOVDQU 0(DI), Y5 \
	KQ2_SPLAT(0x04040404, X6, Y6) \
	KQ2_OR_BIT(0, VPSLLW $2, Y5, Y6) \
	KQ2_OR_BIT(1, VPSLLW $1, Y5, Y6) \
	KQ2_OR_BIT(2, VPSRLW $0, Y5, Y6) \
	KQ2_OR_BIT(3, VPSRLW $1, Y5, Y6) \
	KQ2_OR_BIT(4, VPSRLW $2, Y5, Y6) \
	KQ2_OR_BIT(5, VPSRLW $3, Y5, Y6) \
	KQ2_OR_BIT(6, VPSRLW $4, Y5, Y6) \
	KQ2_OR_BIT(7, VPSRLW $5, Y5, Y6) \
	VMOVDQU 94(DI), X1 \
	VPSHUFB ·kqQ3Shuf+0(SB), X1, X2 \
	VPSRLW $4, X2, X3 \
	VPBLENDW $0xf0, X3, X2, X2 \
	KQ2_SPLAT(0x0f0f0f0f, X14, Y14) \
	VPAND X14, X2, X2 \
	VPSHUFB ·kqQ3Shuf+16(SB), X1, X3 \
	VPSLLW $4, X3, X4 \
	VPSLLW $2, X3, X5 \
	VPSRLW $2, X3, X6 \
	VPBLENDD $0x2, X5, X4, X4 \
	VPBLENDD $0x4, X3, X4, X4 \
	VPBLENDD $0x8, X6, X4, X4 \
	KQ2_SPLAT(0x30303030, X13, Y13) \
	VPAND X13, X4, X4 \
	VPOR X4, X2, X2 \
	KQ2_SPLAT(0x20202020, X12, Y12) \
	VPSUBB X12, X2, X2 \
	KQ2_SCX16(VPMOVSXBW, X2) \
	VPMOVSXBW X2, Y3 \
	VPSLLW $2, Y3, Y3 \
	VMOVDQU Y3, 512(R12)

// KQ2_DEC_Q4K decodes a Q4_K super-block into scratch.
#define KQ2_DEC_Q4K \
	KQ2_HALVES(0, 2) \
	KQ2_Q4SCALES \
	KQ2_NIBBLES(16)

// KQ2_DEC_Q5K decodes a Q5_K super-block into scratch.
#define KQ2_DEC_Q5K \
	KQ2_HALVES(0, 2) \
	KQ2_Q4SCALES \
	KQ2_NIBBLES(48) \
	VMOVDQU 16(DI), Y5 \
	KQ2_SPLAT(0x10101010, X6, Y6) \
	KQ2_OR_BIT(0, VPSLLW $4, Y5, Y6) \
	KQ2_OR_BIT(1, VPSLLW $3, Y5, Y6) \
	KQ2_OR_BIT(2, VPSLLW $2, Y5, Y6) \
	KQ2_OR_BIT(3, VPSLLW $1, Y5, Y6) \
	KQ2_OR_BIT(4, VPSRLW $0, Y5, Y6) \
	KQ2_OR_BIT(5, VPSRLW $1, Y5, Y6) \
	KQ2_OR_BIT(6, VPSRLW $2, Y5, Y6) \
	KQ2_OR_BIT(7, VPSRLW $3, Y5, Y6)

// KQ2_DEC_Q6K decodes a Q6_K super-block into scratch.
#define KQ2_DEC_Q6K \
	KQ2_HALVES(208, 208) \
	KQ2_SPLAT(0x0f0f0f0f, X15, Y15) \
	KQ2_SPLAT(0x30303030, X6, Y6) \
	KQ2_Q6LOW(0, 0, 0) \
	KQ2_Q6LOW(1, 32, 0) \
	KQ2_Q6LOW(2, 0, 4) \
	KQ2_Q6LOW(3, 32, 4) \
	KQ2_Q6LOW(4, 64, 0) \
	KQ2_Q6LOW(5, 96, 0) \
	KQ2_Q6LOW(6, 64, 4) \
	KQ2_Q6LOW(7, 96, 4) \
	VMOVDQU 128(DI), Y5 \
	KQ2_OR_BIT(0, VPSLLW $4, Y5, Y6) \
	KQ2_OR_BIT(1, VPSLLW $2, Y5, Y6) \
	KQ2_OR_BIT(2, VPSRLW $0, Y5, Y6) \
	KQ2_OR_BIT(3, VPSRLW $2, Y5, Y6) \
	VMOVDQU 160(DI), Y5 \
	KQ2_OR_BIT(4, VPSLLW $4, Y5, Y6) \
	KQ2_OR_BIT(5, VPSLLW $2, Y5, Y6) \
	KQ2_OR_BIT(6, VPSRLW $0, Y5, Y6) \
	KQ2_OR_BIT(7, VPSRLW $2, Y5, Y6) \
	VMOVDQU 192(DI), X2 \
	KQ2_SCX16(VPMOVSXBW, X2) \
	VPMOVSXBW X2, Y3 \
	VPSLLW $5, Y3, Y3 \
	VMOVDQU Y3, 512(R12)

// func kqQ2KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ2KAVX2(SB), NOSPLIT, $0-80
	KQ2_KERNEL(KQ2_DEC_Q2K, 84)

// func kqQ3KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ3KAVX2(SB), NOSPLIT, $0-80
	KQ2_KERNEL(KQ2_DEC_Q3K, 110)

// func kqQ4KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ4KAVX2(SB), NOSPLIT, $0-80
	KQ2_KERNEL(KQ2_DEC_Q4K, 144)

// func kqQ5KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ5KAVX2(SB), NOSPLIT, $0-80
	KQ2_KERNEL(KQ2_DEC_Q5K, 176)

// func kqQ6KAVX2(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ6KAVX2(SB), NOSPLIT, $0-80
	KQ2_KERNEL(KQ2_DEC_Q6K, 210)
