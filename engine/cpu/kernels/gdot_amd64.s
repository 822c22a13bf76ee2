//go:build amd64

#include "textflag.h"

// Fused few-column grouped kernels (AVX-512): for up to four activation
// columns (rows of one ActQ8G group), 16 weight rows at a time, without a
// panel. Per block, rows k and k+8 are loaded into the halves of Zk, the
// eight registers are transposed as two 8×8 matrices of dwords (unpacks
// within 128-bit lanes) and one 128-bit lane shuffle gives W_g: the four
// values 4g..4g+3 of each of the 16 rows, lane i holding row perm[i] =
// 0-3, 8-11, 4-7, 12-15 (lanes 4-7 and 8-11 swapped). The scales come by
// one gather in the same order (or word by word: GD_SCALES_NG), and the
// accumulators are put back in row order (VPERMD by the same involution)
// before the store. The arithmetic per (row, column) is the grouped
// kernels': exact integer block dot, one fused multiply-add per block (and
// one for the min).
//
// func gDot<T>x<C>(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
//
// Registers: R14 tile start; SI, R11 rows 0 and 8 at the block; R12, DX
// rows 0 and 8 at the prefetch cursor, R13 the blocks left in its row; BX,
// R8, R9, R10 1, 3, 5, 7 row strides; CX blocks left; DI the group's block
// record; AX tiles left. Frame: the out pointer, the cursor's jump from a
// row's end to the next tile, R13 across the store (R13 out and DX its
// stride at the store). Z0-Z7 row pairs (then column temporaries), Z8-Z15
// transpose temporaries (X12 and X13 then the scale halves of
// GD_SCALES_NG), Z16-Z23 W_g, Z24 the scales, Z25-Z28 accumulators, Z29 a
// byte constant, Z30 the gather offsets (Q8_0 with the gather) or the
// quant bytes' VPERMB index (the 4- and 5-bit types, which take the scales
// from the pairs loaded at the block start instead of a gather), X31 the
// shift (Z31 the mins of the types with one).

DATA gdPerm<>+0(SB)/4, $0
DATA gdPerm<>+4(SB)/4, $1
DATA gdPerm<>+8(SB)/4, $2
DATA gdPerm<>+12(SB)/4, $3
DATA gdPerm<>+16(SB)/4, $8
DATA gdPerm<>+20(SB)/4, $9
DATA gdPerm<>+24(SB)/4, $10
DATA gdPerm<>+28(SB)/4, $11
DATA gdPerm<>+32(SB)/4, $4
DATA gdPerm<>+36(SB)/4, $5
DATA gdPerm<>+40(SB)/4, $6
DATA gdPerm<>+44(SB)/4, $7
DATA gdPerm<>+48(SB)/4, $12
DATA gdPerm<>+52(SB)/4, $13
DATA gdPerm<>+56(SB)/4, $14
DATA gdPerm<>+60(SB)/4, $15
GLOBL gdPerm<>(SB), RODATA|NOPTR, $64

// qword shift counts: the high nibbles of each row's 16 bytes to the
// second and fourth 128-bit lanes
DATA gdNib<>+0(SB)/8, $0
DATA gdNib<>+8(SB)/8, $0
DATA gdNib<>+16(SB)/8, $4
DATA gdNib<>+24(SB)/8, $4
DATA gdNib<>+32(SB)/8, $0
DATA gdNib<>+40(SB)/8, $0
DATA gdNib<>+48(SB)/8, $4
DATA gdNib<>+56(SB)/8, $4
GLOBL gdNib<>(SB), RODATA|NOPTR, $64

DATA gd10<>+0(SB)/8, $0x1010101010101010
DATA gd10<>+8(SB)/8, $0x1010101010101010
DATA gd10<>+16(SB)/8, $0x1010101010101010
DATA gd10<>+24(SB)/8, $0x1010101010101010
DATA gd10<>+32(SB)/8, $0x1010101010101010
DATA gd10<>+40(SB)/8, $0x1010101010101010
DATA gd10<>+48(SB)/8, $0x1010101010101010
DATA gd10<>+56(SB)/8, $0x1010101010101010
GLOBL gd10<>(SB), RODATA|NOPTR, $64

