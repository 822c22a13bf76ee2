//go:build amd64

#include "textflag.h"

// K-quant kernels for AVX-512 (F, BW, VL, VNNI, VBMI and GFNI).
//
// func kq<T>AVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
// func kq<T>AVX512R(same), for 1 to 4 columns
//
// For each weight row, each super-block is decoded once into registers and
// multiplied against every activation column. Every column follows the same
// instruction sequence, whichever form and place, so an output's bits do
// not depend on the call. The first form keeps each column's accumulator in
// scratch (from 1024(R12), 64 bytes each); the R form keeps them in
// registers (Z17, Z18, Z19, Z25), as a round trip through memory per
// super-block would chain store-to-load latencies when columns are few.
//
// Decoded super-block (the common form of kquant.go):
//	Z0-Z3   u, values 64k..64k+63 in chunk k (unsigned bytes)
//	Z4, Z5  the scales of chunk pairs (0,1) and (2,3), int16, laid out as
//	        VPACKSSDW lays out the pairs' 4-value sums (see kq512idx16)
//	Y8      mn, one per 16-value group (int16)
//	d, dm   float32 in scratch, at offsets given to KQ_DOT
// Per column and super-block, in 16 int32 lanes:
//	D_k = sums of 4 u·q (VPDPBUSD), packed by pairs to int16 (they fit:
//	      |4·63·128| < 2^15)
//	S   = Σ sc·D pairs (VPMADDWD, VPDPWSSD)
//	M   = mn·bsums pairs (8 lanes)
//	t = float(S)·d; t[0:8] −= float(M)·dm; acc += t·da
// and at the end of the row the 16 lanes of acc are summed in a fixed tree.
//
// Registers: DI super-block, R14 row start, R8 rows left, R9 super-blocks
// left, R10 aStride, R11 columns left, R12 scratch, SI column's
// activations, DX column's accumulator, AX/BX/CX offsets of the
// super-block's values, scale and bsums in an activation row. Z26-Z28 hold
// a type's index tables, Z6, Z7, Z9, Z10, Z29 and Z30 its affine matrices
// (GF2P8AFFINEQB extracts bit fields), K1 the eight M lanes, K3 a word mask
// of the scale decoding, K4 the even bytes.

#define KQ_PROLOGUE \
	MOVQ w+0(FP), R14 \
	MOVQ rows+16(FP), R8 \
	MOVQ aStride+40(FP), R10 \
	MOVQ scratch+72(FP), R12 \
	MOVL $0xff, AX \
	KMOVW AX, K1 \
	MOVQ $0x5555555555555555, AX \
	KMOVQ AX, K4

// KQ_FIRST_BLOCK points the offsets at the row's first super-block.
#define KQ_FIRST_BLOCK \
	MOVQ R14, DI \
	XORQ AX, AX \
	MOVQ n+24(FP), BX \
	MOVQ BX, R9 \
	SHRQ $8, R9 \
	LEAQ (BX)(R9*4), CX

// KQ_ROW_START clears the accumulators of every column in scratch.
#define KQ_ROW_START \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
	VPXORD Z11, Z11, Z11 \
clear: \
	VMOVUPS Z11, (DX) \
	ADDQ $64, DX \
	DECQ R11 \
	JNZ clear \
	KQ_FIRST_BLOCK

// KQ_ROW_START_R clears the register accumulators.
#define KQ_ROW_START_R \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	VPXORD Z25, Z25, Z25 \
	KQ_FIRST_BLOCK

// KQ_DOT_ON adds one row's decoded super-block (chunks u0-u3, scale
// vectors s0, s1, mn in mny) times one column (values q0-q3 and bsums bs,
// registers or memory) to acc, with d and dm at offsets dd and dm of
// scratch; t0-t3 and m (Z and Y names) are temporaries. Every form runs
// these same operations, so they give the same bits.
#define KQ_DOT_ON(q0, q1, q2, q3, bs, u0, u1, u2, u3, s0, s1, mny, t0, t1, t2, t3, mz, my, dd, dm, acc) \
	VPXORD t0, t0, t0 \
	VPXORD t1, t1, t1 \
	VPXORD t2, t2, t2 \
	VPXORD t3, t3, t3 \
	VPDPBUSD q0, u0, t0 \
	VPDPBUSD q1, u1, t1 \
	VPDPBUSD q2, u2, t2 \
	VPDPBUSD q3, u3, t3 \
	VPACKSSDW t1, t0, t0 \
	VPACKSSDW t3, t2, t2 \
	VPMADDWD s0, t0, t0 \
	VPDPWSSD s1, t2, t0 \
	VPMADDWD bs, mny, my \
	VCVTDQ2PS t0, t0 \
	VCVTDQ2PS my, my \
	VMULPS.BCST dd(R12), t0, t0 \
	VFNMADD231PS.BCST dm(R12), mz, K1, t0 \
	VFMADD231PS.BCST 0(SI)(BX*1), t0, acc

// KQ_DOT adds the decoded super-block times the column at SI to acc.
#define KQ_DOT(acc, dd, dm) \
	KQ_DOT_ON(0(SI)(AX*1), 64(SI)(AX*1), 128(SI)(AX*1), 192(SI)(AX*1), 0(SI)(CX*1), Z0, Z1, Z2, Z3, Z4, Z5, Y8, Z12, Z13, Z14, Z15, Z16, Y16, dd, dm, acc)

