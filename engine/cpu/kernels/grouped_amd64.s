//go:build amd64

#include "textflag.h"
#include "quant_amd64.h"

// Grouped kernels for AVX-512 (F, BW, VL, VNNI): see grouped.go for the
// arithmetic and grouped_amd64.go for the driver.
//
// A panel holds 16 weight rows of up to gChunk blocks, decoded to unsigned
// bytes (the stored quants, plus 128 for Q8_0) and laid out as the
// activations of an ActQ8G group: block b's values 4g..4g+3 of row r at
// b·512 + g·64 + r·4; the block's scale (and min) as float32 at b·16+r of
// dw (mw). The micro-kernel multiplies a panel by one ActQ8G group: lane c of
// accumulator r is the pair (row r, column c), and per block and row
//
//	t = −off·Σa + Σ_g VPDPBUSD(u_g, a_g)  (the exact integer dot)
//	acc += float(t) · (da·d)               (one fused multiply-add)
//	acc += s·m                             (types with a min)

// G_ROW runs panel row r against the group's block in Z16-Z23 (values),
// Z24 (scales), Z25 (−off·Σa) and Z26 (d·Σa), into accumulator acc.
#define G_ROW(r, acc) \
	VMOVDQA32 Z25, Z27 \
	VPBROADCASTD (0+r*4)(SI), Z29 \
	VPDPBUSD Z16, Z29, Z27 \
	VPBROADCASTD (64+r*4)(SI), Z30 \
	VPDPBUSD Z17, Z30, Z27 \
	VPBROADCASTD (128+r*4)(SI), Z29 \
	VPDPBUSD Z18, Z29, Z27 \
	VPBROADCASTD (192+r*4)(SI), Z30 \
	VPDPBUSD Z19, Z30, Z27 \
	VPBROADCASTD (256+r*4)(SI), Z29 \
	VPDPBUSD Z20, Z29, Z27 \
	VPBROADCASTD (320+r*4)(SI), Z30 \
	VPDPBUSD Z21, Z30, Z27 \
	VPBROADCASTD (384+r*4)(SI), Z29 \
	VPDPBUSD Z22, Z29, Z27 \
	VPBROADCASTD (448+r*4)(SI), Z30 \
	VPDPBUSD Z23, Z30, Z27 \
	VCVTDQ2PS Z27, Z27 \
	VMULPS.BCST (r*4)(DX), Z24, Z28 \
	VFMADD231PS Z28, Z27, acc

// G_MIN adds the min term of row r to acc.
#define G_MIN(r, acc) \
	VFMADD231PS.BCST (r*4)(R8), Z26, acc

#define G_ROWS(ROW) \
	ROW(0, Z0) \
	ROW(1, Z1) \
	ROW(2, Z2) \
	ROW(3, Z3) \
	ROW(4, Z4) \
	ROW(5, Z5) \
	ROW(6, Z6) \
	ROW(7, Z7) \
	ROW(8, Z8) \
	ROW(9, Z9) \
	ROW(10, Z10) \
	ROW(11, Z11) \
	ROW(12, Z12) \
	ROW(13, Z13) \
	ROW(14, Z14) \
	ROW(15, Z15)

#define G_ROW_MIN(r, acc) \
	G_ROW(r, acc) \
	G_MIN(r, acc)

// G_ACC loads (op VMOVUPS from memory) or stores the accumulators at BX.
#define G_LOAD_ACC \
	Z_LOAD16(BX)

#define G_STORE_ACC \
	VMOVUPS Z0, 0(BX) \
	VMOVUPS Z1, 64(BX) \
	VMOVUPS Z2, 128(BX) \
	VMOVUPS Z3, 192(BX) \
	VMOVUPS Z4, 256(BX) \
	VMOVUPS Z5, 320(BX) \
	VMOVUPS Z6, 384(BX) \
	VMOVUPS Z7, 448(BX) \
	VMOVUPS Z8, 512(BX) \
	VMOVUPS Z9, 576(BX) \
	VMOVUPS Z10, 640(BX) \
	VMOVUPS Z11, 704(BX) \
	VMOVUPS Z12, 768(BX) \
	VMOVUPS Z13, 832(BX) \
	VMOVUPS Z14, 896(BX) \
	VMOVUPS Z15, 960(BX)