// VPERMB: bytes 0-15 of each row of a pair, twice (GD_INIT_NIB adds the
// offset of the quants in the block)
DATA gdNibIdx<>+0(SB)/8, $0x0706050403020100
DATA gdNibIdx<>+8(SB)/8, $0x0f0e0d0c0b0a0908
DATA gdNibIdx<>+16(SB)/8, $0x0706050403020100
DATA gdNibIdx<>+24(SB)/8, $0x0f0e0d0c0b0a0908
DATA gdNibIdx<>+32(SB)/8, $0x2726252423222120
DATA gdNibIdx<>+40(SB)/8, $0x2f2e2d2c2b2a2928
DATA gdNibIdx<>+48(SB)/8, $0x2726252423222120
DATA gdNibIdx<>+56(SB)/8, $0x2f2e2d2c2b2a2928
GLOBL gdNibIdx<>(SB), RODATA|NOPTR, $64

// VPERMQ: qwords 0, 4, 1, 5 (the scales of rows 0-3, 8-11, 4-7, 12-15)
DATA gdQIdx<>+0(SB)/8, $0
DATA gdQIdx<>+8(SB)/8, $4
DATA gdQIdx<>+16(SB)/8, $1
DATA gdQIdx<>+24(SB)/8, $5
DATA gdQIdx<>+32(SB)/8, $0
DATA gdQIdx<>+40(SB)/8, $0
DATA gdQIdx<>+48(SB)/8, $0
DATA gdQIdx<>+56(SB)/8, $0
GLOBL gdQIdx<>(SB), RODATA|NOPTR, $64

// GD_TRANSPOSE turns the row pairs Z0-Z7 into W_0..W_7 in Z16-Z23.
#define GD_TRANSPOSE \
	VPUNPCKLDQ Z1, Z0, Z8 \
	VPUNPCKHDQ Z1, Z0, Z9 \
	VPUNPCKLDQ Z3, Z2, Z10 \
	VPUNPCKHDQ Z3, Z2, Z11 \
	VPUNPCKLDQ Z5, Z4, Z12 \
	VPUNPCKHDQ Z5, Z4, Z13 \
	VPUNPCKLDQ Z7, Z6, Z14 \
	VPUNPCKHDQ Z7, Z6, Z15 \
	VPUNPCKLQDQ Z10, Z8, Z0 \
	VPUNPCKHQDQ Z10, Z8, Z1 \
	VPUNPCKLQDQ Z11, Z9, Z2 \
	VPUNPCKHQDQ Z11, Z9, Z3 \
	VPUNPCKLQDQ Z14, Z12, Z4 \
	VPUNPCKHQDQ Z14, Z12, Z5 \
	VPUNPCKLQDQ Z15, Z13, Z6 \
	VPUNPCKHQDQ Z15, Z13, Z7 \
	VSHUFI64X2 $0x88, Z4, Z0, Z16 \
	VSHUFI64X2 $0x88, Z5, Z1, Z17 \
	VSHUFI64X2 $0x88, Z6, Z2, Z18 \
	VSHUFI64X2 $0x88, Z7, Z3, Z19 \
	VSHUFI64X2 $0xdd, Z4, Z0, Z20 \
	VSHUFI64X2 $0xdd, Z5, Z1, Z21 \
	VSHUFI64X2 $0xdd, Z6, Z2, Z22 \
	VSHUFI64X2 $0xdd, Z7, Z3, Z23

// GD_SCALES gathers the 16 rows' first block dwords: the scales (and mins)
// as float32 into Z24 (Z15).
#define GD_SCALES(MINS) \
	KXNORW K3, K3, K3 \
	VPGATHERDD 0(SI)(Z30*1), K3, Z24 \
	MINS \
	VPMOVDW Z24, Y24 \
	VCVTPH2PS Y24, Z24

#define GD_MINS \
	VPSRLD $16, Z24, Z15 \
	VPMOVDW Z15, Y15 \
	VCVTPH2PS Y15, Z15

#define GD_NOMINS