// KQ_COLUMNS multiplies the decoded super-block against every column.
#define KQ_COLUMNS(dd, dm) \
	MOVQ a+32(FP), SI \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
column: \
	VMOVUPS (DX), Z11 \
	KQ_DOT(Z11, dd, dm) \
	VMOVUPS Z11, (DX) \
	ADDQ R10, SI \
	ADDQ $64, DX \
	DECQ R11 \
	JNZ column

// KQ_COLUMNS_R multiplies the decoded super-block against 1 to 4 columns.
#define KQ_COLUMNS_R(dd, dm) \
	MOVQ a+32(FP), SI \
	MOVQ cols+48(FP), R11 \
	KQ_DOT(Z17, dd, dm) \
	CMPQ R11, $1 \
	JEQ dotted \
	ADDQ R10, SI \
	KQ_DOT(Z18, dd, dm) \
	CMPQ R11, $2 \
	JEQ dotted \
	ADDQ R10, SI \
	KQ_DOT(Z19, dd, dm) \
	CMPQ R11, $3 \
	JEQ dotted \
	ADDQ R10, SI \
	KQ_DOT(Z25, dd, dm) \
dotted:

// KQ_NEXT_BLOCK steps to the next super-block of bytes size.
#define KQ_NEXT_BLOCK(size) \
	ADDQ $size, DI \
	ADDQ $256, AX \
	ADDQ $4, BX \
	ADDQ $32, CX \
	DECQ R9 \
	JNZ block

// KQ_HSUM sums the 16 lanes of acc (its Z and Y names) into X0.
#define KQ_HSUM(accz, accy) \
	VEXTRACTF64X4 $1, accz, Y1 \
	VADDPS Y1, accy, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0x4e, X0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0xb1, X0, X1 \
	VADDSS X1, X0, X0

// KQ_OUT points SI at the row's first output and R13 at the output stride
// in bytes, and loads the column count into R11.
#define KQ_OUT \
	MOVQ cols+48(FP), R11 \
	MOVQ rows+16(FP), R13 \
	SUBQ R8, R13 \
	MOVQ out+56(FP), SI \
	LEAQ (SI)(R13*4), SI \
	MOVQ outStride+64(FP), R13 \
	SHLQ $2, R13

// KQ_NEXT_ROW steps to the next row, or returns.
#define KQ_NEXT_ROW \
	ADDQ wStride+8(FP), R14 \
	DECQ R8 \
	JNZ row \
	VZEROUPPER \
	RET

// KQ_ROW_END sums each column's lanes, stores the outputs and steps to the
// next row.
#define KQ_ROW_END \
	KQ_OUT \
	LEAQ 1024(R12), DX \
sum: \
	VMOVUPS (DX), Z0 \
	KQ_HSUM(Z0, Y0) \
	VMOVSS X0, (SI) \
	ADDQ R13, SI \
	ADDQ $64, DX \
	DECQ R11 \
	JNZ sum \
	KQ_NEXT_ROW

// KQ_ROW_END_R is KQ_ROW_END for the register accumulators.
#define KQ_ROW_END_R \
	KQ_OUT \
	KQ_HSUM(Z17, Y17) \
	VMOVSS X0, (SI) \
	CMPQ R11, $1 \
	JEQ stored \
	ADDQ R13, SI \
	KQ_HSUM(Z18, Y18) \
	VMOVSS X0, (SI) \
	CMPQ R11, $2 \
	JEQ stored \
	ADDQ R13, SI \
	KQ_HSUM(Z19, Y19) \
	VMOVSS X0, (SI) \
	CMPQ R11, $3 \
	JEQ stored \
	ADDQ R13, SI \
	KQ_HSUM(Z25, Y25) \
	VMOVSS X0, (SI) \
stored: \
	KQ_NEXT_ROW

// KQ_HALVES converts the four half-precision values at off of the
// super-block (inside it) to float32 at 0(R12)..12(R12).
#define KQ_HALVES(off) \
	VCVTPH2PS off(DI), X16 \
	VMOVUPS X16, 0(R12)

// KQ_PLANES(src, c0, c1) puts the 2-bit planes 0,1 of the broadcast bytes
// src into chunk c0 (lower, upper 256 bits), planes 2,3 into c1 (matrices
// in Z29, Z30).
#define KQ_PLANES(src, c0, c1) \
	VGF2P8AFFINEQB $0, Z29, src, c0 \
	VGF2P8AFFINEQB $0, Z30, src, c1

// KQ_NIBBLES(off, chunk) puts into chunk the low nibbles of the 32 bytes at
// off (lower 256 bits), then their high nibbles (matrices in Z29).
#define KQ_NIBBLES(off, chunk) \
	VBROADCASTI64X4 off(DI), chunk \
	VGF2P8AFFINEQB $0, Z29, chunk, chunk

// KQ_OR_AFFINE(src, mat, chunk) ors into chunk the bit fields that the
// affine matrices in register mat select from src.
#define KQ_OR_AFFINE(src, mat, chunk) \
	VGF2P8AFFINEQB $0, mat, src, Z24 \
	VPORD Z24, chunk, chunk