// G_LOAD_BLOCK loads the group's block record at DI and computes
// Z25 = nsum << shift (X31 holds the shift count).
#define G_LOAD_BLOCK \
	VMOVDQU32 0(DI), Z16 \
	VMOVDQU32 64(DI), Z17 \
	VMOVDQU32 128(DI), Z18 \
	VMOVDQU32 192(DI), Z19 \
	VMOVDQU32 256(DI), Z20 \
	VMOVDQU32 320(DI), Z21 \
	VMOVDQU32 384(DI), Z22 \
	VMOVDQU32 448(DI), Z23 \
	VMOVUPS 512(DI), Z24 \
	VMOVDQU32 576(DI), Z25 \
	VPSLLD X31, Z25, Z25 \
	VMOVUPS 640(DI), Z26

// G_PREFETCH prefetches R10 cache lines from R9 on (the weights of the
// next panel) and advances R9.
#define G_PREFETCH \
	MOVQ R10, R11 \
	TESTQ R11, R11 \
	JZ prefetched \
prefetch: \
	PREFETCHT0 (R9) \
	ADDQ $64, R9 \
	DECQ R11 \
	JNZ prefetch \
prefetched:

#define G_MICRO(ROW) \
	MOVQ nb+0(FP), CX \
	MOVQ panel+8(FP), SI \
	MOVQ dw+16(FP), DX \
	MOVQ mw+24(FP), R8 \
	MOVQ act+32(FP), DI \
	MOVQ shift+40(FP), AX \
	VMOVQ AX, X31 \
	MOVQ acc+48(FP), BX \
	MOVQ pf+56(FP), R9 \
	MOVQ pfLines+64(FP), R10 \
	G_LOAD_ACC \
	TESTQ CX, CX \
	JZ done \
loop: \
	G_PREFETCH \
	G_LOAD_BLOCK \
	G_ROWS(ROW) \
	ADDQ $512, SI \
	ADDQ $64, DX \
	ADDQ $64, R8 \
	ADDQ $704, DI \
	DECQ CX \
	JNZ loop \
done: \
	G_STORE_ACC \
	VZEROUPPER \
	RET

// Panel decoders: func gPanel<T>(w *byte, wStride, nb int, panel *byte, h *uint16)
// decode 16 rows of nb blocks at w into the panel (block b's 8 groups of 4
// values of the 16 rows at b·512, group g at g·64, row r at r·4) and the
// halves of their scales into h[b·16+r] (mins at h[512+b·16+r]). Rows 0-7
// and 8-15 are each loaded into Y0-Y7 and transposed as an 8×8 matrix of
// dwords; the same bytes of the rows 16 ahead are prefetched.
// Registers: SI, R11 rows 0 and 8 at the block; R12, R13 rows 16 and 24;
// BX, R8, R9, R10 1, 3, 5, 7 row strides (DX zero); DI panel; R14 halves;
// CX blocks left; Y15 0x0f bytes; Y14 0x80 (Q8_0) or 0x10 bytes.
#define GP_PROLOGUE(c) \
	MOVQ w+0(FP), SI \
	MOVQ wStride+8(FP), BX \
	MOVQ nb+16(FP), CX \
	MOVQ panel+24(FP), DI \
	MOVQ h+32(FP), R14 \
	LEAQ (BX)(BX*2), R8 \
	LEAQ (BX)(BX*4), R9 \
	LEAQ (R8)(BX*4), R10 \
	LEAQ (SI)(BX*8), R11 \
	LEAQ (R11)(BX*8), R12 \
	LEAQ (R12)(BX*8), R13 \
	XORQ DX, DX \
	MOVL $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Y15 \
	MOVL $c, AX \
	VPBROADCASTD AX, Y14 \
	TESTQ CX, CX \
	JZ done

// GP_HALF decodes rows r0..r0+7 (at base, prefetching at pf) with ROW into
// Y0-Y7.
#define GP_HALF(base, pf, r0, ROW) \
	ROW(base, pf, DX*1, X0, Y0, r0+0) \
	ROW(base, pf, BX*1, X1, Y1, r0+1) \
	ROW(base, pf, BX*2, X2, Y2, r0+2) \
	ROW(base, pf, R8*1, X3, Y3, r0+3) \
	ROW(base, pf, BX*4, X4, Y4, r0+4) \
	ROW(base, pf, R9*1, X5, Y5, r0+5) \
	ROW(base, pf, R8*2, X6, Y6, r0+6) \
	ROW(base, pf, R10*1, X7, Y7, r0+7)