// GD_SCALES_NG is GD_SCALES (without mins) for the CPUs where a gather is
// slow (under the Gather Data Sampling mitigation, tens of cycles): the 16
// rows' scale words are inserted one by one into X12 (lanes 0-7) and X13
// (lanes 8-15), two independent chains, in the gather's lane order; the
// halves are joined and converted to float32 into Z24, the values the
// gather gives. Z12 and Z13 are free after the transpose.
#define GD_SCALES_NG \
	VPINSRW $0, (SI), X12, X12 \
	VPINSRW $0, (SI)(BX*4), X13, X13 \
	VPINSRW $1, (SI)(BX*1), X12, X12 \
	VPINSRW $1, (SI)(R9*1), X13, X13 \
	VPINSRW $2, (SI)(BX*2), X12, X12 \
	VPINSRW $2, (SI)(R8*2), X13, X13 \
	VPINSRW $3, (SI)(R8*1), X12, X12 \
	VPINSRW $3, (SI)(R10*1), X13, X13 \
	VPINSRW $4, (R11), X12, X12 \
	VPINSRW $4, (R11)(BX*4), X13, X13 \
	VPINSRW $5, (R11)(BX*1), X12, X12 \
	VPINSRW $5, (R11)(R9*1), X13, X13 \
	VPINSRW $6, (R11)(BX*2), X12, X12 \
	VPINSRW $6, (R11)(R8*2), X13, X13 \
	VPINSRW $7, (R11)(R8*1), X12, X12 \
	VPINSRW $7, (R11)(R10*1), X13, X13 \
	VINSERTI128 $1, X13, Y12, Y12 \
	VCVTPH2PS Y12, Z24

// GD_COL adds column c's block (record at DI) times W to accumulator acc,
// with temporaries t0-t2; MIN adds the min term.
// GD_DOTS adds column c's integer block dot with W to t0 (groups 0-3) and
// t1 (groups 4-7).
// The activation records have L lanes (16: ActQ8G; 4 or 1: the narrow
// copies of NarrowQ8G): value group g of lane c at g·4L + 4c, the scale,
// negated sum and d·sum at 32L, 36L and 40L (+4c), 44L bytes a record.
#define GD_DOTS(c, t0, t1, L) \
	VPDPBUSD.BCST (0*4*L+4*c)(DI), Z16, t0 \
	VPDPBUSD.BCST (4*4*L+4*c)(DI), Z20, t1 \
	VPDPBUSD.BCST (1*4*L+4*c)(DI), Z17, t0 \
	VPDPBUSD.BCST (5*4*L+4*c)(DI), Z21, t1 \
	VPDPBUSD.BCST (2*4*L+4*c)(DI), Z18, t0 \
	VPDPBUSD.BCST (6*4*L+4*c)(DI), Z22, t1 \
	VPDPBUSD.BCST (3*4*L+4*c)(DI), Z19, t0 \
	VPDPBUSD.BCST (7*4*L+4*c)(DI), Z23, t1

#define GD_COL(c, acc, t0, t1, t2, MIN, L) \
	VPBROADCASTD (36*L+4*c)(DI), t0 \
	VPSLLD X31, t0, t0 \
	VPXORD t1, t1, t1 \
	GD_DOTS(c, t0, t1, L) \
	VPADDD t1, t0, t0 \
	VCVTDQ2PS t0, t0 \
	VMULPS.BCST (32*L+4*c)(DI), Z24, t2 \
	VFMADD231PS t2, t0, acc \
	MIN(c, acc, L)

// GD_COLM is GD_COL for the types with a min (no quant offset), the
// mins in Z31.
#define GD_COLM(c, acc, t0, t1, t2, L) \
	VPXORD t0, t0, t0 \
	VPXORD t1, t1, t1 \
	GD_DOTS(c, t0, t1, L) \
	VPADDD t1, t0, t0 \
	VCVTDQ2PS t0, t0 \
	VMULPS.BCST (32*L+4*c)(DI), Z24, t2 \
	VFMADD231PS t2, t0, acc \
	VFMADD231PS.BCST (40*L+4*c)(DI), Z31, acc

#define GD_MIN(c, acc, L) VFMADD231PS.BCST (40*L+4*c)(DI), Z15, acc
#define GD_NOMIN(c, acc, L)

// GD_INIT_GATHER sets Z30 to the byte offsets of the rows (in lane order)
// for the scale gather.
#define GD_INIT_GATHER \
	VPBROADCASTD BX, Z30 \
	VPMULLD gdPerm<>(SB), Z30, Z30

