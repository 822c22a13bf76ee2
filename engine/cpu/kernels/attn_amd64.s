//go:build amd64

#include "textflag.h"

// Attention kernels (see attn.go). Every lane is one position (scores) or
// one dimension (values) and adds its rounded products in order, so both
// instruction sets give the reference's bits.

// SCORES_ARGS loads a scores kernel's arguments: SI q, R8 hd, R9 heads, DI
// kt, DX s; R10, R13 one and three score strides, R11, R12 one and three
// head strides of q (bytes).
#define SCORES_ARGS \
	MOVQ q+0(FP), SI \
	MOVQ hd+8(FP), R8 \
	MOVQ heads+16(FP), R9 \
	MOVQ kt+24(FP), DI \
	MOVQ s+32(FP), DX \
	MOVQ sStride+40(FP), R10 \
	SHLQ $2, R10 \
	LEAQ (R10)(R10*2), R13 \
	MOVQ R8, R11 \
	SHLQ $2, R11 \
	LEAQ (R11)(R11*2), R12

// VALUES adds Σ_p e[p]·v[p·stride:] to out in chunks of one vector (W
// bytes; vector registers V0-V8 of the level's width): four chunks at a
// time (four independent sums), then one. R10 counts the chunks left.
#define VALUES(W, V0, V1, V2, V3, V4, V5, V6, V7, V8) \
	MOVQ e+0(FP), SI \
	MOVQ v+16(FP), DI \
	MOVQ stride+24(FP), BX \
	SHLQ $2, BX \
	MOVQ out+32(FP), DX \
	MOVQ chunks+40(FP), R10 \
vfour: \
	CMPQ R10, $4 \
	JLT vone \
	VMOVUPS (DX), V0 \
	VMOVUPS W(DX), V1 \
	VMOVUPS (2*W)(DX), V2 \
	VMOVUPS (3*W)(DX), V3 \
	MOVQ SI, AX \
	MOVQ DI, R9 \
	MOVQ m+8(FP), CX \
	TESTQ CX, CX \
	JZ vstore4 \
vloop4: \
	VBROADCASTSS (AX), V8 \
	VMULPS (R9), V8, V4 \
	VMULPS W(R9), V8, V5 \
	VMULPS (2*W)(R9), V8, V6 \
	VMULPS (3*W)(R9), V8, V7 \
	VADDPS V4, V0, V0 \
	VADDPS V5, V1, V1 \
	VADDPS V6, V2, V2 \
	VADDPS V7, V3, V3 \
	ADDQ $4, AX \
	ADDQ BX, R9 \
	DECQ CX \
	JNZ vloop4 \
vstore4: \
	VMOVUPS V0, (DX) \
	VMOVUPS V1, W(DX) \
	VMOVUPS V2, (2*W)(DX) \
	VMOVUPS V3, (3*W)(DX) \
	ADDQ $(4*W), DX \
	ADDQ $(4*W), DI \
	SUBQ $4, R10 \
	JMP vfour \
vone: \
	TESTQ R10, R10 \
	JZ vdone \
	VMOVUPS (DX), V0 \
	MOVQ SI, AX \
	MOVQ DI, R9 \
	MOVQ m+8(FP), CX \
	TESTQ CX, CX \
	JZ vstore1 \
vloop1: \
	VBROADCASTSS (AX), V8 \
	VMULPS (R9), V8, V4 \
	VADDPS V4, V0, V0 \
	ADDQ $4, AX \
	ADDQ BX, R9 \
	DECQ CX \
	JNZ vloop1 \
vstore1: \
	VMOVUPS V0, (DX) \
	ADDQ $W, DX \
	ADDQ $W, DI \
	DECQ R10 \
	JMP vone \
vdone: \
	VZEROUPPER \
	RET

// func scoresAVX512(q *float32, hd, heads int, kt *float32, s *float32, sStride int)
// Heads go four at a time (four independent sums), then one at a time.
TEXT ·scoresAVX512(SB), NOSPLIT, $0-48
	SCORES_ARGS
four:
	CMPQ R9, $4
	JLT one
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, BX
	MOVQ SI, AX
	MOVQ R8, CX