// GP_TRANSPOSE stores Y0-Y7 (8 rows of 8 dwords) transposed: dword g of
// the 8 rows at g·64+off of the panel block.
#define GP_TRANSPOSE(off) \
	VPUNPCKLDQ Y1, Y0, Y8 \
	VPUNPCKHDQ Y1, Y0, Y9 \
	VPUNPCKLDQ Y3, Y2, Y10 \
	VPUNPCKHDQ Y3, Y2, Y11 \
	VPUNPCKLDQ Y5, Y4, Y12 \
	VPUNPCKHDQ Y5, Y4, Y13 \
	VPUNPCKLDQ Y7, Y6, Y0 \
	VPUNPCKHDQ Y7, Y6, Y1 \
	VPUNPCKLQDQ Y10, Y8, Y2 \
	VPUNPCKHQDQ Y10, Y8, Y3 \
	VPUNPCKLQDQ Y11, Y9, Y4 \
	VPUNPCKHQDQ Y11, Y9, Y5 \
	VPUNPCKLQDQ Y0, Y12, Y6 \
	VPUNPCKHQDQ Y0, Y12, Y7 \
	VPUNPCKLQDQ Y1, Y13, Y8 \
	VPUNPCKHQDQ Y1, Y13, Y9 \
	VPERM2I128 $0x20, Y6, Y2, Y10 \
	VMOVDQU Y10, (0+off)(DI) \
	VPERM2I128 $0x20, Y7, Y3, Y11 \
	VMOVDQU Y11, (64+off)(DI) \
	VPERM2I128 $0x20, Y8, Y4, Y12 \
	VMOVDQU Y12, (128+off)(DI) \
	VPERM2I128 $0x20, Y9, Y5, Y13 \
	VMOVDQU Y13, (192+off)(DI) \
	VPERM2I128 $0x31, Y6, Y2, Y10 \
	VMOVDQU Y10, (256+off)(DI) \
	VPERM2I128 $0x31, Y7, Y3, Y11 \
	VMOVDQU Y11, (320+off)(DI) \
	VPERM2I128 $0x31, Y8, Y4, Y12 \
	VMOVDQU Y12, (384+off)(DI) \
	VPERM2I128 $0x31, Y9, Y5, Y13 \
	VMOVDQU Y13, (448+off)(DI)

#define GP_NEXT(size) \
	ADDQ $size, SI \
	ADDQ $size, R11 \
	ADDQ $size, R12 \
	ADDQ $size, R13 \
	ADDQ $512, DI \
	ADDQ $32, R14 \
	DECQ CX \
	JNZ block \
done: \
	VZEROUPPER \
	RET

#define GP_BODY(c, ROW, size) \
	GP_PROLOGUE(c) \
block: \
	GP_HALF(SI, R12, 0, ROW) \
	GP_TRANSPOSE(0) \
	GP_HALF(R11, R13, 8, ROW) \
	GP_TRANSPOSE(32) \
	GP_NEXT(size)

// GP_SCALE stores the scale half of row r (block at off(b)(i)); GP_MIN the min.
#define GP_SCALE(b, i, r) \
	MOVWLZX 0(b)(i), AX \
	MOVW AX, ((r)*2)(R14)

#define GP_MIN(b, i, r) \
	MOVWLZX 2(b)(i), AX \
	MOVW AX, (1024+(r)*2)(R14)

// GP_NIBBLES puts the 32 4-bit values of the 16 bytes at off(b)(i) into y.
#define GP_NIBBLES(off, b, i, x, y) \
	VMOVDQU off(b)(i), x \
	VPSRLW $4, x, X12 \
	VINSERTI128 $1, X12, y, y \
	VPAND Y15, y, y

// GP_HIGH adds 16 to the values of y whose bit is set in the 32 bits at off(b)(i).
#define GP_HIGH(off, b, i, y) \
	KMOVD off(b)(i), K1 \
	VPADDB Y14, y, K1, y

#define GP_ROW_Q8_0(b, pf, i, x, y, r) \
	PREFETCHT0 0(pf)(i) \
	GP_SCALE(b, i, r) \
	VPXOR 2(b)(i), Y14, y

#define GP_ROW_Q4_0(b, pf, i, x, y, r) \
	PREFETCHT0 0(pf)(i) \
	GP_SCALE(b, i, r) \
	GP_NIBBLES(2, b, i, x, y)

#define GP_ROW_Q4_1(b, pf, i, x, y, r) \
	PREFETCHT0 0(pf)(i) \
	GP_SCALE(b, i, r) \
	GP_MIN(b, i, r) \
	GP_NIBBLES(4, b, i, x, y)