// KQ_Q4SCALES decodes the 8 scales and 8 mins of Q4_K and Q5_K (6 bits
// each, 12 bytes at offset 4) to the bytes sc0-7, m0-7 and widens them
// into the scale vectors (index tables Z26, Z27) and mn (Y28).
#define KQ_Q4SCALES \
	VMOVDQU64 4(DI), X20 \
	VPSHUFB ·kqQ4Shuf+0(SB), X20, X21 \
	VPSHUFB ·kqQ4Shuf+16(SB), X20, X22 \
	VPSRLW $4, X21, K3, X21 \
	VPANDD ·kqQ4Mask(SB), X21, X21 \
	VPSRLW $2, X22, X22 \
	VPTERNLOGD.BCST $0xf8, kq512c30<>(SB), X22, X21 \
	VPERMB.Z Z21, Z26, K4, Z4 \
	VPERMB.Z Z21, Z27, K4, Z5 \
	VPERMB.Z Y21, Y28, K4, Y8

// KQ_Q4CONST loads the index tables of KQ_Q4SCALES.
#define KQ_Q4CONST \
	MOVL $0xc0, R13 \
	KMOVW R13, K3 \
	VMOVDQU64 kq512bq4<>+0(SB), Z26 \
	VMOVDQU64 kq512bq4<>+64(SB), Z27 \
	VMOVDQU64 kq512bq4min<>(SB), Y28 \
	VMOVDQU64 kq512nib<>(SB), Z29

// KQ_WORDCONST loads the index tables for scale words (VPERMW).
#define KQ_WORDCONST \
	VMOVDQU64 kq512idx16<>+0(SB), Z26 \
	VMOVDQU64 kq512idx16<>+64(SB), Z27

// KQ_MATS4(sym, r0, r1, r2, r3) loads four affine matrix vectors.
#define KQ_MATS4(sym, r0, r1, r2, r3) \
	VMOVDQU64 sym<>+0(SB), r0 \
	VMOVDQU64 sym<>+64(SB), r1 \
	VMOVDQU64 sym<>+128(SB), r2 \
	VMOVDQU64 sym<>+192(SB), r3

// KQ_MATS2(sym) loads two affine matrix vectors into Z29, Z30.
#define KQ_MATS2(sym) \
	VMOVDQU64 sym<>+0(SB), Z29 \
	VMOVDQU64 sym<>+64(SB), Z30

// KQ_KERNEL is a kernel's body: after the prologue, consts loads the type's
// constants; per row, start clears the accumulators; per super-block of
// size bytes, dec decodes it and cols multiplies it against the columns
// (d and dm at offsets dd and dm of scratch); end stores the row's outputs.
#define KQ_KERNEL(consts, dec, size, dd, dm, start, cols, end) \
	KQ_PROLOGUE \
	consts \
row: \
	start \
block: \
	dec \
	cols(dd, dm) \
	KQ_NEXT_BLOCK(size) \
	end

// The P form takes rows in pairs: per super-block it decodes both rows
// (the second first, its registers then moved to Z17, Z18, Z19, Z25, Z31,
// Z11, Y12 and its d, dm to 16(R12)), then loads each column's values once
// for both. The decoding's constants are reloaded per super-block, as the
// column loop takes their registers: activations in Z6, Z7, Z9, Z10,
// bsums in Y27, temporaries Z20-Z24, accumulator Z26 (two 64-byte slots per
// column in scratch).

// KQ_COLUMNS_P multiplies both decoded super-blocks against every column.
#define KQ_COLUMNS_P(dd, dm, ddb, dmb) \
	MOVQ a+32(FP), SI \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
column: \
	VMOVDQU64 0(SI)(AX*1), Z6 \
	VMOVDQU64 64(SI)(AX*1), Z7 \
	VMOVDQU64 128(SI)(AX*1), Z9 \
	VMOVDQU64 192(SI)(AX*1), Z10 \
	VMOVDQU64 0(SI)(CX*1), Y27 \
	VMOVUPS (DX), Z26 \
	KQ_DOT_ON(Z6, Z7, Z9, Z10, Y27, Z0, Z1, Z2, Z3, Z4, Z5, Y8, Z20, Z21, Z22, Z23, Z24, Y24, dd, dm, Z26) \
	VMOVUPS Z26, (DX) \
	VMOVUPS 64(DX), Z26 \
	KQ_DOT_ON(Z6, Z7, Z9, Z10, Y27, Z17, Z18, Z19, Z25, Z31, Z11, Y12, Z20, Z21, Z22, Z23, Z24, Y24, ddb, dmb, Z26) \
	VMOVUPS Z26, 64(DX) \
	ADDQ R10, SI \
	ADDQ $128, DX \
	DECQ R11 \
	JNZ column

// KQ_ROW_START_P clears both rows' accumulators of every column.
#define KQ_ROW_START_P \
	LEAQ 1024(R12), DX \
	MOVQ cols+48(FP), R11 \
	VPXORD Z26, Z26, Z26 \
clear: \
	VMOVUPS Z26, (DX) \
	VMOVUPS Z26, 64(DX) \
	ADDQ $128, DX \
	DECQ R11 \
	JNZ clear \
	KQ_FIRST_BLOCK