// GD_NOINIT sets nothing up (Q8_0 without the gather).
#define GD_NOINIT

// GD_INIT_NIB(qs) sets Z30 to the VPERMB index of the quant bytes, which
// start at qs in a block.
#define GD_INIT_NIB(qs) \
	MOVL $(qs*0x01010101), CX \
	VPBROADCASTD CX, Z0 \
	VPADDB gdNibIdx<>(SB), Z0, Z30

// GD_NIB_SCALES collects the halves at words 0 and 16 of the row pairs
// Z0-Z7 (each row's block start) into the lane order of W and converts
// them to float32 in Z24 (words 1 and 17, the mins, into Z31 with MINS):
// word unpacks pair the registers up, dword unpacks put the scales of four
// rows in one qword (the mins in the next), one qword permutation orders
// them.
#define GD_NIB_SCALES(MINS) \
	VPUNPCKLWD Z1, Z0, Z8 \
	VPUNPCKLWD Z3, Z2, Z9 \
	VPUNPCKLWD Z5, Z4, Z10 \
	VPUNPCKLWD Z7, Z6, Z11 \
	VPUNPCKLDQ Z9, Z8, Z12 \
	VPUNPCKLDQ Z11, Z10, Z13 \
	VPUNPCKLQDQ Z13, Z12, Z14 \
	VMOVDQU64 gdQIdx<>(SB), Z15 \
	VPERMQ Z14, Z15, Z24 \
	VCVTPH2PS Y24, Z24 \
	MINS

#define GD_NIB_MINS \
	VPUNPCKHQDQ Z13, Z12, Z14 \
	VPERMQ Z14, Z15, Z31 \
	VCVTPH2PS Y31, Z31

#define GD_NIB_NOMINS

#define GD_NOSCALES

#define GD_COLS1(COL) \
	COL(0, Z25, Z0, Z1, Z2)

#define GD_COLS2(COL) \
	COL(0, Z25, Z0, Z1, Z2) \
	COL(1, Z26, Z3, Z4, Z5)

#define GD_COLS4(COL) \
	COL(0, Z25, Z0, Z1, Z2) \
	COL(1, Z26, Z3, Z4, Z5) \
	COL(2, Z27, Z6, Z7, Z8) \
	COL(3, Z28, Z9, Z10, Z11)

// The column forms of each record width (GD_COLS<n> take five
// arguments): GD_COLQ8<L> for the types without a min (Q8_0's mins
// unused), GD_COLM<L> with one.
#define GD_COLQ816(c, acc, t0, t1, t2) GD_COL(c, acc, t0, t1, t2, GD_NOMIN, 16)
#define GD_COLQ84(c, acc, t0, t1, t2) GD_COL(c, acc, t0, t1, t2, GD_NOMIN, 4)
#define GD_COLQ81(c, acc, t0, t1, t2) GD_COL(c, acc, t0, t1, t2, GD_NOMIN, 1)
#define GD_COLM16(c, acc, t0, t1, t2) GD_COLM(c, acc, t0, t1, t2, 16)
#define GD_COLM4(c, acc, t0, t1, t2) GD_COLM(c, acc, t0, t1, t2, 4)
#define GD_COLM1(c, acc, t0, t1, t2) GD_COLM(c, acc, t0, t1, t2, 1)

// GD_STORE puts accumulator acc back in row order and stores it at op.
#define GD_STORE(acc, op) \
	VPERMD acc, Z14, acc \
	VMOVUPS acc, op

#define GD_STORE1 \
	GD_STORE(Z25, (R13))

#define GD_STORE2 \
	GD_STORE1 \
	CMPQ cols+64(FP), $2 \
	JLT stored \
	GD_STORE(Z26, (R13)(DX*1))

#define GD_STORE4 \
	GD_STORE2 \
	CMPQ cols+64(FP), $3 \
	JLT stored \
	GD_STORE(Z27, (R13)(DX*2)) \
	CMPQ cols+64(FP), $4 \
	JLT stored \
	LEAQ (DX)(DX*2), CX \
	GD_STORE(Z28, (R13)(CX*1))