#define GP_ROW_Q5_0(b, pf, i, x, y, r) \
	PREFETCHT0 0(pf)(i) \
	GP_SCALE(b, i, r) \
	GP_NIBBLES(6, b, i, x, y) \
	GP_HIGH(2, b, i, y)

#define GP_ROW_Q5_1(b, pf, i, x, y, r) \
	PREFETCHT0 0(pf)(i) \
	GP_SCALE(b, i, r) \
	GP_MIN(b, i, r) \
	GP_NIBBLES(8, b, i, x, y) \
	GP_HIGH(4, b, i, y)

// G1_GROUP adds group g of the panel block times the column's group g to t.
#define G1_GROUP(g, z, t) \
	VMOVDQU32 (g*64)(SI), z \
	VPDPBUSD.BCST (g*64)(R9), z, t

// G1_MICRO is the one-column micro-kernel: lane r of the accumulator Z0 is
// weight row r; the column is row lane of the group at act (R9 points at
// its dword). The two halves of the integer dot run as two chains.
#define G1_MICRO(MIN) \
	MOVQ nb+0(FP), CX \
	MOVQ panel+8(FP), SI \
	MOVQ dw+16(FP), DX \
	MOVQ mw+24(FP), R8 \
	MOVQ act+32(FP), R9 \
	MOVQ lane+40(FP), AX \
	LEAQ (R9)(AX*4), R9 \
	MOVQ shift+48(FP), AX \
	VMOVQ AX, X31 \
	MOVQ acc+56(FP), BX \
	VMOVUPS (BX), Z0 \
	TESTQ CX, CX \
	JZ done1 \
loop1: \
	VPBROADCASTD 576(R9), Z25 \
	VPSLLD X31, Z25, Z25 \
	VPXORD Z24, Z24, Z24 \
	G1_GROUP(0, Z16, Z25) \
	G1_GROUP(4, Z20, Z24) \
	G1_GROUP(1, Z17, Z25) \
	G1_GROUP(5, Z21, Z24) \
	G1_GROUP(2, Z18, Z25) \
	G1_GROUP(6, Z22, Z24) \
	G1_GROUP(3, Z19, Z25) \
	G1_GROUP(7, Z23, Z24) \
	VPADDD Z24, Z25, Z25 \
	VCVTDQ2PS Z25, Z25 \
	VMOVUPS (DX), Z26 \
	VMULPS.BCST 512(R9), Z26, Z26 \
	VFMADD231PS Z26, Z25, Z0 \
	MIN \
	ADDQ $512, SI \
	ADDQ $64, DX \
	ADDQ $64, R8 \
	ADDQ $704, R9 \
	DECQ CX \
	JNZ loop1 \
done1: \
	VMOVUPS Z0, (BX) \
	VZEROUPPER \
	RET

#define G1_MIN \
	VMOVUPS (R8), Z27 \
	VFMADD231PS.BCST 640(R9), Z27, Z0

#define G1_NOMIN

// func gMicro(nb int, panel *byte, dw, mw *float32, act *byte, shift int, acc *float32, pf uintptr, pfLines int)
TEXT ·gMicro(SB), NOSPLIT, $0-72
	G_MICRO(G_ROW)

// func gMicroMin(nb int, panel *byte, dw, mw *float32, act *byte, shift int, acc *float32, pf uintptr, pfLines int)
TEXT ·gMicroMin(SB), NOSPLIT, $0-72
	G_MICRO(G_ROW_MIN)

// func gMicro1(nb int, panel *byte, dw, mw *float32, act *byte, lane, shift int, acc *float32)
TEXT ·gMicro1(SB), NOSPLIT, $0-64
	G1_MICRO(G1_NOMIN)

// func gMicro1Min(nb int, panel *byte, dw, mw *float32, act *byte, lane, shift int, acc *float32)
TEXT ·gMicro1Min(SB), NOSPLIT, $0-64
	G1_MICRO(G1_MIN)

// func gPanelQ8_0(w *byte, wStride, nb int, panel *byte, h *uint16)
TEXT ·gPanelQ8_0(SB), NOSPLIT, $0-40
	GP_BODY(0x80808080, GP_ROW_Q8_0, 34)

// func gPanelQ4_0(w *byte, wStride, nb int, panel *byte, h *uint16)
TEXT ·gPanelQ4_0(SB), NOSPLIT, $0-40
	GP_BODY(0x10101010, GP_ROW_Q4_0, 18)