// KQ_SECOND_ROW decodes the second row's super-block (dec) and moves it
// aside.
#define KQ_SECOND_ROW(dec) \
	ADDQ wStride+8(FP), DI \
	dec \
	VMOVUPS X16, 16(R12) \
	VMOVDQA64 Z0, Z17 \
	VMOVDQA64 Z1, Z18 \
	VMOVDQA64 Z2, Z19 \
	VMOVDQA64 Z3, Z25 \
	VMOVDQA64 Z4, Z31 \
	VMOVDQA64 Z5, Z11 \
	VMOVDQA64 Y8, Y12 \
	SUBQ wStride+8(FP), DI

// KQ_ROW_END_P stores both rows' outputs and steps to the next pair.
#define KQ_ROW_END_P \
	KQ_OUT \
	LEAQ 1024(R12), DX \
sum: \
	VMOVUPS (DX), Z0 \
	KQ_HSUM(Z0, Y0) \
	VMOVSS X0, (SI) \
	VMOVUPS 64(DX), Z0 \
	KQ_HSUM(Z0, Y0) \
	VMOVSS X0, 4(SI) \
	ADDQ R13, SI \
	ADDQ $128, DX \
	DECQ R11 \
	JNZ sum \
	ADDQ wStride+8(FP), R14 \
	ADDQ wStride+8(FP), R14 \
	SUBQ $2, R8 \
	JNZ row \
	VZEROUPPER \
	RET

// KQ_KERNEL_P is KQ_KERNEL for row pairs (rows even).
#define KQ_KERNEL_P(consts, dec, size, dd, dm) \
	KQ_PROLOGUE \
row: \
	KQ_ROW_START_P \
block: \
	consts \
	KQ_SECOND_ROW(dec) \
	dec \
	KQ_COLUMNS_P(dd, dm, dd+16, dm+16) \
	KQ_NEXT_BLOCK(size) \
	KQ_ROW_END_P

// Each type's constants: index tables, affine matrices, masks.
#define KQ_CONST_Q2K \
	VMOVDQU64 kq512bidx16<>+0(SB), Z26 \
	VMOVDQU64 kq512bidx16<>+64(SB), Z27 \
	KQ_MATS2(kq512plane)

#define KQ_CONST_Q3K \
	KQ_WORDCONST \
	MOVL $0xf0, R13 \
	KMOVW R13, K3 \
	KQ_MATS2(kq512plane) \
	KQ_MATS4(kq512q3h, Z6, Z7, Z9, Z10)

#define KQ_CONST_Q4K \
	KQ_Q4CONST

#define KQ_CONST_Q5K \
	KQ_Q4CONST \
	KQ_MATS4(kq512q5h, Z6, Z7, Z9, Z10)

#define KQ_CONST_Q6K \
	KQ_WORDCONST \
	KQ_MATS2(kq512q6h) \
	VBROADCASTSD kq512lo4<>(SB), Z6 \
	VBROADCASTSD kq512hi4<>(SB), Z7

// Super-block decoders, one per type.

// Q2_K: d, dmin at 80, 82 (floats at 8, 12 of scratch); planes of qs at 16.
#define KQ_DEC_Q2K \
	KQ_HALVES(76) \
	VBROADCASTI64X4 16(DI), Z22 \
	KQ_PLANES(Z22, Z0, Z1) \
	VBROADCASTI64X4 48(DI), Z22 \
	KQ_PLANES(Z22, Z2, Z3) \
	VMOVDQU64 0(DI), X20 \
	VGF2P8AFFINEQB.BCST $0, kq512lo4<>(SB), X20, X21 \
	VGF2P8AFFINEQB.BCST $0, kq512hi4<>(SB), X20, X22 \
	VPERMB.Z Z21, Z26, K4, Z4 \
	VPERMB.Z Z21, Z27, K4, Z5 \
	VPMOVZXBW X22, Y8

// Q3_K: d at 108 (float at 12); planes of qs at 32, hmask bits at 0, 6-bit
// scales at 96 (read from 94 so as to stay inside the super-block).
#define KQ_DEC_Q3K \
	KQ_HALVES(102) \
	VBROADCASTI64X4 32(DI), Z22 \
	KQ_PLANES(Z22, Z0, Z1) \
	VBROADCASTI64X4 64(DI), Z22 \
	KQ_PLANES(Z22, Z2, Z3) \
	VBROADCASTI64X4 0(DI), Z22 \
	KQ_OR_AFFINE(Z22, Z6, Z0) \
	KQ_OR_AFFINE(Z22, Z7, Z1) \
	KQ_OR_AFFINE(Z22, Z9, Z2) \
	KQ_OR_AFFINE(Z22, Z10, Z3) \
	VMOVDQU64 94(DI), X20 \
	VPSHUFB ·kqQ3Shuf+0(SB), X20, X21 \
	VPSHUFB ·kqQ3Shuf+16(SB), X20, X22 \
	VPSRLW $4, X21, K3, X21 \
	VPANDD.BCST kq512c0f<>(SB), X21, X21 \
	VMOVDQU64 kq512q3sctl<>(SB), X23 \
	VPMULTISHIFTQB X22, X23, X22 \
	VPTERNLOGD.BCST $0xf8, kq512c30<>(SB), X22, X21 \
	VPSUBB kq512c20<>(SB), X21, X21 \
	VPMOVSXBW X21, Y21 \
	VPSLLW $2, Y21, Y8 \
	VPERMW Z21, Z26, Z4 \
	VPERMW Z21, Z27, Z5