// GD_PF prefetches the bytes of one block of 16 rows at the prefetch
// cursor (R12 and DX point at its rows 0 and 8). The rows are short
// streams the hardware does not follow (without this the kernels read 2-4x
// slower), so the cursor runs GD_PF_BYTES of weights ahead of the reads in
// the order the kernel reads them: block by block along the tile, then the
// next tile's first block (GD_PF_STEP). A fixed distance keeps what is in
// flight within the first-level cache whatever the row length: one tile
// ahead, as these kernels prefetched before, was 82 KiB for the rows of a
// 4864-wide matrix, and its multiplication read 20% faster with the cursor
// in a decode step of the 0.5B shape. The prefetches are non-temporal
// (PREFETCHNTA): these kernels read each weight byte once per call. In
// four paired rounds a two-thread decode of the 0.5B Q8_0 shape ran
// 69.5-72.4 tok/s with PREFETCHT0 and 71.3-79.9 (three of them 78.6-79.9)
// with PREFETCHNTA, and +3% on the mean of six noisier rounds; one thread
// +2% on the mean, the Q4_K_M file +3-6%. 4 or 16 KiB ahead was slower
// than 8 with either.
#define GD_PF_BYTES 8192

#define GD_PF8(base) \
	PREFETCHNTA (base) \
	PREFETCHNTA (base)(BX*1) \
	PREFETCHNTA (base)(BX*2) \
	PREFETCHNTA (base)(R8*1) \
	PREFETCHNTA (base)(BX*4) \
	PREFETCHNTA (base)(R9*1) \
	PREFETCHNTA (base)(R8*2) \
	PREFETCHNTA (base)(R10*1)

#define GD_PF \
	GD_PF8(R12) \
	GD_PF8(DX)

// GD_KERNEL is a kernel's body: c the byte constant in Z29, INIT the
// setup of Z30, PAIRS the decoding of the row pairs, SCALES the scales
// (unless PAIRS has them), COL the column form (with its min term and
// record width), COLS and STORE the column count's forms, bb the block
// size, ab the activation record's. Before the first
// tile the prefetch cursor runs GD_PF_BYTES ahead from the first block,
// prefetching as it goes (burst), so a call's first tile is not read cold.
#define GD_KERNEL(c, INIT, PAIRS, SCALES, COL, COLS, STORE, bb, ab) \
	MOVQ w+0(FP), R14 \
	MOVQ wStride+8(FP), BX \
	MOVQ tiles+16(FP), AX \
	MOVQ shift+40(FP), CX \
	VMOVQ CX, X31 \
	MOVQ out+48(FP), R13 \
	MOVQ R13, outp-8(SP) \
	LEAQ (BX)(BX*2), R8 \
	LEAQ (BX)(BX*4), R9 \
	LEAQ (R8)(BX*4), R10 \
	MOVL $c, CX \
	VPBROADCASTD CX, Z29 \
	INIT \
	TESTQ AX, AX \
	JZ done \
	MOVQ BX, CX \
	SHLQ $4, CX \
	MOVQ nb+24(FP), DX \
	IMULQ $bb, DX \
	SUBQ DX, CX \
	MOVQ CX, pfwrap-16(SP) \
	MOVQ R14, R12 \
	MOVQ nb+24(FP), R13 \
	LEAQ (R12)(BX*8), DX \
	MOVQ $(GD_PF_BYTES/(16*bb)), CX \
burst: \
	GD_PF \
	GD_PF_STEP(bb, burstok) \
	DECQ CX \
	JNZ burst \
tile: \
	MOVQ R14, SI \
	LEAQ (R14)(BX*8), R11 \
	MOVQ act+32(FP), DI \
	MOVQ nb+24(FP), CX \
	VPXORD Z25, Z25, Z25 \
	VPXORD Z26, Z26, Z26 \
	VPXORD Z27, Z27, Z27 \
	VPXORD Z28, Z28, Z28 \
block: \
	GD_PF \
	GD_PF_STEP(bb, blockok) \
	PAIRS \
	GD_TRANSPOSE \
	SCALES \
	COLS(COL) \
	ADDQ $bb, SI \
	ADDQ $bb, R11 \
	ADDQ $ab, DI \
	DECQ CX \
	JNZ block \
	MOVQ R13, pfl-24(SP) \
	MOVQ outp-8(SP), R13 \
	MOVQ outStride+56(FP), DX \
	SHLQ $2, DX \
	VMOVDQU32 gdPerm<>(SB), Z14 \
	STORE \
