package main

import "fmt"

// The arm64 assembler of the Go toolchain lacks most Advanced SIMD
// data-processing mnemonics (widening multiplies, pairwise adds,
// conversions, by-element forms, the dot product), so every vector
// instruction below is written as its 32-bit encoding, from the
// instruction classes of the Arm Architecture Reference Manual (A64
// Advanced SIMD), with its assembly form in a comment. Register fields:
// Rd bits 0-4, Rn bits 5-9, Rm bits 16-20.

// r3 sets the three register fields of op.
func r3(op uint32, d, n, m int) uint32 {
	return op | uint32(m&31)<<16 | uint32(n&31)<<5 | uint32(d&31)
}

// r2 sets the Rd and Rn fields of op.
func r2(op uint32, d, n int) uint32 { return op | uint32(n&31)<<5 | uint32(d&31) }

// elem sets the fields of a by-element instruction with 32-bit elements:
// Rm (5 bits, M:Rm) and the lane index H:L.
func elem(op uint32, d, n, m, idx int) uint32 {
	return r3(op, d, n, m) | uint32(idx&1)<<21 | uint32(idx>>1&1)<<11
}

// inst is one encoded instruction and its assembly form.
type inst struct {
	enc  uint32
	text string
}

func (i inst) String() string { return fmt.Sprintf("WORD $0x%08x // %s", i.enc, i.text) }

func vf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// Integer dot products and widening multiplies.

// sdot is SDOT Vd.4S, Vn.16B, Vm.16B (FEAT_DotProd): each 32-bit lane i
// of d adds the four products of bytes 4i..4i+3 of n and m.
func sdot(d, n, m int) inst {
	return inst{r3(0x4e809400, d, n, m), vf("SDOT V%d.4S, V%d.16B, V%d.16B", d, n, m)}
}

func smull8(d, n, m int) inst {
	return inst{r3(0x0e20c000, d, n, m), vf("SMULL V%d.8H, V%d.8B, V%d.8B", d, n, m)}
}

func smull28(d, n, m int) inst {
	return inst{r3(0x4e20c000, d, n, m), vf("SMULL2 V%d.8H, V%d.16B, V%d.16B", d, n, m)}
}

func smlal8(d, n, m int) inst {
	return inst{r3(0x0e208000, d, n, m), vf("SMLAL V%d.8H, V%d.8B, V%d.8B", d, n, m)}
}

func smlal28(d, n, m int) inst {
	return inst{r3(0x4e208000, d, n, m), vf("SMLAL2 V%d.8H, V%d.16B, V%d.16B", d, n, m)}
}

func smull16(d, n, m int) inst {
	return inst{r3(0x0e60c000, d, n, m), vf("SMULL V%d.4S, V%d.4H, V%d.4H", d, n, m)}
}

func smlal16(d, n, m int) inst {
	return inst{r3(0x0e608000, d, n, m), vf("SMLAL V%d.4S, V%d.4H, V%d.4H", d, n, m)}
}

func smlal216(d, n, m int) inst {
	return inst{r3(0x4e608000, d, n, m), vf("SMLAL2 V%d.4S, V%d.8H, V%d.8H", d, n, m)}
}

func saddlp16(d, n int) inst {
	return inst{r2(0x4e602800, d, n), vf("SADDLP V%d.4S, V%d.8H", d, n)}
}

func addp32(d, n, m int) inst {
	return inst{r3(0x4ea0bc00, d, n, m), vf("ADDP V%d.4S, V%d.4S, V%d.4S", d, n, m)}
}

func addv32(d, n int) inst {
	return inst{r2(0x4eb1b800, d, n), vf("ADDV S%d, V%d.4S", d, n)}
}

func mul32(d, n, m int) inst {
	return inst{r3(0x4ea09c00, d, n, m), vf("MUL V%d.4S, V%d.4S, V%d.4S", d, n, m)}
}

func mla32(d, n, m int) inst {
	return inst{r3(0x4ea09400, d, n, m), vf("MLA V%d.4S, V%d.4S, V%d.4S", d, n, m)}
}

// mlaElem is MLA Vd.4S, Vn.4S, Vm.S[idx].
func mlaElem(d, n, m, idx int) inst {
	return inst{elem(0x6f800000, d, n, m, idx), vf("MLA V%d.4S, V%d.4S, V%d.S[%d]", d, n, m, idx)}
}

// Widening.

func uxtl8(d, n int) inst  { return inst{r2(0x2f08a400, d, n), vf("UXTL V%d.8H, V%d.8B", d, n)} }
func uxtl16(d, n int) inst { return inst{r2(0x2f10a400, d, n), vf("UXTL V%d.4S, V%d.4H", d, n)} }
func uxtl216(d, n int) inst {
	return inst{r2(0x6f10a400, d, n), vf("UXTL2 V%d.4S, V%d.8H", d, n)}
}
func sxtl8(d, n int) inst   { return inst{r2(0x0f08a400, d, n), vf("SXTL V%d.8H, V%d.8B", d, n)} }
func sxtl28(d, n int) inst  { return inst{r2(0x4f08a400, d, n), vf("SXTL2 V%d.8H, V%d.16B", d, n)} }
func sxtl16(d, n int) inst  { return inst{r2(0x0f10a400, d, n), vf("SXTL V%d.4S, V%d.4H", d, n)} }
func sxtl216(d, n int) inst { return inst{r2(0x4f10a400, d, n), vf("SXTL2 V%d.4S, V%d.8H", d, n)} }