// Q4_K: d, dmin at 0, 2 (floats at 0, 4); nibbles of qs at 16.
#define KQ_DEC_Q4K \
	KQ_HALVES(0) \
	KQ_Q4SCALES \
	KQ_NIBBLES(16, Z0) \
	KQ_NIBBLES(48, Z1) \
	KQ_NIBBLES(80, Z2) \
	KQ_NIBBLES(112, Z3)

// Q5_K: as Q4_K with qs at 48, and the fifth bits from qh at 16.
#define KQ_DEC_Q5K \
	KQ_HALVES(0) \
	KQ_Q4SCALES \
	KQ_NIBBLES(48, Z0) \
	KQ_NIBBLES(80, Z1) \
	KQ_NIBBLES(112, Z2) \
	KQ_NIBBLES(144, Z3) \
	VBROADCASTI64X4 16(DI), Z22 \
	KQ_OR_AFFINE(Z22, Z6, Z0) \
	KQ_OR_AFFINE(Z22, Z7, Z1) \
	KQ_OR_AFFINE(Z22, Z9, Z2) \
	KQ_OR_AFFINE(Z22, Z10, Z3)

// Q6_K: d at 208 (float at 12); nibbles of ql at 0, two bits of qh at 128,
// int8 scales at 192.
#define KQ_DEC_Q6K \
	KQ_HALVES(202) \
	VMOVDQU64 0(DI), Z20 \
	VGF2P8AFFINEQB $0, Z6, Z20, Z0 \
	VGF2P8AFFINEQB $0, Z7, Z20, Z1 \
	VMOVDQU64 64(DI), Z20 \
	VGF2P8AFFINEQB $0, Z6, Z20, Z2 \
	VGF2P8AFFINEQB $0, Z7, Z20, Z3 \
	VBROADCASTI64X4 128(DI), Z22 \
	KQ_OR_AFFINE(Z22, Z29, Z0) \
	KQ_OR_AFFINE(Z22, Z30, Z1) \
	VBROADCASTI64X4 160(DI), Z22 \
	KQ_OR_AFFINE(Z22, Z29, Z2) \
	KQ_OR_AFFINE(Z22, Z30, Z3) \
	VPMOVSXBW 192(DI), Y21 \
	VPSLLW $5, Y21, Y8 \
	VPERMW Z21, Z26, Z4 \
	VPERMW Z21, Z27, Z5

// packed chunk pairs (0,1) and (2,3): word w holds 16-value group (w%8 < 4 ? 0 : 4) + w/8 (+8 for the second pair)
DATA kq512idx16<>+0(SB)/8, $0x0000000000000000
DATA kq512idx16<>+8(SB)/8, $0x0004000400040004
DATA kq512idx16<>+16(SB)/8, $0x0001000100010001
DATA kq512idx16<>+24(SB)/8, $0x0005000500050005
DATA kq512idx16<>+32(SB)/8, $0x0002000200020002
DATA kq512idx16<>+40(SB)/8, $0x0006000600060006
DATA kq512idx16<>+48(SB)/8, $0x0003000300030003
DATA kq512idx16<>+56(SB)/8, $0x0007000700070007
DATA kq512idx16<>+64(SB)/8, $0x0008000800080008
DATA kq512idx16<>+72(SB)/8, $0x000c000c000c000c
DATA kq512idx16<>+80(SB)/8, $0x0009000900090009
DATA kq512idx16<>+88(SB)/8, $0x000d000d000d000d
DATA kq512idx16<>+96(SB)/8, $0x000a000a000a000a
DATA kq512idx16<>+104(SB)/8, $0x000e000e000e000e
DATA kq512idx16<>+112(SB)/8, $0x000b000b000b000b
DATA kq512idx16<>+120(SB)/8, $0x000f000f000f000f
GLOBL kq512idx16<>(SB), RODATA|NOPTR, $128

// affine: low nibbles in the lower 256 bits, high nibbles in the upper
DATA kq512nib<>+0(SB)/8, $0x0102040800000000
DATA kq512nib<>+8(SB)/8, $0x0102040800000000
DATA kq512nib<>+16(SB)/8, $0x0102040800000000
DATA kq512nib<>+24(SB)/8, $0x0102040800000000
DATA kq512nib<>+32(SB)/8, $0x1020408000000000
DATA kq512nib<>+40(SB)/8, $0x1020408000000000
DATA kq512nib<>+48(SB)/8, $0x1020408000000000
DATA kq512nib<>+56(SB)/8, $0x1020408000000000
GLOBL kq512nib<>(SB), RODATA|NOPTR, $64

// affine: low nibble (broadcast)
DATA kq512lo4<>+0(SB)/8, $0x0102040800000000
GLOBL kq512lo4<>(SB), RODATA|NOPTR, $8