// func gPanelQ4_1(w *byte, wStride, nb int, panel *byte, h *uint16)
TEXT ·gPanelQ4_1(SB), NOSPLIT, $0-40
	GP_BODY(0x10101010, GP_ROW_Q4_1, 20)

// func gPanelQ5_0(w *byte, wStride, nb int, panel *byte, h *uint16)
TEXT ·gPanelQ5_0(SB), NOSPLIT, $0-40
	GP_BODY(0x10101010, GP_ROW_Q5_0, 22)

// func gPanelQ5_1(w *byte, wStride, nb int, panel *byte, h *uint16)
TEXT ·gPanelQ5_1(SB), NOSPLIT, $0-40
	GP_BODY(0x10101010, GP_ROW_Q5_1, 24)

// GT_UNPACK_PS interleaves the floats of rows a and b within 128-bit lanes
// (low pairs into lo, high pairs into hi).
#define GT_UNPACK_PS(a, b, lo, hi) \
	VUNPCKLPS b, a, lo \
	VUNPCKHPS b, a, hi

// GT_UNPACK_PD interleaves the 64-bit pairs of t0, t2 and t1, t3 into the
// columns u0-u3 of four rows, one 128-bit lane each.
#define GT_UNPACK_PD(t0, t1, t2, t3, u0, u1, u2, u3) \
	VUNPCKLPD t2, t0, u0 \
	VUNPCKHPD t2, t0, u1 \
	VUNPCKLPD t3, t1, u2 \
	VUNPCKHPD t3, t1, u3

// GT_LANES gathers the 128-bit lanes of u0 (rows 0-3), u1 (4-7), u2 (8-11)
// and u3 (12-15) into four whole columns, written over them.
#define GT_LANES(u0, u1, u2, u3) \
	VSHUFF32X4 $0x44, u1, u0, Z16 \
	VSHUFF32X4 $0x44, u3, u2, Z17 \
	VSHUFF32X4 $0xee, u1, u0, Z18 \
	VSHUFF32X4 $0xee, u3, u2, Z19 \
	VSHUFF32X4 $0x88, Z17, Z16, u0 \
	VSHUFF32X4 $0xdd, Z17, Z16, u1 \
	VSHUFF32X4 $0x88, Z19, Z18, u2 \
	VSHUFF32X4 $0xdd, Z19, Z18, u3

// GT_STORE stores column z with the row mask and steps to the next one,
// or to the end after the last column.
#define GT_STORE(z) \
	VMOVUPS z, K1, (DI) \
	DECQ CX \
	JZ tdone \
	ADDQ BX, DI

// func gTranspose(acc *float32, out *float32, outStride, rowMask, cols int)
// stores acc[r·16+c] at out[c·outStride+r] for the rows r whose bit is set
// in rowMask and c < cols: the 16×16 tile is transposed in registers
// (32-bit and 64-bit unpacks within 128-bit lanes, then two rounds of lane
// shuffles) and each column stored with the row mask.
TEXT ·gTranspose(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), SI
	MOVQ out+8(FP), DI
	MOVQ outStride+16(FP), BX
	SHLQ $2, BX
	MOVQ rowMask+24(FP), AX
	KMOVW AX, K1
	MOVQ cols+32(FP), CX
	Z_LOAD16(SI)
	GT_UNPACK_PS(Z0, Z1, Z16, Z17)
	GT_UNPACK_PS(Z2, Z3, Z18, Z19)
	GT_UNPACK_PS(Z4, Z5, Z20, Z21)
	GT_UNPACK_PS(Z6, Z7, Z22, Z23)
	GT_UNPACK_PS(Z8, Z9, Z24, Z25)
	GT_UNPACK_PS(Z10, Z11, Z26, Z27)
	GT_UNPACK_PS(Z12, Z13, Z28, Z29)
	GT_UNPACK_PS(Z14, Z15, Z30, Z31)
	GT_UNPACK_PD(Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)
	GT_UNPACK_PD(Z20, Z21, Z22, Z23, Z4, Z5, Z6, Z7)
	GT_UNPACK_PD(Z24, Z25, Z26, Z27, Z8, Z9, Z10, Z11)
	GT_UNPACK_PD(Z28, Z29, Z30, Z31, Z12, Z13, Z14, Z15)
	GT_LANES(Z0, Z4, Z8, Z12)
	GT_LANES(Z1, Z5, Z9, Z13)
	GT_LANES(Z2, Z6, Z10, Z14)
	GT_LANES(Z3, Z7, Z11, Z15)
	GT_STORE(Z0)
	GT_STORE(Z1)
	GT_STORE(Z2)
	GT_STORE(Z3)
	GT_STORE(Z4)
	GT_STORE(Z5)
	GT_STORE(Z6)
	GT_STORE(Z7)
	GT_STORE(Z8)
	GT_STORE(Z9)
	GT_STORE(Z10)
	GT_STORE(Z11)
	GT_STORE(Z12)
	GT_STORE(Z13)
	GT_STORE(Z14)
	VMOVUPS Z15, K1, (DI)