// Float.

func scvtf4(d, n int) inst { return inst{r2(0x4e21d800, d, n), vf("SCVTF V%d.4S, V%d.4S", d, n)} }
func scvtfS(d, n int) inst { return inst{r2(0x5e21d800, d, n), vf("SCVTF S%d, S%d", d, n)} }

// fmlaElem is FMLA Vd.4S, Vn.4S, Vm.S[idx]: fused, one rounding per lane.
func fmlaElem(d, n, m, idx int) inst {
	return inst{elem(0x4f801000, d, n, m, idx), vf("FMLA V%d.4S, V%d.4S, V%d.S[%d]", d, n, m, idx)}
}

func fmla4(d, n, m int) inst {
	return inst{r3(0x4e20cc00, d, n, m), vf("FMLA V%d.4S, V%d.4S, V%d.4S", d, n, m)}
}

func fadd4(d, n, m int) inst {
	return inst{r3(0x4e20d400, d, n, m), vf("FADD V%d.4S, V%d.4S, V%d.4S", d, n, m)}
}

func fadd2(d, n, m int) inst {
	return inst{r3(0x0e20d400, d, n, m), vf("FADD V%d.2S, V%d.2S, V%d.2S", d, n, m)}
}

// faddpS is FADDP Sd, Vn.2S: lane 0 plus lane 1.
func faddpS(d, n int) inst { return inst{r2(0x7e30d800, d, n), vf("FADDP S%d, V%d.2S", d, n)} }

func fcvtl(d, n int) inst  { return inst{r2(0x0e217800, d, n), vf("FCVTL V%d.4S, V%d.4H", d, n)} }
func fcvtl2(d, n int) inst { return inst{r2(0x4e217800, d, n), vf("FCVTL2 V%d.4S, V%d.8H", d, n)} }

// shll16 is SHLL Vd.4S, Vn.4H, #16 (bfloat16 to float32).
func shll16(d, n int) inst {
	return inst{r2(0x2e613800, d, n), vf("SHLL V%d.4S, V%d.4H, #16", d, n)}
}

func shll216(d, n int) inst {
	return inst{r2(0x6e613800, d, n), vf("SHLL2 V%d.4S, V%d.8H, #16", d, n)}
}

// Bitwise, shifts and moves.

func and16(d, n, m int) inst {
	return inst{r3(0x4e201c00, d, n, m), vf("AND V%d.16B, V%d.16B, V%d.16B", d, n, m)}
}

func orr16(d, n, m int) inst {
	return inst{r3(0x4ea01c00, d, n, m), vf("ORR V%d.16B, V%d.16B, V%d.16B", d, n, m)}
}

func sub8(d, n, m int) inst {
	return inst{r3(0x6e208400, d, n, m), vf("SUB V%d.16B, V%d.16B, V%d.16B", d, n, m)}
}

func cmtst8(d, n, m int) inst {
	return inst{r3(0x4e208c00, d, n, m), vf("CMTST V%d.16B, V%d.16B, V%d.16B", d, n, m)}
}

// tbl is TBL Vd.16B, {Vn.16B}, Vm.16B.
func tbl(d, n, m int) inst {
	return inst{r3(0x4e000000, d, n, m), vf("TBL V%d.16B, [V%d.16B], V%d.16B", d, n, m)}
}

// ushr8 is USHR Vd.16B, Vn.16B, #s (1 ≤ s ≤ 8).
func ushr8(d, n, s int) inst {
	return inst{r2(0x6f000400, d, n) | uint32(16-s)<<16, vf("USHR V%d.16B, V%d.16B, #%d", d, n, s)}
}

// shl8 is SHL Vd.16B, Vn.16B, #s (0 ≤ s ≤ 7).
func shl8(d, n, s int) inst {
	return inst{r2(0x4f005400, d, n) | uint32(8+s)<<16, vf("SHL V%d.16B, V%d.16B, #%d", d, n, s)}
}

// shl16 is SHL Vd.8H, Vn.8H, #s (0 ≤ s ≤ 15).
func shl16(d, n, s int) inst {
	return inst{r2(0x4f005400, d, n) | uint32(16+s)<<16, vf("SHL V%d.8H, V%d.8H, #%d", d, n, s)}
}

// movi8 is MOVI Vd.16B, #imm.
func movi8(d int, imm uint8) inst {
	return inst{0x4f00e400 | uint32(imm>>5)<<16 | uint32(imm&31)<<5 | uint32(d), vf("MOVI V%d.16B, #0x%02x", d, imm)}
}

// zero is MOVI Vd.2D, #0.
func zero(d int) inst { return inst{0x6f00e400 | uint32(d), vf("MOVI V%d.2D, #0", d)} }

// ext8 is EXT Vd.16B, Vn.16B, Vm.16B, #8.
func ext8(d, n, m int) inst {
	return inst{r3(0x6e004000, d, n, m), vf("EXT V%d.16B, V%d.16B, V%d.16B, #8", d, n, m)}
}

// insS0 is MOV Vd.S[0], Vn.S[0] (the other lanes of d are kept).
func insS0(d, n int) inst { return inst{r2(0x6e040400, d, n), vf("MOV V%d.S[0], V%d.S[0]", d, n)} }

// insD1 is MOV Vd.D[1], Xn.
func insD1(d, xn int) inst { return inst{r2(0x4e181c00, d, xn), vf("MOV V%d.D[1], R%d", d, xn)} }
