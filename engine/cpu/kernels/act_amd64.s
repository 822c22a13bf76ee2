//go:build amd64

#include "textflag.h"

// SwiGLU kernels: g = g/(1+expf(−g))·u, with expf's operations (act.go) in
// the same order and rounding, one element per lane.

DATA swC<>+0(SB)/4, $0xc2aea8f6  // −87.33
DATA swC<>+4(SB)/4, $0x42b17217  // 88.72283
DATA swC<>+8(SB)/4, $0x3fb8aa3b  // 1.442695
DATA swC<>+12(SB)/4, $0x4b400000 // 12582912 (1.5·2^23), also its bits
DATA swC<>+16(SB)/4, $0x3f317200 // 0.693145751953125
DATA swC<>+20(SB)/4, $0x35bfbe8e // 1.428606765330187e−6
DATA swC<>+24(SB)/4, $0x3f800000 // 1
DATA swC<>+28(SB)/4, $0x3f000000 // 0.5
DATA swC<>+32(SB)/4, $0x3e2aaaab // 1/6
DATA swC<>+36(SB)/4, $0x3d2aaaab // 1/24
DATA swC<>+40(SB)/4, $0x3c088889 // 1/120
DATA swC<>+44(SB)/4, $0x3ab60b61 // 1/720
DATA swC<>+48(SB)/4, $0x39500d01 // 1/5040
DATA swC<>+52(SB)/4, $0x40000000 // 2
DATA swC<>+56(SB)/4, $127
DATA swC<>+60(SB)/4, $1
DATA swC<>+64(SB)/4, $0x80000000 // sign bit
DATA swC<>+68(SB)/4, $0x7f800000 // +Inf
GLOBL swC<>(SB), RODATA|NOPTR, $72

// EXP_CORE is expf's computation on the 16 lanes of Z1 up to the scaling:
// Z3 = n (int32), Z7 = expPoly(r) (x = n·ln2 + r), temporaries Z2, Z4-Z6,
// Z8-Z13.
#define EXP_CORE \
	VMULPS.BCST swC<>+8(SB), Z1, Z2 \
	VADDPS.BCST swC<>+12(SB), Z2, Z2 \
	VPSUBD.BCST swC<>+12(SB), Z2, Z3 \
	VSUBPS.BCST swC<>+12(SB), Z2, Z4 \
	VMULPS.BCST swC<>+16(SB), Z4, Z5 \
	VSUBPS Z5, Z1, Z5 \
	VMULPS.BCST swC<>+20(SB), Z4, Z6 \
	VSUBPS Z6, Z5, Z5 \
	VMULPS Z5, Z5, Z8 \
	VADDPS.BCST swC<>+24(SB), Z5, Z9 \
	VMULPS.BCST swC<>+32(SB), Z5, Z10 \
	VADDPS.BCST swC<>+28(SB), Z10, Z10 \
	VMULPS.BCST swC<>+40(SB), Z5, Z11 \
	VADDPS.BCST swC<>+36(SB), Z11, Z11 \
	VMULPS.BCST swC<>+48(SB), Z5, Z12 \
	VADDPS.BCST swC<>+44(SB), Z12, Z12 \
	VMULPS Z10, Z8, Z10 \
	VADDPS Z10, Z9, Z9 \
	VMULPS Z8, Z8, Z13 \
	VMULPS Z12, Z8, Z12 \
	VADDPS Z12, Z11, Z11 \
	VMULPS Z11, Z13, Z13 \
	VADDPS Z13, Z9, Z7

// func swigluAVX512(x, u *float32, n int), n a multiple of 16
TEXT ·swigluAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ done
	VPXORD Z31, Z31, Z31
	VBROADCASTSS swC<>+68(SB), Z30
	VBROADCASTSS swC<>+64(SB), Z29
loop:
	VMOVUPS (DI), Z0
	VXORPS Z29, Z0, Z1 // x = −v
	VCMPPS.BCST $0x11, swC<>+0(SB), Z1, K1 // x < −87.33
	VCMPPS.BCST $0x1e, swC<>+4(SB), Z1, K2 // x > 88.72283
	VCMPPS $3, Z1, Z1, K3 // x is NaN
	EXP_CORE
	VPCMPGTD.BCST swC<>+56(SB), Z3, K4 // ni > 127
	VPSUBD.BCST swC<>+60(SB), Z3, K4, Z3
	VMULPS.BCST swC<>+52(SB), Z7, K4, Z7
	VPADDD.BCST swC<>+56(SB), Z3, Z3
	VPSLLD $23, Z3, Z3
	VMULPS Z3, Z7, Z7 // e^x
	VMOVAPS Z31, K1, Z7
	VMOVAPS Z30, K2, Z7
	VMOVAPS Z1, K3, Z7
	VADDPS.BCST swC<>+24(SB), Z7, Z7
	VDIVPS Z7, Z0, Z7
	VMULPS (SI), Z7, Z7
	VMOVUPS Z7, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET

// func expShiftAVX512(x *float32, n int, mx, scale float32), n a multiple
// of 16: x = e^((x−mx)·scale) with expShiftRef's operations, lanes below
// −87.33 zero, NaN kept.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $4, CX
	JZ edone
	VBROADCASTSS mx+16(FP), Z28
	VBROADCASTSS scale+20(FP), Z27
	VPXORD Z31, Z31, Z31
eloop:
	VMOVUPS (DI), Z1
	VSUBPS Z28, Z1, Z1
	VMULPS Z27, Z1, Z1 // a
	VCMPPS.BCST $0x11, swC<>+0(SB), Z1, K1 // a < −87.33
	VCMPPS $3, Z1, Z1, K3 // a is NaN
	EXP_CORE
	VPADDD.BCST swC<>+56(SB), Z3, Z3
	VPSLLD $23, Z3, Z3
	VMULPS Z3, Z7, Z7
	VMOVAPS Z31, K1, Z7
	VMOVAPS Z1, K3, Z7
	VMOVUPS Z7, (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ eloop
edone:
	VZEROUPPER
	RET

// SW_C(off, y) broadcasts constant off into y.
#define SW_C(off, y) VBROADCASTSS swC<>+off(SB), y

// func swigluAVX2(x, u *float32, n int), n a multiple of 8
TEXT ·swigluAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ done
loop:
	VMOVUPS (DI), Y0
	SW_C(64, Y15)
	VXORPS Y15, Y0, Y1 // x = −v
	SW_C(8, Y15)
	VMULPS Y15, Y1, Y2
	SW_C(12, Y14)
	VADDPS Y14, Y2, Y2 // t
	VPSUBD Y14, Y2, Y3 // ni
	VSUBPS Y14, Y2, Y4 // n
	SW_C(16, Y15)
	VMULPS Y15, Y4, Y5
	VSUBPS Y5, Y1, Y5
	SW_C(20, Y15)
	VMULPS Y15, Y4, Y6
	VSUBPS Y6, Y5, Y5 // r
	VMULPS Y5, Y5, Y8 // r2
	SW_C(24, Y15)
	VADDPS Y15, Y5, Y9 // p01
	SW_C(32, Y15)
	VMULPS Y15, Y5, Y10
	SW_C(28, Y15)
	VADDPS Y15, Y10, Y10 // p23
	SW_C(40, Y15)
	VMULPS Y15, Y5, Y11
	SW_C(36, Y15)
	VADDPS Y15, Y11, Y11 // p45
	SW_C(48, Y15)
	VMULPS Y15, Y5, Y12
	SW_C(44, Y15)
	VADDPS Y15, Y12, Y12 // p67
	VMULPS Y10, Y8, Y10
	VADDPS Y10, Y9, Y9
	VMULPS Y8, Y8, Y13
	VMULPS Y12, Y8, Y12
	VADDPS Y12, Y11, Y11
	VMULPS Y11, Y13, Y13
	VADDPS Y13, Y9, Y7 // q
	SW_C(56, Y15)
	VPCMPGTD Y15, Y3, Y6 // ni > 127 (all ones)
	SW_C(60, Y14)
	VPAND Y14, Y6, Y14
	VPSUBD Y14, Y3, Y3
	VPADDD Y15, Y3, Y3
	VPSLLD $23, Y3, Y3
	SW_C(52, Y15)
	VMULPS Y15, Y7, Y15
	VBLENDVPS Y6, Y15, Y7, Y7 // q·2 where ni > 127
	VMULPS Y3, Y7, Y7 // e^x
	SW_C(0, Y15)
	VCMPPS $0x11, Y15, Y1, Y6 // x < −87.33
	VXORPS Y15, Y15, Y15
	VBLENDVPS Y6, Y15, Y7, Y7
	SW_C(4, Y15)
	VCMPPS $0x1e, Y15, Y1, Y6 // x > 88.72283
	SW_C(68, Y15)
	VBLENDVPS Y6, Y15, Y7, Y7
	VCMPPS $3, Y1, Y1, Y6 // NaN
	VBLENDVPS Y6, Y1, Y7, Y7
	SW_C(24, Y15)
	VADDPS Y15, Y7, Y7
	VDIVPS Y7, Y0, Y7
	VMULPS (SI), Y7, Y7
	VMOVUPS Y7, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ loop
done:
	VZEROUPPER
	RET