tdone:
	VZEROUPPER
	RET

// func gHalves(h *uint16, f *float32, n int) converts n halves (a multiple
// of 16) to float32.
TEXT ·gHalves(SB), NOSPLIT, $0-24
	MOVQ h+0(FP), SI
	MOVQ f+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ hdone
hloop:
	VCVTPH2PS (SI), Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ hloop
hdone:
	VZEROUPPER
	RET

// func gQuantize(x *float32, nb int, dst *byte, lane int)
// quantises nb blocks of 32 values at x into row lane of the ActQ8G group
// at dst, as quantizeLane does: d = amax/127, t = x·(1/d), |t| rounded half
// away from zero (its integer part, plus one if the fraction is at least
// one half), at most 127, with t's sign.
TEXT ·gQuantize(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ lane+24(FP), AX
	SHLQ $2, AX
	ADDQ AX, DI
	Q_CONSTS(Z31, Z30, Z29, Z28)
	VPXORD Z11, Z11, Z11
	VMOVDQU32 gqIdx<>(SB), Y27
	TESTQ CX, CX
	JZ qdone
qloop:
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z1
	VPANDD Z31, Z0, Z2
	VPANDD Z31, Z1, Z3
	VMAXPS Z3, Z2, Z4
	Q_HMAX(Z4, Y4, X4, Y5, X5)
	VXORPS X5, X5, X5
	VUCOMISS X5, X4
	JEQ qzero
	VDIVSS X28, X4, X4 // d = amax/127
	VDIVSS X4, X29, X6 // id = 1/d
	VBROADCASTSS X6, Z6
	Q_ROUND(Z0, Z6, Z31, Z30, Z29, Z28, Z11, Z2, Z7, K1)
	Q_ROUND(Z1, Z6, Z31, Z30, Z29, Z28, Z11, Z3, Z8, K2)
	VPADDD Z8, Z7, Z9 // sum
	VEXTRACTI64X4 $1, Z9, Y10
	VPADDD Y10, Y9, Y9
	VEXTRACTI128 $1, Y9, X10
	VPADDD X10, X9, X9
	VPSHUFD $0x4e, X9, X10
	VPADDD X10, X9, X9
	VPSHUFD $0xb1, X9, X10
	VPADDD X10, X9, X9
	VPMOVDB Z7, X7
	VPMOVDB Z8, X8
	VINSERTI128 $1, X8, Y7, Y7
	KXNORW K3, K3, K3
	VPSCATTERDD Y7, K3, (DI)(Y27*1)
	VMOVSS X4, 512(DI)
	VCVTDQ2PS X9, X10
	VMULSS X10, X4, X10
	VMOVSS X10, 640(DI)
	VPSUBD X9, X11, X9
	VMOVD X9, 576(DI)
	JMP qnext
qzero:
	VPXORD Y7, Y7, Y7
	KXNORW K3, K3, K3
	VPSCATTERDD Y7, K3, (DI)(Y27*1)
	MOVL $0, 512(DI)
	MOVL $0, 576(DI)
	MOVL $0, 640(DI)
qnext:
	ADDQ $128, SI
	ADDQ $704, DI
	DECQ CX
	JNZ qloop
qdone:
	VZEROUPPER
	RET

// dword offsets of the eight 4-value groups of a lane in a record
DATA gqIdx<>+0(SB)/4, $0
DATA gqIdx<>+4(SB)/4, $64
DATA gqIdx<>+8(SB)/4, $128
DATA gqIdx<>+12(SB)/4, $192
DATA gqIdx<>+16(SB)/4, $256
DATA gqIdx<>+20(SB)/4, $320
DATA gqIdx<>+24(SB)/4, $384
DATA gqIdx<>+28(SB)/4, $448
GLOBL gqIdx<>(SB), RODATA|NOPTR, $32