// affine: high nibble (broadcast)
DATA kq512hi4<>+0(SB)/8, $0x1020408000000000
GLOBL kq512hi4<>(SB), RODATA|NOPTR, $8

// affine: 2-bit planes 0,1 (chunk 2h) and 2,3 (chunk 2h+1), lower then upper 256 bits
DATA kq512plane<>+0(SB)/8, $0x0102000000000000
DATA kq512plane<>+8(SB)/8, $0x0102000000000000
DATA kq512plane<>+16(SB)/8, $0x0102000000000000
DATA kq512plane<>+24(SB)/8, $0x0102000000000000
DATA kq512plane<>+32(SB)/8, $0x0408000000000000
DATA kq512plane<>+40(SB)/8, $0x0408000000000000
DATA kq512plane<>+48(SB)/8, $0x0408000000000000
DATA kq512plane<>+56(SB)/8, $0x0408000000000000
DATA kq512plane<>+64(SB)/8, $0x1020000000000000
DATA kq512plane<>+72(SB)/8, $0x1020000000000000
DATA kq512plane<>+80(SB)/8, $0x1020000000000000
DATA kq512plane<>+88(SB)/8, $0x1020000000000000
DATA kq512plane<>+96(SB)/8, $0x4080000000000000
DATA kq512plane<>+104(SB)/8, $0x4080000000000000
DATA kq512plane<>+112(SB)/8, $0x4080000000000000
DATA kq512plane<>+120(SB)/8, $0x4080000000000000
GLOBL kq512plane<>(SB), RODATA|NOPTR, $128

// affine, Q3_K chunk k: hmask bit 2k (lower 256 bits), 2k+1 (upper) to bit 2
DATA kq512q3h<>+0(SB)/8, $0x0000010000000000
DATA kq512q3h<>+8(SB)/8, $0x0000010000000000
DATA kq512q3h<>+16(SB)/8, $0x0000010000000000
DATA kq512q3h<>+24(SB)/8, $0x0000010000000000
DATA kq512q3h<>+32(SB)/8, $0x0000020000000000
DATA kq512q3h<>+40(SB)/8, $0x0000020000000000
DATA kq512q3h<>+48(SB)/8, $0x0000020000000000
DATA kq512q3h<>+56(SB)/8, $0x0000020000000000
DATA kq512q3h<>+64(SB)/8, $0x0000040000000000
DATA kq512q3h<>+72(SB)/8, $0x0000040000000000
DATA kq512q3h<>+80(SB)/8, $0x0000040000000000
DATA kq512q3h<>+88(SB)/8, $0x0000040000000000
DATA kq512q3h<>+96(SB)/8, $0x0000080000000000
DATA kq512q3h<>+104(SB)/8, $0x0000080000000000
DATA kq512q3h<>+112(SB)/8, $0x0000080000000000
DATA kq512q3h<>+120(SB)/8, $0x0000080000000000
DATA kq512q3h<>+128(SB)/8, $0x0000100000000000
DATA kq512q3h<>+136(SB)/8, $0x0000100000000000
DATA kq512q3h<>+144(SB)/8, $0x0000100000000000
DATA kq512q3h<>+152(SB)/8, $0x0000100000000000
DATA kq512q3h<>+160(SB)/8, $0x0000200000000000
DATA kq512q3h<>+168(SB)/8, $0x0000200000000000
DATA kq512q3h<>+176(SB)/8, $0x0000200000000000
DATA kq512q3h<>+184(SB)/8, $0x0000200000000000
DATA kq512q3h<>+192(SB)/8, $0x0000400000000000
DATA kq512q3h<>+200(SB)/8, $0x0000400000000000
DATA kq512q3h<>+208(SB)/8, $0x0000400000000000
DATA kq512q3h<>+216(SB)/8, $0x0000400000000000
DATA kq512q3h<>+224(SB)/8, $0x0000800000000000
DATA kq512q3h<>+232(SB)/8, $0x0000800000000000
DATA kq512q3h<>+240(SB)/8, $0x0000800000000000
DATA kq512q3h<>+248(SB)/8, $0x0000800000000000
GLOBL kq512q3h<>(SB), RODATA|NOPTR, $256

