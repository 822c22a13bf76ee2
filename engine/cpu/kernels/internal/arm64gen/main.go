// Command arm64gen writes the arm64 assembly of the kernels package: the
// Advanced SIMD (NEON) kernels in two variants, one with the dot-product
// extension (SDOT) and one without (SMULL and pairwise adds), and the Go
// declarations and tables that go with them.
//
// The 32-value block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 against ActQ8)
// and the float types (F32, F16, BF16 against ActF32) get tile functions of
// R weight rows × C activation columns over nb blocks (or steps of eight
// values) for the package's tiler (legacy_neon_arm64.s, tiles_arm64.go).
// The float tiles compute refFloat's arithmetic with eight lanes.
// They compute refLegacy's arithmetic with eight lanes: per block the
// integer sums of the eight groups of four products, converted to float32
// and added by one fused multiply-add per lane with the scale d·da, the
// min term fused into lane 0, and the lanes summed as reduce does.
//
// The K-quant types (Q4_K, Q5_K, Q6_K against ActQ8K) get functions of rows
// weight rows × C columns (kquant_neon_arm64.s, kquant_neon_arm64.go) that
// compute, per super-block, the exact integer sums of mulKRef and then
// acc = fma(da, fma(−dm, off, d·dot), acc): the operations the Go compiler
// emits for mulKRef on arm64, where it fuses a multiply and an add.
//
// Run it with `GOARCH=arm64 go generate` in engine/cpu/kernels.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
)

// variant is one instruction set the kernels are written for.
type variant struct {
	name string // Go-name part and level: "NEON", "NEONDot"
	dot  bool   // has SDOT
}

var variants = []variant{{"NEON", false}, {"NEONDot", true}}

// kind describes one 32-value block type.
type kind struct {
	name    string
	blk     int  // bytes per block
	min     bool // has a min (d, m, then the rest)
	qh      bool // has 32 high bits after the scales
	nibbles bool // 16 bytes of nibbles, else 32 int8 values
	offset  uint8
	maxR    []int // largest tile rows for C columns (index C)
	elem    int   // float types: bytes per value (the others: 0)
}

var kinds = []kind{
	{name: "Q8_0", blk: 34, maxR: []int{0, 4, 4}},
	{name: "Q4_0", blk: 18, nibbles: true, offset: 8, maxR: []int{0, 4, 3}},
	{name: "Q4_1", blk: 20, min: true, nibbles: true, maxR: []int{0, 4, 3}},
	{name: "Q5_0", blk: 22, qh: true, nibbles: true, offset: 16, maxR: []int{0, 4, 2}},
	{name: "Q5_1", blk: 24, min: true, qh: true, nibbles: true, maxR: []int{0, 4, 2}},
	{name: "F32", elem: 4, maxR: []int{0, 4, 4, 3}},
	{name: "F16", elem: 2, maxR: []int{0, 4, 4, 3}},
	{name: "BF16", elem: 2, maxR: []int{0, 4, 4, 3}},
}

// floatLanes is the float types' step: the lanes of one accumulator.
const floatLanes = 8

// ktype describes one K-quant type.
type ktype struct {
	name string
	blk  int
}

var ktypes = []ktype{{"Q4_K", 144}, {"Q5_K", 176}, {"Q6_K", 210}}

// kqCols is the most columns one K-quant function takes.
const kqCols = 4

// gen accumulates the text of one assembly file and hands out vector
// registers.
type gen struct {
	b    bytes.Buffer
	used [32]bool
	dot  bool
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }

func (g *gen) label(name string) { fmt.Fprintf(&g.b, "%s:\n", name) }

func (g *gen) i(ins ...inst) {
	for _, in := range ins {
		g.p("%s", in)
	}
}

// vn allocates n consecutive vector registers (as multi-register loads
// need) and returns the first.
func (g *gen) vn(n int) int {
	for first := 0; first+n <= 32; first++ {
		free := true
		for r := first; r < first+n; r++ {
			free = free && !g.used[r]
		}
		if free {
			for r := first; r < first+n; r++ {
				g.used[r] = true
			}
			return first
		}
	}
	log.Fatalf("out of vector registers")
	return 0
}