stored: \
	ADDQ $64, R13 \
	MOVQ R13, outp-8(SP) \
	MOVQ pfl-24(SP), R13 \
	LEAQ (R12)(BX*8), DX \
	LEAQ (R14)(BX*8), R14 \
	LEAQ (R14)(BX*8), R14 \
	DECQ AX \
	JNZ tile \
done: \
	VZEROUPPER \
	RET

// GD_PF_STEP moves the prefetch cursor (R12 row 0, DX row 8) one block on
// in the order the kernel reads: after a row's last block to the next
// tile's first (R13 counts the blocks left in the row).
#define GD_PF_STEP(bb, lbl) \
	ADDQ $bb, R12 \
	DECQ R13 \
	JNZ lbl \
	ADDQ pfwrap-16(SP), R12 \
	MOVQ nb+24(FP), R13 \
lbl: \
	LEAQ (R12)(BX*8), DX

// GD_ROWS8 applies OP to the eight row pairs: the addressing of rows k and
// k+8 (without displacement) and the Y and Z names of register k.
#define GD_ROWS8(OP) \
	OP((SI), (R11), Y0, Z0) \
	OP((SI)(BX*1), (R11)(BX*1), Y1, Z1) \
	OP((SI)(BX*2), (R11)(BX*2), Y2, Z2) \
	OP((SI)(R8*1), (R11)(R8*1), Y3, Z3) \
	OP((SI)(BX*4), (R11)(BX*4), Y4, Z4) \
	OP((SI)(R9*1), (R11)(R9*1), Y5, Z5) \
	OP((SI)(R8*2), (R11)(R8*2), Y6, Z6) \
	OP((SI)(R10*1), (R11)(R10*1), Y7, Z7)

// GD_PAIR_Q8 loads the 32 quants of a Q8_0 row pair and adds 128.
#define GD_PAIR_Q8(a, b, y, z) \
	VMOVDQU8 2 a, y \
	VINSERTI64X4 $1, 2 b, z, z \
	VPXORD Z29, z, z

// GD_PAIR_RAW loads 32 bytes of a row pair from the block start.
#define GD_PAIR_RAW(a, b, y, z) \
	VMOVDQU 0 a, y \
	VINSERTI64X4 $1, 0 b, z, z

// GD_PAIR_NIB turns a raw row pair into its 4-bit quants: the quant bytes
// twice per row (VPERMB by Z30), the high nibbles of the second copy
// shifted down, the low 4 bits kept.
#define GD_PAIR_NIB(a, b, y, z) \
	VPERMB z, Z30, z \
	VPSRLVQ gdNib<>(SB), z, z \
	VPANDD Z29, z, z

// GD_HIGH adds 16 to the quants whose bit is set in the 32 bits at off of
// each row of the pair.
#define GD_HIGH(off, a, b, z) \
	KMOVD off a, K1 \
	KMOVD off b, K2 \
	KUNPCKDQ K1, K2, K1 \
	VPADDB gd10<>(SB), z, K1, z

#define GD_PAIR_HIGH2(a, b, y, z) GD_HIGH(2, a, b, z)
#define GD_PAIR_HIGH4(a, b, y, z) GD_HIGH(4, a, b, z)
#define GD_HIGHS2 GD_ROWS8(GD_PAIR_HIGH2)
#define GD_HIGHS4 GD_ROWS8(GD_PAIR_HIGH4)
#define GD_NOHIGHS

// GD_PAIRS_NIB decodes the row pairs of a 4- or 5-bit type: raw loads, the
// scales (and mins) from them, the quants, their high bits.
#define GD_PAIRS_NIB(MINS, HIGHS) \
	GD_ROWS8(GD_PAIR_RAW) \
	GD_NIB_SCALES(MINS) \
	GD_ROWS8(GD_PAIR_NIB) \
	HIGHS

