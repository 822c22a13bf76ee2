// Macros shared by the AVX-512 kernels (grouped_amd64.s, q8k_amd64.s).

// Z_LOAD16 loads Z0-Z15 from 16 consecutive vectors at base.
#define Z_LOAD16(base) \
	VMOVUPS 0(base), Z0 \
	VMOVUPS 64(base), Z1 \
	VMOVUPS 128(base), Z2 \
	VMOVUPS 192(base), Z3 \
	VMOVUPS 256(base), Z4 \
	VMOVUPS 320(base), Z5 \
	VMOVUPS 384(base), Z6 \
	VMOVUPS 448(base), Z7 \
	VMOVUPS 512(base), Z8 \
	VMOVUPS 576(base), Z9 \
	VMOVUPS 640(base), Z10 \
	VMOVUPS 704(base), Z11 \
	VMOVUPS 768(base), Z12 \
	VMOVUPS 832(base), Z13 \
	VMOVUPS 896(base), Z14 \
	VMOVUPS 960(base), Z15

// The activation quantisers: Each block's scale is its largest magnitude over 127; a
// value t = x·(1/d) rounds half away from zero: its magnitude's integer
// part, plus one if the fraction is at least one half, at most 127, with
// t's sign (QuantizeRow's rounding, bit for bit).

// Q_CONSTS broadcasts the constants: the magnitude mask, 0.5, 1 and 127.
#define Q_CONSTS(abs, half, one, c127) \
	MOVL $0x7fffffff, AX \
	VPBROADCASTD AX, abs \
	MOVL $0x3f000000, AX \
	VPBROADCASTD AX, half \
	MOVL $0x3f800000, AX \
	VPBROADCASTD AX, one \
	MOVL $0x42fe0000, AX \
	VPBROADCASTD AX, c127

// Q_HMAX leaves the largest of the 16 lanes of z (its Y and X names y, x)
// in lane 0 of x; ty, tx are a temporary's Y and X names.
#define Q_HMAX(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty \
	VMAXPS ty, y, y \
	VEXTRACTF32X4 $1, y, tx \
	VMAXPS tx, x, x \
	VPERMILPS $0x4e, x, tx \
	VMAXPS tx, x, x \
	VPERMILPS $0xb1, x, tx \
	VMAXSS tx, x, x

// Q_ROUND scales z by id (z becomes t) and leaves the rounded quants as
// int32 in q; zero must hold zeros, t1 is a temporary, k a mask register.
#define Q_ROUND(z, id, abs, half, one, c127, zero, t1, q, k) \
	VMULPS id, z, z \
	VPANDD abs, z, t1 \
	VRNDSCALEPS $3, t1, q \
	VSUBPS q, t1, t1 \
	VCMPPS $13, half, t1, k \
	VADDPS one, q, k, q \
	VMINPS c127, q, q \
	VCVTTPS2DQ q, q \
	VCMPPS $1, zero, z, k \
	VPSUBD q, zero, k, q