func (g *gen) v() int { return g.vn(1) }

func (g *gen) free(rs ...int) {
	for _, r := range rs {
		if !g.used[r] {
			log.Fatalf("V%d freed twice", r)
		}
		g.used[r] = false
	}
}

// list names n consecutive registers from first as a VLD1 list.
func list(first, n int) string {
	s := "["
	for r := first; r < first+n; r++ {
		if r > first {
			s += ", "
		}
		s += fmt.Sprintf("V%d.B16", r)
	}
	return s + "]"
}

// groups4 writes into t the sums of the products of each group of four
// bytes of w and a (lane i: bytes 4i..4i+3). t must differ from w and a.
func (g *gen) groups4(t, w, a int) {
	if g.dot {
		g.i(zero(t), sdot(t, w, a))
		return
	}
	q := g.v()
	g.i(smull8(t, w, a), smull28(q, w, a), saddlp16(t, t), saddlp16(q, q), addp32(t, t, q))
	g.free(q)
}

// sum writes into t four int32 lanes whose total is Σ_k w_k·a_k over the
// 16-byte register pairs given (one or two), w_k in [0, 63]. t must
// differ from the others.
func (g *gen) sum(t int, w, a []int) {
	if g.dot {
		g.i(zero(t))
		for k := range w {
			g.i(sdot(t, w[k], a[k]))
		}
		return
	}
	// int16 lanes of at most 2·len(w) products of |63·128|: below 2^15.
	g.i(smull8(t, w[0], a[0]), smlal28(t, w[0], a[0]))
	for k := 1; k < len(w); k++ {
		g.i(smlal8(t, w[k], a[k]), smlal28(t, w[k], a[k]))
	}
	g.i(saddlp16(t, t))
}

// half loads the little-endian half-precision value at addr into Sd as
// float32, through GP register tmp.
func (g *gen) half(load, addr string, tmp, d int) {
	g.p("%s %s, R%d", load, addr, tmp)
	g.p("FMOVS R%d, F%d", tmp, d)
	g.p("FCVTHS F%d, F%d", d, d)
}