// affine, Q5_K chunk k: qh bit 2k (lower 256 bits), 2k+1 (upper) to bit 4
DATA kq512q5h<>+0(SB)/8, $0x0000000001000000
DATA kq512q5h<>+8(SB)/8, $0x0000000001000000
DATA kq512q5h<>+16(SB)/8, $0x0000000001000000
DATA kq512q5h<>+24(SB)/8, $0x0000000001000000
DATA kq512q5h<>+32(SB)/8, $0x0000000002000000
DATA kq512q5h<>+40(SB)/8, $0x0000000002000000
DATA kq512q5h<>+48(SB)/8, $0x0000000002000000
DATA kq512q5h<>+56(SB)/8, $0x0000000002000000
DATA kq512q5h<>+64(SB)/8, $0x0000000004000000
DATA kq512q5h<>+72(SB)/8, $0x0000000004000000
DATA kq512q5h<>+80(SB)/8, $0x0000000004000000
DATA kq512q5h<>+88(SB)/8, $0x0000000004000000
DATA kq512q5h<>+96(SB)/8, $0x0000000008000000
DATA kq512q5h<>+104(SB)/8, $0x0000000008000000
DATA kq512q5h<>+112(SB)/8, $0x0000000008000000
DATA kq512q5h<>+120(SB)/8, $0x0000000008000000
DATA kq512q5h<>+128(SB)/8, $0x0000000010000000
DATA kq512q5h<>+136(SB)/8, $0x0000000010000000
DATA kq512q5h<>+144(SB)/8, $0x0000000010000000
DATA kq512q5h<>+152(SB)/8, $0x0000000010000000
DATA kq512q5h<>+160(SB)/8, $0x0000000020000000
DATA kq512q5h<>+168(SB)/8, $0x0000000020000000
DATA kq512q5h<>+176(SB)/8, $0x0000000020000000
DATA kq512q5h<>+184(SB)/8, $0x0000000020000000
DATA kq512q5h<>+192(SB)/8, $0x0000000040000000
DATA kq512q5h<>+200(SB)/8, $0x0000000040000000
DATA kq512q5h<>+208(SB)/8, $0x0000000040000000
DATA kq512q5h<>+216(SB)/8, $0x0000000040000000
DATA kq512q5h<>+224(SB)/8, $0x0000000080000000
DATA kq512q5h<>+232(SB)/8, $0x0000000080000000
DATA kq512q5h<>+240(SB)/8, $0x0000000080000000
DATA kq512q5h<>+248(SB)/8, $0x0000000080000000
GLOBL kq512q5h<>(SB), RODATA|NOPTR, $256

// affine, Q6_K: qh bits 0-1, 2-3 (chunk 2h) and 4-5, 6-7 (chunk 2h+1) to bits 4-5
DATA kq512q6h<>+0(SB)/8, $0x0000000001020000
DATA kq512q6h<>+8(SB)/8, $0x0000000001020000
DATA kq512q6h<>+16(SB)/8, $0x0000000001020000
DATA kq512q6h<>+24(SB)/8, $0x0000000001020000
DATA kq512q6h<>+32(SB)/8, $0x0000000004080000
DATA kq512q6h<>+40(SB)/8, $0x0000000004080000
DATA kq512q6h<>+48(SB)/8, $0x0000000004080000
DATA kq512q6h<>+56(SB)/8, $0x0000000004080000
DATA kq512q6h<>+64(SB)/8, $0x0000000010200000
DATA kq512q6h<>+72(SB)/8, $0x0000000010200000
DATA kq512q6h<>+80(SB)/8, $0x0000000010200000
DATA kq512q6h<>+88(SB)/8, $0x0000000010200000
DATA kq512q6h<>+96(SB)/8, $0x0000000040800000
DATA kq512q6h<>+104(SB)/8, $0x0000000040800000
DATA kq512q6h<>+112(SB)/8, $0x0000000040800000
DATA kq512q6h<>+120(SB)/8, $0x0000000040800000
GLOBL kq512q6h<>(SB), RODATA|NOPTR, $128

// Q3_K: multishift control, bits 2(g/4), +1 of byte g to bits 4-5
DATA kq512q3sctl<>+0(SB)/8, $0x362e261e140c043c
DATA kq512q3sctl<>+8(SB)/8, $0x3a322a2218100800
GLOBL kq512q3sctl<>(SB), RODATA|NOPTR, $16

// 0x30 bytes (broadcast)
DATA kq512c30<>+0(SB)/4, $0x30303030
GLOBL kq512c30<>(SB), RODATA|NOPTR, $4

// 0x20 bytes
DATA kq512c20<>+0(SB)/8, $0x2020202020202020
DATA kq512c20<>+8(SB)/8, $0x2020202020202020
GLOBL kq512c20<>(SB), RODATA|NOPTR, $16

// VPERMB: as kq512idx32 (bytes, odd ones to be zeroed), from the bytes sc0-7, m0-7
DATA kq512bq4<>+0(SB)/8, $0x0000000000000000
DATA kq512bq4<>+8(SB)/8, $0x0002000200020002
DATA kq512bq4<>+16(SB)/8, $0x0000000000000000
DATA kq512bq4<>+24(SB)/8, $0x0002000200020002
DATA kq512bq4<>+32(SB)/8, $0x0001000100010001
DATA kq512bq4<>+40(SB)/8, $0x0003000300030003
DATA kq512bq4<>+48(SB)/8, $0x0001000100010001
DATA kq512bq4<>+56(SB)/8, $0x0003000300030003
DATA kq512bq4<>+64(SB)/8, $0x0004000400040004
DATA kq512bq4<>+72(SB)/8, $0x0006000600060006
DATA kq512bq4<>+80(SB)/8, $0x0004000400040004
DATA kq512bq4<>+88(SB)/8, $0x0006000600060006
DATA kq512bq4<>+96(SB)/8, $0x0005000500050005
DATA kq512bq4<>+104(SB)/8, $0x0007000700070007
DATA kq512bq4<>+112(SB)/8, $0x0005000500050005
DATA kq512bq4<>+120(SB)/8, $0x0007000700070007
GLOBL kq512bq4<>(SB), RODATA|NOPTR, $128