#define GD_PAIRS_Q8_0 GD_ROWS8(GD_PAIR_Q8)
#define GD_PAIRS_Q4_0 GD_PAIRS_NIB(GD_NIB_NOMINS, GD_NOHIGHS)
#define GD_PAIRS_Q4_1 GD_PAIRS_NIB(GD_NIB_MINS, GD_NOHIGHS)
#define GD_PAIRS_Q5_0 GD_PAIRS_NIB(GD_NIB_NOMINS, GD_HIGHS2)
#define GD_PAIRS_Q5_1 GD_PAIRS_NIB(GD_NIB_MINS, GD_HIGHS4)

// func gDotQ8_0x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0x1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_INIT_GATHER, GD_PAIRS_Q8_0, GD_SCALES(GD_NOMINS), GD_COLQ816, GD_COLS1, GD_STORE1, 34, 704)

// func gDotQ8_0x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0x2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_INIT_GATHER, GD_PAIRS_Q8_0, GD_SCALES(GD_NOMINS), GD_COLQ816, GD_COLS2, GD_STORE2, 34, 704)

// func gDotQ8_0x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0x4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_INIT_GATHER, GD_PAIRS_Q8_0, GD_SCALES(GD_NOMINS), GD_COLQ816, GD_COLS4, GD_STORE4, 34, 704)

// func gDotQ4_0x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_0x1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(2), GD_PAIRS_Q4_0, GD_NOSCALES, GD_COLQ816, GD_COLS1, GD_STORE1, 18, 704)

// func gDotQ4_0x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_0x2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(2), GD_PAIRS_Q4_0, GD_NOSCALES, GD_COLQ816, GD_COLS2, GD_STORE2, 18, 704)

// func gDotQ4_0x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_0x4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(2), GD_PAIRS_Q4_0, GD_NOSCALES, GD_COLQ816, GD_COLS4, GD_STORE4, 18, 704)

// func gDotQ4_1x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_1x1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(4), GD_PAIRS_Q4_1, GD_NOSCALES, GD_COLM16, GD_COLS1, GD_STORE1, 20, 704)

// func gDotQ4_1x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_1x2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(4), GD_PAIRS_Q4_1, GD_NOSCALES, GD_COLM16, GD_COLS2, GD_STORE2, 20, 704)

// func gDotQ4_1x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_1x4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(4), GD_PAIRS_Q4_1, GD_NOSCALES, GD_COLM16, GD_COLS4, GD_STORE4, 20, 704)

// func gDotQ5_0x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_0x1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(6), GD_PAIRS_Q5_0, GD_NOSCALES, GD_COLQ816, GD_COLS1, GD_STORE1, 22, 704)

// func gDotQ5_0x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_0x2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(6), GD_PAIRS_Q5_0, GD_NOSCALES, GD_COLQ816, GD_COLS2, GD_STORE2, 22, 704)

// func gDotQ5_0x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_0x4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(6), GD_PAIRS_Q5_0, GD_NOSCALES, GD_COLQ816, GD_COLS4, GD_STORE4, 22, 704)

// func gDotQ5_1x1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_1x1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(8), GD_PAIRS_Q5_1, GD_NOSCALES, GD_COLM16, GD_COLS1, GD_STORE1, 24, 704)

// func gDotQ5_1x2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_1x2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(8), GD_PAIRS_Q5_1, GD_NOSCALES, GD_COLM16, GD_COLS2, GD_STORE2, 24, 704)

// func gDotQ5_1x4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_1x4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(8), GD_PAIRS_Q5_1, GD_NOSCALES, GD_COLM16, GD_COLS4, GD_STORE4, 24, 704)

// The same kernels over narrow activation records (NarrowQ8G): one lane
// for one column, four for two to four.

// func gDotQ8_0n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0n1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_INIT_GATHER, GD_PAIRS_Q8_0, GD_SCALES(GD_NOMINS), GD_COLQ81, GD_COLS1, GD_STORE1, 34, 44)

// func gDotQ8_0n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0n2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_INIT_GATHER, GD_PAIRS_Q8_0, GD_SCALES(GD_NOMINS), GD_COLQ84, GD_COLS2, GD_STORE2, 34, 176)