// floatTile writes the tile function of float kind k, R rows and C
// columns: per step of eight values, lane i of a pair's accumulator adds
// value i times activation i, fused (refFloat with eight lanes, the tail
// left to the tiler). It does not depend on the variant.
//
// GP registers: R0 steps left, R1-R4 weight rows, R5-R7 activation
// columns, R14 out, R15 out column stride, R16-R17 scratch.
func (g *gen) floatTile(k kind, vr variant, R, C int) {
	g.used = [32]bool{}
	name := tileName(k, vr, R, C)
	fmt.Fprintf(&g.b, "\n// func %s(nb int, w *byte, ws int, a *byte, as int, ad *byte, out *float32, os int)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	g.p("MOVD nb+0(FP), R0")
	g.p("MOVD w+8(FP), R1")
	g.p("MOVD ws+16(FP), R16")
	for r := 1; r < R; r++ {
		g.p("ADD R16, R%d, R%d", r, r+1)
	}
	g.p("MOVD a+24(FP), R5")
	g.p("MOVD as+32(FP), R17")
	for c := 1; c < C; c++ {
		g.p("ADD R17, R%d, R%d", 4+c, 5+c)
	}
	g.p("MOVD out+48(FP), R14")
	g.p("MOVD os+56(FP), R15")
	acc := make([][][2]int, R)
	for r := range R {
		acc[r] = make([][2]int, C)
		for c := range C {
			acc[r][c] = [2]int{g.v(), g.v()}
			g.i(zero(acc[r][c][0]), zero(acc[r][c][1]))
		}
	}
	act := make([]int, C)
	for c := range C {
		act[c] = g.vn(2)
	}
	w, h := g.vn(2), g.v()
	g.p("CBZ R0, done")
	g.label("loop")
	for c := range C {
		g.p("VLD1.P 32(R%d), %s", 5+c, list(act[c], 2))
	}
	for r := range R {
		row := fmt.Sprintf("R%d", 1+r)
		switch k.name {
		case "F32":
			g.p("VLD1.P 32(%s), %s", row, list(w, 2))
		case "F16":
			g.p("VLD1.P 16(%s), %s", row, list(h, 1))
			g.i(fcvtl(w, h), fcvtl2(w+1, h))
		case "BF16":
			g.p("VLD1.P 16(%s), %s", row, list(h, 1))
			g.i(shll16(w, h), shll216(w+1, h))
		}
		for c := range C {
			g.i(fmla4(acc[r][c][0], w, act[c]), fmla4(acc[r][c][1], w+1, act[c]+1))
		}
	}
	g.p("SUB $1, R0")
	g.p("CBNZ R0, loop")
	g.label("done")
	g.reduceStore(acc, R, C, h)
	g.p("RET")
}

// reduceStore sums each accumulator's eight lanes as reduce does (lanes i
// and i+4, then (0+2)+(1+3)) and stores it: row r, column c at
// out + c·os + 4r. t is a free vector register.
func (g *gen) reduceStore(acc [][][2]int, R, C, t int) {
	for c := range C {
		out := "R14"
		switch c {
		case 0:
		case 1:
			g.p("ADD R15, R14, R16")
			out = "R16"
		default:
			g.p("ADD R15, R16")
			out = "R16"
		}
		for r := range R {
			a0, a1 := acc[r][c][0], acc[r][c][1]
			g.i(fadd4(a0, a0, a1), ext8(t, a0, a0), fadd2(a0, a0, t), faddpS(a0, a0))
			g.p("FMOVS F%d, %d(%s)", a0, 4*r, out)
		}
	}
}

func tileName(k kind, vr variant, R, C int) string {
	return fmt.Sprintf("tile%s%s_%dx%d", k.name, vr.name, R, C)
}

// tile writes the tile function of kind k, R rows and C columns.
//
// GP registers: R0 blocks left, R1-R4 weight rows, R5-R7 activation
// columns, R8-R10 their block scales, R11-R13 their block sums, R14 out,
// R15 out column stride, R16-R17 scratch.
func (g *gen) tile(k kind, vr variant, R, C int) {
	g.used = [32]bool{}
	name := tileName(k, vr, R, C)
	fmt.Fprintf(&g.b, "\n// func %s(nb int, w *byte, ws int, a *byte, as int, ad *byte, out *float32, os int)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	g.p("MOVD nb+0(FP), R0")
	g.p("MOVD w+8(FP), R1")
	g.p("MOVD ws+16(FP), R16")
	for r := 1; r < R; r++ {
		g.p("ADD R16, R%d, R%d", r, r+1)
	}
	g.p("MOVD a+24(FP), R5")
	g.p("MOVD as+32(FP), R17")
	g.p("MOVD ad+40(FP), R8")
	for c := 1; c < C; c++ {
		g.p("ADD R17, R%d, R%d", 4+c, 5+c)
		g.p("ADD R17, R%d, R%d", 7+c, 8+c)
	}
	if k.min {
		g.p("LSL $2, R0, R16")
		for c := range C {
			g.p("ADD R16, R%d, R%d", 8+c, 11+c)
		}
	}
	g.p("MOVD out+48(FP), R14")
	g.p("MOVD os+56(FP), R15")

	var mask, off, idx0, idx1, bits, c10 int
	if k.nibbles {
		mask = g.v()
		g.i(movi8(mask, 0x0f))
	}
	if k.offset != 0 {
		off = g.v()
		g.i(movi8(off, k.offset))
	}
	if k.qh {
		// TBL indices spreading the four bytes of qh over the values they
		// hold bits of, and the bit of each value within its byte.
		idx0, idx1, bits, c10 = g.v(), g.v(), g.v(), g.v()
		g.p("MOVD $0x0101010101010101, R16")
		g.p("FMOVD ZR, F%d", idx0)
		g.i(insD1(idx0, 16))
		g.p("MOVD $0x0202020202020202, R16")
		g.p("MOVD $0x0303030303030303, R17")
		g.p("FMOVD R16, F%d", idx1)
		g.i(insD1(idx1, 17))
		g.p("MOVD $0x8040201008040201, R16")
		g.p("FMOVD R16, F%d", bits)
		g.i(insD1(bits, 16))
		g.i(movi8(c10, 0x10))
	}
	acc := make([][][2]int, R)
	for r := range R {
		acc[r] = make([][2]int, C)
		for c := range C {
			acc[r][c] = [2]int{g.v(), g.v()}
			g.i(zero(acc[r][c][0]), zero(acc[r][c][1]))
		}
	}
	act := make([]int, C)
	da := make([]int, C)
	sums := make([]int, C)
	for c := range C {
		act[c] = g.vn(2)
		da[c] = g.v()
		if k.min {
			sums[c] = g.v()
		}
	}
	dw, sc, t0, t1 := g.v(), g.v(), g.v(), g.v()
	w := g.vn(2)
	var m, h, x int
	if k.min {
		m = g.v()
	}
	if k.qh {
		h, x = g.v(), g.v()
	}

	g.p("CBZ R0, done")
	g.label("loop")
	for c := range C {
		g.p("VLD1.P 32(R%d), %s", 5+c, list(act[c], 2))
		g.p("FMOVS.P 4(R%d), F%d", 8+c, da[c])
		if k.min {
			g.p("FMOVS.P 4(R%d), F%d", 11+c, sums[c])
		}
	}
	for r := range R {
		row := fmt.Sprintf("R%d", 1+r)
		g.half("MOVHU.P", "2("+row+")", 16, dw)
		if k.min {
			g.half("MOVHU.P", "2("+row+")", 16, m)
		}
		if k.qh {
			g.p("MOVWU.P 4(%s), R17", row)
		}
		if k.nibbles {
			g.p("VLD1.P 16(%s), %s", row, list(w, 1))
			g.i(ushr8(w+1, w, 4), and16(w, w, mask))
		} else {
			g.p("VLD1.P 32(%s), %s", row, list(w, 2))
		}
		if k.qh {
			g.p("FMOVS R17, F%d", h)
			for j, idx := range []int{idx0, idx1} {
				g.i(tbl(x, h, idx), cmtst8(x, x, bits), and16(x, x, c10), orr16(w+j, w+j, x))
			}
		}
		if k.offset != 0 {
			g.i(sub8(w, w, off), sub8(w+1, w+1, off))
		}
		for c := range C {
			g.p("FMULS F%d, F%d, F%d", da[c], dw, sc)
			g.groups4(t0, w, act[c])
			g.groups4(t1, w+1, act[c]+1)
			g.i(scvtf4(t0, t0), scvtf4(t1, t1))
			g.i(fmlaElem(acc[r][c][0], t0, sc, 0), fmlaElem(acc[r][c][1], t1, sc, 0))
			if k.min {
				// lane 0 += m·s, fused, the other lanes kept
				g.p("FMADDS F%d, F%d, F%d, F%d", sums[c], acc[r][c][0], m, t0)
				g.i(insS0(acc[r][c][0], t0))
			}
		}
	}
	g.p("SUB $1, R0")
	g.p("CBNZ R0, loop")
	g.label("done")
	g.reduceStore(acc, R, C, t0)
	g.p("RET")
}

func kqName(kt ktype, vr variant, C int) string {
	return fmt.Sprintf("kq%s%s%d", kt.name[:2]+kt.name[3:], vr.name, C)
}

// kquant writes the K-quant function of type kt for C columns.
//
// GP registers: R0 weight row, R1 its stride, R2 rows left, R3 nb, R4
// activations, R5 their stride, R6 out (this row, column 0), R7 out column
// stride in bytes, R8 super-block, R9 super-blocks left, R10 activation
// values, R11 activation scales, R12 activation block sums (all column 0),
// R13 and R14 twice and three times the activation stride, R19 n, R20 the
// offset of the block sums, R15-R17 and R21-R22 scratch.
func (g *gen) kquant(kt ktype, vr variant, C int) {
	g.used = [32]bool{}
	name := kqName(kt, vr, C)
	fmt.Fprintf(&g.b, "\n// func %s(w *byte, ws, rows, nb int, a *byte, as int, out *float32, os int)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	g.p("MOVD w+0(FP), R0")
	g.p("MOVD ws+8(FP), R1")
	g.p("MOVD rows+16(FP), R2")
	g.p("MOVD nb+24(FP), R3")
	g.p("MOVD a+32(FP), R4")
	g.p("MOVD as+40(FP), R5")
	g.p("MOVD out+48(FP), R6")
	g.p("MOVD os+56(FP), R7")
	g.p("LSL $2, R7, R7")
	g.p("ADD R5, R5, R13")
	g.p("ADD R5, R13, R14")
	g.p("LSL $8, R3, R19")
	g.p("ADD R3<<2, R19, R20")
	colOff := []string{"", "R5", "R13", "R14"}
	// colAddr puts the address of column c's bytes at base in a register.
	colAddr := func(base string, c int) string {
		if c == 0 {
			return base
		}
		g.p("ADD %s, %s, R15", colOff[c], base)
		return "R15"
	}

	m0f := g.v()
	g.i(movi8(m0f, 0x0f))
	var m30 int
	if kt.name == "Q6_K" {
		m30 = g.v()
		g.i(movi8(m30, 0x30))
	}
	acc := make([]int, C)
	isum := make([]int, C)
	for c := range C {
		acc[c], isum[c] = g.v(), g.v()
	}
	d, dm := g.v(), g.v()

	g.p("CBZ R2, end")
	g.label("row")
	g.p("MOVD R0, R8")
	g.p("MOVD R4, R10")
	g.p("ADD R19, R4, R11")
	g.p("ADD R20, R4, R12")
	for c := range C {
		g.i(zero(acc[c]))
	}
	g.p("MOVD R3, R9")
	g.p("CBZ R9, store")
	g.label("block")
	for c := range C {
		g.i(zero(isum[c]))
	}
	var offsets func(c int) int // the block's offset term of column c, in Sx
	switch kt.name {
	case "Q4_K", "Q5_K":
		g.half("MOVHU", "(R8)", 15, d)
		g.half("MOVHU", "2(R8)", 15, dm)
		// the 6-bit scales and mins of the eight 32-value sub-blocks
		g.p("MOVWU 4(R8), R15")
		g.p("MOVWU 8(R8), R16")
		g.p("MOVWU 12(R8), R17")
		g.p("LSRW $6, R15, R21")
		g.p("ANDW $0x03030303, R21, R21")
		g.p("ANDW $0x0f0f0f0f, R17, R22")
		g.p("ORRW R21<<4, R22, R22")
		g.p("ANDW $0x3f3f3f3f, R15, R15")
		g.p("ORR R22<<32, R15, R15") // scales 0-7
		g.p("LSRW $6, R16, R21")
		g.p("ANDW $0x03030303, R21, R21")
		g.p("LSRW $4, R17, R22")
		g.p("ANDW $0x0f0f0f0f, R22, R22")
		g.p("ORRW R21<<4, R22, R22")
		g.p("ANDW $0x3f3f3f3f, R16, R16")
		g.p("ORR R22<<32, R16, R16") // mins 0-7
		sc, mn := g.vn(2), g.vn(2)
		t8 := g.v()
		g.p("FMOVD R15, F%d", t8)
		g.i(uxtl8(t8, t8), uxtl16(sc, t8), uxtl216(sc+1, t8))
		g.p("FMOVD R16, F%d", t8)
		g.i(uxtl8(t8, t8), uxtl16(mn, t8), uxtl216(mn+1, t8))
		g.free(t8)
		g.p("ADD $16, R8")
		var qh, m10, x int
		if kt.name == "Q5_K" {
			// bit j of qh[l] is the fifth bit of value l of sub-block j
			qh, m10, x = g.vn(2), g.v(), g.v()
			g.p("VLD1.P 32(R8), %s", list(qh, 2))
			g.i(movi8(m10, 0x10))
		}
		// high ORs the fifth bits of sub-block j into the two registers at w.
		high := func(w, j int) {
			if kt.name != "Q5_K" {
				return
			}
			for l := range 2 {
				switch {
				case j < 4:
					g.i(shl8(x, qh+l, 4-j), and16(x, x, m10))
				case j == 4:
					g.i(and16(x, qh+l, m10))
				default:
					g.i(ushr8(x, qh+l, j-4), and16(x, x, m10))
				}
				g.i(orr16(w+l, w+l, x))
			}
		}
		raw, lo := g.vn(2), g.vn(2)
		q, t := g.vn(4), g.v()
		for k := range 4 {
			g.p("VLD1.P 32(R8), %s", list(raw, 2))
			g.i(and16(lo, raw, m0f), and16(lo+1, raw+1, m0f), ushr8(raw, raw, 4), ushr8(raw+1, raw+1, 4))
			high(lo, 2*k)
			high(raw, 2*k+1)
			for c := range C {
				g.p("VLD1 (%s), %s", colAddr("R10", c), list(q, 4))
				j := 2 * k
				g.sum(t, []int{lo, lo + 1}, []int{q, q + 1})
				g.i(mlaElem(isum[c], t, sc+j/4, j%4))
				j++
				g.sum(t, []int{raw, raw + 1}, []int{q + 2, q + 3})
				g.i(mlaElem(isum[c], t, sc+j/4, j%4))
			}
			g.p("ADD $64, R10")
		}
		g.free(raw, raw+1, lo, lo+1, q, q+1, q+2, q+3, t, sc, sc+1)
		if kt.name == "Q5_K" {
			g.free(qh, qh+1, m10, x)
		}
		offsets = func(c int) int {
			b := g.vn(2)
			g.p("VLD1 (%s), %s", colAddr("R12", c), list(b, 2))
			g.i(saddlp16(b, b), saddlp16(b+1, b+1), mul32(b, b, mn), mla32(b, b+1, mn+1), addv32(b, b), scvtfS(b, b))
			g.free(b + 1)
			return b
		}
	case "Q6_K":
		g.half("MOVHU", "208(R8)", 15, d)
		g.p("FMOVS F%d, F%d", d, dm)
		s16 := g.vn(2)
		sc := g.vn(4)
		s8 := g.v()
		g.p("ADD $192, R8, R15")
		g.p("VLD1 (R15), %s", list(s8, 1))
		g.i(sxtl8(s16, s8), sxtl28(s16+1, s8))
		g.free(s8)
		g.i(sxtl16(sc, s16), sxtl216(sc+1, s16), sxtl16(sc+2, s16+1), sxtl216(sc+3, s16+1))
		g.i(shl16(s16, s16, 5), shl16(s16+1, s16+1, 5)) // the mins' 32·sc, int16
		ql, qh, w, x := g.vn(4), g.vn(2), g.vn(2), g.v()
		q, t := g.vn(2), g.v()
		for h := range 2 {
			g.p("ADD $%d, R8, R15", 64*h)
			g.p("VLD1 (R15), %s", list(ql, 4))
			g.p("ADD $%d, R8, R15", 128+32*h)
			g.p("VLD1 (R15), %s", list(qh, 2))
			for j := range 4 {
				for l := range 2 {
					src, hb := ql+(j&1)*2+l, qh+l
					if j < 2 {
						g.i(and16(w+l, src, m0f))
					} else {
						g.i(ushr8(w+l, src, 4))
					}
					switch j {
					case 0:
						g.i(shl8(x, hb, 4), and16(x, x, m30))
					case 1:
						g.i(shl8(x, hb, 2), and16(x, x, m30))
					case 2:
						g.i(and16(x, hb, m30))
					case 3:
						g.i(ushr8(x, hb, 2), and16(x, x, m30))
					}
					g.i(orr16(w+l, w+l, x))
				}
				for c := range C {
					g.p("VLD1 (%s), %s", colAddr("R10", c), list(q, 2))
					for l := range 2 {
						grp := 8*h + 2*j + l
						g.sum(t, []int{w + l}, []int{q + l})
						g.i(mlaElem(isum[c], t, sc+grp/4, grp%4))
					}
				}
				g.p("ADD $32, R10")
			}
		}
		g.free(ql, ql+1, ql+2, ql+3, qh, qh+1, w, w+1, x, q, q+1, t, sc, sc+1, sc+2, sc+3)
		offsets = func(c int) int {
			b, o := g.vn(2), g.v()
			g.p("VLD1 (%s), %s", colAddr("R12", c), list(b, 2))
			g.i(smull16(o, b, s16), smlal216(o, b, s16), smlal16(o, b+1, s16+1), smlal216(o, b+1, s16+1), addv32(o, o), scvtfS(o, o))
			g.free(b, b+1)
			return o
		}
	default:
		log.Fatalf("no K-quant kernel for %s", kt.name)
	}
	if kt.name == "Q6_K" { // the other loads went past the block already
		g.p("ADD $%d, R8", kt.blk)
	}
	da, dot := g.v(), g.v()
	for c := range C {
		o := offsets(c)
		g.i(addv32(dot, isum[c]), scvtfS(dot, dot))
		g.p("FMULS F%d, F%d, F%d", d, dot, dot)           // d·dot
		g.p("FMSUBS F%d, F%d, F%d, F%d", dm, dot, o, dot) // − dm·off, fused
		if c == 0 {
			g.p("FMOVS (R11), F%d", da)
		} else {
			g.p("FMOVS (R11)(%s), F%d", colOff[c], da)
		}
		g.p("FMADDS F%d, F%d, F%d, F%d", dot, acc[c], da, acc[c]) // acc + da·t, fused
		g.free(o)
	}
	g.free(da, dot)
	g.p("ADD $4, R11")
	g.p("ADD $32, R12")
	g.p("SUB $1, R9")
	g.p("CBNZ R9, block")
	g.label("store")
	for c := range C {
		switch c {
		case 0:
			g.p("FMOVS F%d, (R6)", acc[c])
		case 1:
			g.p("ADD R7, R6, R15")
			g.p("FMOVS F%d, (R15)", acc[c])
		default:
			g.p("ADD R7, R15")
			g.p("FMOVS F%d, (R15)", acc[c])
		}
	}
	g.p("ADD $4, R6")
	g.p("ADD R1, R0")
	g.p("SUB $1, R2")
	g.p("CBNZ R2, row")
	g.label("end")
	g.p("RET")
}

const header = "// Code generated by internal/arm64gen; DO NOT EDIT.\n\n"

func main() {
	if err := run(os.Args[1:]); err != nil {
		log.Fatal(err)
	}
}

// run writes the generated files into the directory given by -out (the
// current one by default).
func run(args []string) error {
	fs := flag.NewFlagSet("arm64gen", flag.ContinueOnError)
	dir := fs.String("out", ".", "directory the files are written to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := generate()
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*dir, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("arm64gen: %w", err)
		}
	}
	return nil
}

// file is one generated file: its name in the kernels package and its bytes.
type file struct {
	name string
	data []byte
}

func generate() ([]file, error) {
	var files []file

	// 32-value block types: tiles.
	g := &gen{}
	g.b.WriteString(header + "#include \"textflag.h\"\n")
	var decl, tables bytes.Buffer
	decl.WriteString(header + "package kernels\n\nimport \"github.com/tokenrouter/tokenrouter/gguf\"\n")
	for _, vr := range variants {
		g.dot = vr.dot
		fmt.Fprintf(&tables, "\n// tiles%s returns the %s tile kernels of each weight type.\nfunc tiles%s() map[gguf.TensorType]*tiler {\n\treturn map[gguf.TensorType]*tiler{\n", vr.name, vr.name, vr.name)
		for _, k := range kinds {
			maxC := len(k.maxR) - 1
			if k.elem != 0 {
				fmt.Fprintf(&tables, "gguf.%s: {typ: gguf.%s, float: true, step: %d, stepBytes: %d, maxC: %d, maxR: %#v, fn: [][]tileFunc{nil,\n", k.name, k.name, floatLanes, floatLanes*k.elem, maxC, k.maxR)
			} else {
				fmt.Fprintf(&tables, "gguf.%s: {typ: gguf.%s, step: 32, stepBytes: %d, maxC: %d, maxR: %#v, fn: [][]tileFunc{nil,\n", k.name, k.name, k.blk, maxC, k.maxR)
			}
			for C := 1; C <= maxC; C++ {
				tables.WriteString("{nil")
				for R := 1; R <= k.maxR[C]; R++ {
					act := "ActQ8"
					if k.elem != 0 {
						g.floatTile(k, vr, R, C)
						act = "ActF32"
					} else {
						g.tile(k, vr, R, C)
					}
					name := tileName(k, vr, R, C)
					fmt.Fprintf(&decl, "\n// %s computes a %d×%d tile of %s weights against %s activations (see tileFunc).\n//\n//go:noescape\nfunc %s(nb int, w *byte, ws int, a *byte, as int, ad *byte, out *float32, os int)\n", name, R, C, k.name, act, name)
					fmt.Fprintf(&tables, ", %s", name)
				}
				tables.WriteString("},\n")
			}
			tables.WriteString("}},\n")
		}
		tables.WriteString("}\n}\n")
	}
	decl.Write(tables.Bytes())
	src, err := format.Source(decl.Bytes())
	if err != nil {
		return nil, fmt.Errorf("arm64gen: tiles: %w", err)
	}
	files = append(files, file{"legacy_neon_arm64.s", g.b.Bytes()}, file{"tiles_arm64.go", src})

	// K-quant types.
	g = &gen{}
	g.b.WriteString(header + "#include \"textflag.h\"\n")
	var kdecl, run bytes.Buffer
	kdecl.WriteString(header + "package kernels\n\nimport \"github.com/tokenrouter/tokenrouter/gguf\"\n")
	fmt.Fprintf(&kdecl, "\n// kqNEONCols is the most columns one K-quant assembly call takes.\nconst kqNEONCols = %d\n", kqCols)
	run.WriteString(`
// kqNEONRun multiplies rows weight rows of type t (nb super-blocks each)
// against cols ≤ kqNEONCols activation columns with the assembly of the
// dot-product or plain variant, and reports whether there is one.
func kqNEONRun(t gguf.TensorType, dot bool, cols int, w *byte, ws, rows, nb int, a *byte, as int, out *float32, os int) bool {
	switch t {
`)
	for _, kt := range ktypes {
		fmt.Fprintf(&run, "case gguf.%s:\n\tswitch {\n", kt.name)
		for _, vr := range variants {
			g.dot = vr.dot
			for C := 1; C <= kqCols; C++ {
				g.kquant(kt, vr, C)
				name := kqName(kt, vr, C)
				fmt.Fprintf(&kdecl, "\n// %s multiplies rows %s weight rows against %d ActQ8K column(s) (see kqNEONRun).\n//\n//go:noescape\nfunc %s(w *byte, ws, rows, nb int, a *byte, as int, out *float32, os int)\n", name, kt.name, C, name)
				fmt.Fprintf(&run, "case dot == %v && cols == %d:\n\t%s(w, ws, rows, nb, a, as, out, os)\n\treturn true\n", vr.dot, C, name)
			}
		}
		run.WriteString("}\n")
	}
	run.WriteString("}\nreturn false\n}\n")
	kdecl.Write(run.Bytes())
	src, err = format.Source(kdecl.Bytes())
	if err != nil {
		return nil, fmt.Errorf("arm64gen: K-quants: %w", err)
	}
	files = append(files, file{"kquant_neon_arm64.s", g.b.Bytes()}, file{"kquant_neon_arm64.go", src})
	return files, nil
}