// VPERMB: word g the min of sub-block g/2, from the bytes sc0-7, m0-7
DATA kq512bq4min<>+0(SB)/8, $0x0009000900080008
DATA kq512bq4min<>+8(SB)/8, $0x000b000b000a000a
DATA kq512bq4min<>+16(SB)/8, $0x000d000d000c000c
DATA kq512bq4min<>+24(SB)/8, $0x000f000f000e000e
GLOBL kq512bq4min<>(SB), RODATA|NOPTR, $32

// VPERMB: as kq512idx16, from 16 scale bytes
DATA kq512bidx16<>+0(SB)/8, $0x0000000000000000
DATA kq512bidx16<>+8(SB)/8, $0x0004000400040004
DATA kq512bidx16<>+16(SB)/8, $0x0001000100010001
DATA kq512bidx16<>+24(SB)/8, $0x0005000500050005
DATA kq512bidx16<>+32(SB)/8, $0x0002000200020002
DATA kq512bidx16<>+40(SB)/8, $0x0006000600060006
DATA kq512bidx16<>+48(SB)/8, $0x0003000300030003
DATA kq512bidx16<>+56(SB)/8, $0x0007000700070007
DATA kq512bidx16<>+64(SB)/8, $0x0008000800080008
DATA kq512bidx16<>+72(SB)/8, $0x000c000c000c000c
DATA kq512bidx16<>+80(SB)/8, $0x0009000900090009
DATA kq512bidx16<>+88(SB)/8, $0x000d000d000d000d
DATA kq512bidx16<>+96(SB)/8, $0x000a000a000a000a
DATA kq512bidx16<>+104(SB)/8, $0x000e000e000e000e
DATA kq512bidx16<>+112(SB)/8, $0x000b000b000b000b
DATA kq512bidx16<>+120(SB)/8, $0x000f000f000f000f
GLOBL kq512bidx16<>(SB), RODATA|NOPTR, $128

// 0x0f bytes (broadcast)
DATA kq512c0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL kq512c0f<>(SB), RODATA|NOPTR, $4

// func kqQ2KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ2KAVX512(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q2K, KQ_DEC_Q2K, 84, 8, 12, KQ_ROW_START, KQ_COLUMNS, KQ_ROW_END)

// func kqQ2KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ2KAVX512R(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q2K, KQ_DEC_Q2K, 84, 8, 12, KQ_ROW_START_R, KQ_COLUMNS_R, KQ_ROW_END_R)

// func kqQ3KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ3KAVX512(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q3K, KQ_DEC_Q3K, 110, 12, 12, KQ_ROW_START, KQ_COLUMNS, KQ_ROW_END)

// func kqQ3KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ3KAVX512R(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q3K, KQ_DEC_Q3K, 110, 12, 12, KQ_ROW_START_R, KQ_COLUMNS_R, KQ_ROW_END_R)

// func kqQ4KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ4KAVX512(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q4K, KQ_DEC_Q4K, 144, 0, 4, KQ_ROW_START, KQ_COLUMNS, KQ_ROW_END)

// func kqQ4KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ4KAVX512R(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q4K, KQ_DEC_Q4K, 144, 0, 4, KQ_ROW_START_R, KQ_COLUMNS_R, KQ_ROW_END_R)

// func kqQ5KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ5KAVX512(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q5K, KQ_DEC_Q5K, 176, 0, 4, KQ_ROW_START, KQ_COLUMNS, KQ_ROW_END)

// func kqQ5KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ5KAVX512R(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q5K, KQ_DEC_Q5K, 176, 0, 4, KQ_ROW_START_R, KQ_COLUMNS_R, KQ_ROW_END_R)

// func kqQ6KAVX512(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ6KAVX512(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q6K, KQ_DEC_Q6K, 210, 12, 12, KQ_ROW_START, KQ_COLUMNS, KQ_ROW_END)

// func kqQ6KAVX512R(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ6KAVX512R(SB), NOSPLIT, $0-80
	KQ_KERNEL(KQ_CONST_Q6K, KQ_DEC_Q6K, 210, 12, 12, KQ_ROW_START_R, KQ_COLUMNS_R, KQ_ROW_END_R)

// func kqQ2KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ2KAVX512P(SB), NOSPLIT, $0-80
	KQ_KERNEL_P(KQ_CONST_Q2K, KQ_DEC_Q2K, 84, 8, 12)

// func kqQ3KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ3KAVX512P(SB), NOSPLIT, $0-80
	KQ_KERNEL_P(KQ_CONST_Q3K, KQ_DEC_Q3K, 110, 12, 12)

// func kqQ4KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ4KAVX512P(SB), NOSPLIT, $0-80
	KQ_KERNEL_P(KQ_CONST_Q4K, KQ_DEC_Q4K, 144, 0, 4)

// func kqQ5KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ5KAVX512P(SB), NOSPLIT, $0-80
	KQ_KERNEL_P(KQ_CONST_Q5K, KQ_DEC_Q5K, 176, 0, 4)

// func kqQ6KAVX512P(w *byte, wStride, rows, n int, a *byte, aStride, cols int, out *float32, outStride int, scratch *byte)
TEXT ·kqQ6KAVX512P(SB), NOSPLIT, $0-80
	KQ_KERNEL_P(KQ_CONST_Q6K, KQ_DEC_Q6K, 210, 12, 12)