loop4:
	VMOVUPS (BX), Z8
	VMULPS.BCST (AX), Z8, Z4
	VADDPS Z4, Z0, Z0
	VMULPS.BCST (AX)(R11*1), Z8, Z5
	VADDPS Z5, Z1, Z1
	VMULPS.BCST (AX)(R11*2), Z8, Z6
	VADDPS Z6, Z2, Z2
	VMULPS.BCST (AX)(R12*1), Z8, Z7
	VADDPS Z7, Z3, Z3
	ADDQ $64, BX
	ADDQ $4, AX
	DECQ CX
	JNZ loop4
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, (DX)(R10*1)
	VMOVUPS Z2, (DX)(R10*2)
	VMOVUPS Z3, (DX)(R13*1)
	LEAQ (SI)(R11*4), SI
	LEAQ (DX)(R10*4), DX
	SUBQ $4, R9
	JMP four
one:
	TESTQ R9, R9
	JZ done
	VPXORD Z0, Z0, Z0
	MOVQ DI, BX
	MOVQ SI, AX
	MOVQ R8, CX
loop1:
	VMOVUPS (BX), Z8
	VMULPS.BCST (AX), Z8, Z4
	VADDPS Z4, Z0, Z0
	ADDQ $64, BX
	ADDQ $4, AX
	DECQ CX
	JNZ loop1
	VMOVUPS Z0, (DX)
	ADDQ R11, SI
	ADDQ R10, DX
	DECQ R9
	JMP one
done:
	VZEROUPPER
	RET

// func scoresAVX2(q *float32, hd, heads int, kt *float32, s *float32, sStride int)
// As scoresAVX512 with each key row in two registers.
TEXT ·scoresAVX2(SB), NOSPLIT, $0-48
	SCORES_ARGS
four:
	CMPQ R9, $4
	JLT one
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ DI, BX
	MOVQ SI, AX
	MOVQ R8, CX
loop4:
	VMOVUPS (BX), Y8
	VMOVUPS 32(BX), Y9
	VBROADCASTSS (AX), Y10
	VMULPS Y10, Y8, Y11
	VMULPS Y10, Y9, Y12
	VADDPS Y11, Y0, Y0
	VADDPS Y12, Y1, Y1
	VBROADCASTSS (AX)(R11*1), Y10
	VMULPS Y10, Y8, Y11
	VMULPS Y10, Y9, Y12
	VADDPS Y11, Y2, Y2
	VADDPS Y12, Y3, Y3
	VBROADCASTSS (AX)(R11*2), Y10
	VMULPS Y10, Y8, Y11
	VMULPS Y10, Y9, Y12
	VADDPS Y11, Y4, Y4
	VADDPS Y12, Y5, Y5
	VBROADCASTSS (AX)(R12*1), Y10
	VMULPS Y10, Y8, Y11
	VMULPS Y10, Y9, Y12
	VADDPS Y11, Y6, Y6
	VADDPS Y12, Y7, Y7
	ADDQ $64, BX
	ADDQ $4, AX
	DECQ CX
	JNZ loop4
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, (DX)(R10*1)
	VMOVUPS Y3, 32(DX)(R10*1)
	VMOVUPS Y4, (DX)(R10*2)
	VMOVUPS Y5, 32(DX)(R10*2)
	VMOVUPS Y6, (DX)(R13*1)
	VMOVUPS Y7, 32(DX)(R13*1)
	LEAQ (SI)(R11*4), SI
	LEAQ (DX)(R10*4), DX
	SUBQ $4, R9
	JMP four
one:
	TESTQ R9, R9
	JZ done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ DI, BX
	MOVQ SI, AX
	MOVQ R8, CX
loop1:
	VBROADCASTSS (AX), Y10
	VMULPS (BX), Y10, Y11
	VMULPS 32(BX), Y10, Y12
	VADDPS Y11, Y0, Y0
	VADDPS Y12, Y1, Y1
	ADDQ $64, BX
	ADDQ $4, AX
	DECQ CX
	JNZ loop1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R11, SI
	ADDQ R10, DX
	DECQ R9
	JMP one
done:
	VZEROUPPER
	RET

// func valuesAVX512(e *float32, m int, v *float32, stride int, out *float32, chunks int)
TEXT ·valuesAVX512(SB), NOSPLIT, $0-48
	VALUES(64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8)

// func valuesAVX2(e *float32, m int, v *float32, stride int, out *float32, chunks int)
TEXT ·valuesAVX2(SB), NOSPLIT, $0-48
	VALUES(32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8)