// func gDotQ8_0n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0n4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_INIT_GATHER, GD_PAIRS_Q8_0, GD_SCALES(GD_NOMINS), GD_COLQ84, GD_COLS4, GD_STORE4, 34, 176)

// func gDotQ4_0n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_0n1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(2), GD_PAIRS_Q4_0, GD_NOSCALES, GD_COLQ81, GD_COLS1, GD_STORE1, 18, 44)

// func gDotQ4_0n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_0n2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(2), GD_PAIRS_Q4_0, GD_NOSCALES, GD_COLQ84, GD_COLS2, GD_STORE2, 18, 176)

// func gDotQ4_0n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_0n4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(2), GD_PAIRS_Q4_0, GD_NOSCALES, GD_COLQ84, GD_COLS4, GD_STORE4, 18, 176)

// func gDotQ4_1n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_1n1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(4), GD_PAIRS_Q4_1, GD_NOSCALES, GD_COLM1, GD_COLS1, GD_STORE1, 20, 44)

// func gDotQ4_1n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_1n2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(4), GD_PAIRS_Q4_1, GD_NOSCALES, GD_COLM4, GD_COLS2, GD_STORE2, 20, 176)

// func gDotQ4_1n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ4_1n4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(4), GD_PAIRS_Q4_1, GD_NOSCALES, GD_COLM4, GD_COLS4, GD_STORE4, 20, 176)

// func gDotQ5_0n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_0n1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(6), GD_PAIRS_Q5_0, GD_NOSCALES, GD_COLQ81, GD_COLS1, GD_STORE1, 22, 44)

// func gDotQ5_0n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_0n2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(6), GD_PAIRS_Q5_0, GD_NOSCALES, GD_COLQ84, GD_COLS2, GD_STORE2, 22, 176)

// func gDotQ5_0n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_0n4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(6), GD_PAIRS_Q5_0, GD_NOSCALES, GD_COLQ84, GD_COLS4, GD_STORE4, 22, 176)

// func gDotQ5_1n1(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_1n1(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(8), GD_PAIRS_Q5_1, GD_NOSCALES, GD_COLM1, GD_COLS1, GD_STORE1, 24, 44)

// func gDotQ5_1n2(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_1n2(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(8), GD_PAIRS_Q5_1, GD_NOSCALES, GD_COLM4, GD_COLS2, GD_STORE2, 24, 176)

// func gDotQ5_1n4(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ5_1n4(SB), NOSPLIT, $24-72
	GD_KERNEL(0x0f0f0f0f, GD_INIT_NIB(8), GD_PAIRS_Q5_1, GD_NOSCALES, GD_COLM4, GD_COLS4, GD_STORE4, 24, 176)

// The Q8_0 kernels again with GD_SCALES_NG instead of the gather (the
// level AVX512NoGather): the same arithmetic.

// func gDotQ8_0x1ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0x1ng(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_NOINIT, GD_PAIRS_Q8_0, GD_SCALES_NG, GD_COLQ816, GD_COLS1, GD_STORE1, 34, 704)

// func gDotQ8_0x2ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0x2ng(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_NOINIT, GD_PAIRS_Q8_0, GD_SCALES_NG, GD_COLQ816, GD_COLS2, GD_STORE2, 34, 704)

// func gDotQ8_0x4ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0x4ng(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_NOINIT, GD_PAIRS_Q8_0, GD_SCALES_NG, GD_COLQ816, GD_COLS4, GD_STORE4, 34, 704)

// func gDotQ8_0n1ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0n1ng(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_NOINIT, GD_PAIRS_Q8_0, GD_SCALES_NG, GD_COLQ81, GD_COLS1, GD_STORE1, 34, 44)

// func gDotQ8_0n2ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0n2ng(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_NOINIT, GD_PAIRS_Q8_0, GD_SCALES_NG, GD_COLQ84, GD_COLS2, GD_STORE2, 34, 176)

// func gDotQ8_0n4ng(w *byte, wStride, tiles, nb int, act *byte, shift int, out *float32, outStride, cols int)
TEXT ·gDotQ8_0n4ng(SB), NOSPLIT, $24-72
	GD_KERNEL(0x80808080, GD_NOINIT, GD_PAIRS_Q8_0, GD_SCALES_NG, GD_COLQ84, GD_COLS4, GD_STORE4, 34, 176)
