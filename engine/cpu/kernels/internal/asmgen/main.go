// Command asmgen writes the amd64 assembly of the kernels package: one file
// per instruction set (legacy_avx2_amd64.s, legacy_avx512_amd64.s) and the Go
// declarations and tile tables that go with them (tiles_amd64.go).
//
// Every function it writes computes one tile of R weight rows × C activation
// columns over nb steps. Integer types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against
// ActQ8; AVX2 only, AVX-512 has the grouped kernels of grouped_amd64.s) step
// over 32-value blocks; float types (F32, F16, BF16 against ActF32) step
// over L values, L the lane count of the level (8 or 16).
// Each (row, column) pair has one accumulator of L float32 lanes updated by
// fused multiply-adds in block order and summed by one fixed tree, so a
// pair's result does not depend on the tile it was computed in; ref.go holds
// the pure-Go emulation of the same arithmetic.
//
// Run it with `go generate` in engine/cpu/kernels.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"strings"
)

// kind describes one weight type.
type kind struct {
	name     string // Go-name part, e.g. "Q8_0"
	float    bool
	blk      int  // bytes per block (int types) or per value (float types)
	qs       int  // offset of the 16 or 32 quant bytes in a block
	qh       int  // offset of the 32 high bits (Q5 types), -1 if none
	min      bool // has a min term (Q4_1, Q5_1)
	nibbles  bool
	offset   int // value subtracted from the stored quants (8, 16, 128 for Q8_0 via xor, 0)
	elemSize int // float types: bytes per value
}

var kinds = []kind{
	{name: "Q8_0", blk: 34, qs: 2, qh: -1, offset: 128},
	{name: "Q4_0", blk: 18, qs: 2, qh: -1, nibbles: true, offset: 8},
	{name: "Q4_1", blk: 20, qs: 4, qh: -1, nibbles: true, min: true},
	{name: "Q5_0", blk: 22, qs: 6, qh: 2, nibbles: true, offset: 16},
	{name: "Q5_1", blk: 24, qs: 8, qh: 4, nibbles: true, min: true},
	{name: "F32", float: true, elemSize: 4},
	{name: "F16", float: true, elemSize: 2},
	{name: "BF16", float: true, elemSize: 2},
}

// level describes one instruction set.
type level struct {
	name  string // "AVX2", "AVX512"
	file  string
	regs  int  // vector registers
	lanes int  // float32 lanes per accumulator
	wide  bool // zmm, mask registers, VNNI
}

var levels = []level{
	{name: "AVX2", file: "legacy_avx2_amd64.s", regs: 16, lanes: 8},
	{name: "AVX512", file: "legacy_avx512_amd64.s", regs: 32, lanes: 16, wide: true},
}

// shape gives the largest tile rows for each column count (index C).
type shape struct {
	maxC int
	maxR []int // maxR[C] for C in 1..maxC
}

func shapeOf(l level, k kind) shape {
	switch {
	case k.float && l.wide:
		return shape{6, []int{0, 4, 4, 4, 4, 4, 4}}
	case k.float:
		return shape{3, []int{0, 4, 4, 3}}
	case k.min:
		return shape{2, []int{0, 4, 2}}
	default:
		return shape{2, []int{0, 4, 3}}
	}
}

func fnName(l level, k kind, r, c int) string {
	return fmt.Sprintf("tile%s%s_%dx%d", k.name, l.name, r, c)
}

// gen accumulates assembly text and hands out vector registers.
type gen struct {
	b    bytes.Buffer
	l    level
	next int
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }

func (g *gen) vreg() int {
	if g.next >= g.l.regs {
		log.Fatalf("%s: out of vector registers", g.l.name)
	}
	g.next++
	return g.next - 1
}

// V names vector register i in the level's width.
func (g *gen) V(i int) string {
	if g.l.wide {
		return fmt.Sprintf("Z%d", i)
	}
	return fmt.Sprintf("Y%d", i)
}

// General-purpose registers: SI weights, BX row stride, R8 3×row stride,
// DI activations, R9 column stride, R11 3×column stride, R10 activation
// scales, DX out, R12 out column stride, CX loop count, R13 offset of the
// activation sums, AX scratch.
func rowAddr(r, off int) string { return rowAddrOf("SI", r, off) }

func rowAddrOf(base string, r, off int) string {
	switch r {
	case 0:
		return fmt.Sprintf("%d(%s)", off, base)
	case 1:
		return fmt.Sprintf("%d(%s)(BX*1)", off, base)
	case 2:
		return fmt.Sprintf("%d(%s)(BX*2)", off, base)
	case 3:
		return fmt.Sprintf("%d(%s)(R8*1)", off, base)
	}
	log.Fatalf("row %d", r)
	return ""
}

// prefetchTiles is how many tiles ahead the weight rows are prefetched.
// A tile's rows are short streams (a row is a few hundred bytes to a few
// KiB), too short for the hardware prefetcher to learn, so each step
// prefetches the same bytes of the rows of the tile prefetchTiles ahead.
const prefetchTiles = 4

// setupPrefetch points R13 at the rows prefetchTiles tiles ahead.
func (g *gen) setupPrefetch(R int) {
	g.p("MOVQ BX, R13")
	g.p("IMULQ $%d, R13", R*prefetchTiles)
	g.p("ADDQ SI, R13")
}

// prefetch issues the prefetches of one step of stepBytes per row.
func (g *gen) prefetch(R, stepBytes int) {
	for r := range R {
		for off := 0; off < stepBytes; off += 64 {
			g.p("PREFETCHT0 %s", rowAddrOf("R13", r, off))
		}
	}
	g.p("ADDQ $%d, R13", stepBytes)
}

func colAddr(base string, c, off int) string {
	switch c {
	case 0:
		return fmt.Sprintf("%d(%s)", off, base)
	case 1:
		return fmt.Sprintf("%d(%s)(R9*1)", off, base)
	case 2:
		return fmt.Sprintf("%d(%s)(R9*2)", off, base)
	case 3:
		return fmt.Sprintf("%d(%s)(R11*1)", off, base)
	case 4:
		return fmt.Sprintf("%d(%s)(R9*4)", off, base)
	case 5:
		return fmt.Sprintf("%d(%s)(AX*1)", off, base) // AX = 5×column stride
	}
	log.Fatalf("col %d", c)
	return ""
}

// start begins the tile function of k, R rows and C columns.
func (g *gen) start(k kind, R, C int) {
	g.next = 0
	g.prologue(fnName(g.l, k, R, C))
}

// endLoop closes the step loop and writes the epilogue.
func (g *gen) endLoop(acc [][]int, R, C int) {
	g.p("DECQ CX")
	g.p("JNZ loop")
	fmt.Fprintf(&g.b, "done:\n")
	g.epilogue(acc, R, C)
}

func (g *gen) prologue(name string) {
	fmt.Fprintf(&g.b, "\n// func %s(nb int, w *byte, ws int, a *byte, as int, ad *byte, out *float32, os int)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	g.p("MOVQ nb+0(FP), CX")
	g.p("MOVQ w+8(FP), SI")
	g.p("MOVQ ws+16(FP), BX")
	g.p("MOVQ a+24(FP), DI")
	g.p("MOVQ as+32(FP), R9")
	g.p("MOVQ ad+40(FP), R10")
	g.p("MOVQ out+48(FP), DX")
	g.p("MOVQ os+56(FP), R12")
	g.p("LEAQ (BX)(BX*2), R8")
	g.p("LEAQ (R9)(R9*2), R11")
	g.p("LEAQ (R9)(R9*4), AX")
	g.p("MOVQ CX, R13")
	g.p("SHLQ $2, R13")
}

// epilogue sums each accumulator's lanes by the fixed tree and stores it.
func (g *gen) epilogue(acc [][]int, R, C int) {
	t := g.vreg()
	for c := range C {
		for r := range R {
			a := acc[r][c]
			if g.l.wide {
				g.p("VEXTRACTF64X4 $1, Z%d, Y%d", a, t)
				g.p("VADDPS Y%d, Y%d, Y%d", t, a, a)
				g.p("VEXTRACTF32X4 $1, Y%d, X%d", a, t)
			} else {
				g.p("VEXTRACTF128 $1, Y%d, X%d", a, t)
			}
			g.p("VADDPS X%d, X%d, X%d", t, a, a)
			g.p("VMOVHLPS X%d, X%d, X%d", a, a, t)
			g.p("VADDPS X%d, X%d, X%d", t, a, a)
			g.p("VMOVSHDUP X%d, X%d", a, t)
			g.p("VADDSS X%d, X%d, X%d", t, a, a)
			g.p("VMOVSS X%d, %d(DX)", a, 4*r)
		}
		g.p("ADDQ R12, DX")
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

func (g *gen) zeroAcc(R, C int) [][]int {
	acc := make([][]int, R)
	for r := range acc {
		acc[r] = make([]int, C)
		for c := range acc[r] {
			acc[r][c] = g.vreg()
			if g.l.wide {
				g.p("VPXORD Z%d, Z%d, Z%d", acc[r][c], acc[r][c], acc[r][c])
			} else {
				g.p("VXORPS Y%d, Y%d, Y%d", acc[r][c], acc[r][c], acc[r][c])
			}
		}
	}
	return acc
}

// floatTile writes a tile for F32, F16 or BF16 weights.
func (g *gen) floatTile(k kind, R, C int) {
	g.start(k, R, C)
	acc := g.zeroAcc(R, C)
	L := g.l.lanes
	as := make([]int, C)
	for c := range as {
		as[c] = g.vreg()
	}
	w := g.vreg()
	g.setupPrefetch(R)
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	fmt.Fprintf(&g.b, "loop:\n")
	g.prefetch(R, L*k.elemSize)
	for c := range C {
		g.p("VMOVUPS %s, %s", colAddr("DI", c, 0), g.V(as[c]))
	}
	for r := range R {
		src := rowAddr(r, 0)
		switch k.name {
		case "F32":
			g.p("VMOVUPS %s, %s", src, g.V(w))
		case "F16":
			g.p("VCVTPH2PS %s, %s", src, g.V(w))
		case "BF16":
			g.p("VPMOVZXWD %s, %s", src, g.V(w))
			g.p("VPSLLD $16, %s, %s", g.V(w), g.V(w))
		}
		for c := range C {
			g.p("VFMADD231PS %s, %s, %s", g.V(as[c]), g.V(w), g.V(acc[r][c]))
		}
	}
	g.p("ADDQ $%d, SI", L*k.elemSize)
	g.p("ADDQ $%d, DI", L*4)
	g.endLoop(acc, R, C)
}

// intTileAVX2 writes an AVX2 tile for a 32-value block type: one block per
// step, products by VPMADDUBSW (sign moved onto the activations for signed
// weights) and VPMADDWD.
func (g *gen) intTileAVX2(k kind, R, C int) {
	g.start(k, R, C)
	acc := g.zeroAcc(R, C)
	a := make([]int, C)
	da := make([]int, C)
	sa := make([]int, C)
	for c := range C {
		a[c], da[c] = g.vreg(), g.vreg()
		if k.min {
			sa[c] = g.vreg()
		}
	}
	w, dw := g.vreg(), g.vreg()
	u, mw := -1, -1
	if k.min {
		mw = g.vreg()
	} else {
		u = g.vreg()
	}
	t, s := g.vreg(), g.vreg()
	g.p("LEAQ (R10)(R13*1), AX") // activation sums
	g.setupPrefetch(R)
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	fmt.Fprintf(&g.b, "loop:\n")
	g.prefetch(R, k.blk)
	for c := range C {
		g.p("VMOVDQU %s, Y%d", colAddr("DI", c, 0), a[c])
		g.p("VBROADCASTSS %s, Y%d", colAddr("R10", c, 0), da[c])
		if k.min {
			g.p("VMOVSS %s, X%d", colAddr("AX", c, 0), sa[c])
		}
	}
	for r := range R {
		// weights as int8 (signed types) or uint8 (types with a min)
		if k.nibbles {
			g.p("VMOVDQU %s, X%d", rowAddr(r, k.qs), w)
			g.p("VPSRLW $4, X%d, X%d", w, t)
			g.p("VINSERTI128 $1, X%d, Y%d, Y%d", t, w, w)
			g.p("VPAND ·c0F<>(SB), Y%d, Y%d", w, w)
		} else {
			g.p("VMOVDQU %s, Y%d", rowAddr(r, k.qs), w)
		}
		if k.qh >= 0 {
			g.p("VPBROADCASTD %s, Y%d", rowAddr(r, k.qh), t)
			g.p("VPSHUFB ·qhShuf<>(SB), Y%d, Y%d", t, t)
			g.p("VPOR ·qhBits<>(SB), Y%d, Y%d", t, t)
			g.p("VPCMPEQB ·cFF<>(SB), Y%d, Y%d", t, t)
			g.p("VPAND ·c10<>(SB), Y%d, Y%d", t, t)
			g.p("VPOR Y%d, Y%d, Y%d", t, w, w)
		}
		switch k.offset {
		case 8:
			g.p("VPSUBB ·c08<>(SB), Y%d, Y%d", w, w)
		case 16:
			g.p("VPSUBB ·c10<>(SB), Y%d, Y%d", w, w)
		}
		if !k.min {
			g.p("VPABSB Y%d, Y%d", w, u)
		}
		g.p("VPBROADCASTW %s, X%d", rowAddr(r, 0), dw)
		g.p("VCVTPH2PS X%d, Y%d", dw, dw)
		if k.min {
			g.p("VPXOR X%d, X%d, X%d", mw, mw, mw)
			g.p("VPINSRW $0, %s, X%d, X%d", rowAddr(r, 2), mw, mw)
			g.p("VCVTPH2PS X%d, Y%d", mw, mw)
		}
		for c := range C {
			if k.min {
				g.p("VPMADDUBSW Y%d, Y%d, Y%d", a[c], w, t)
			} else {
				g.p("VPSIGNB Y%d, Y%d, Y%d", w, a[c], t)
				g.p("VPMADDUBSW Y%d, Y%d, Y%d", t, u, t)
			}
			g.p("VPMADDWD ·ones16<>(SB), Y%d, Y%d", t, t)
			g.p("VCVTDQ2PS Y%d, Y%d", t, t)
			g.p("VMULPS Y%d, Y%d, Y%d", da[c], dw, s)
			g.p("VFMADD231PS Y%d, Y%d, Y%d", s, t, acc[r][c])
			if k.min {
				g.p("VFMADD231PS Y%d, Y%d, Y%d", sa[c], mw, acc[r][c])
			}
		}
	}
	g.p("ADDQ $%d, SI", k.blk)
	g.p("ADDQ $32, DI")
	g.p("ADDQ $4, R10")
	g.p("ADDQ $4, AX")
	g.endLoop(acc, R, C)
}

const constants = `
DATA ·c0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·c0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·c0F<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·c0F<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL ·c0F<>(SB), RODATA|NOPTR, $32
DATA ·c08<>+0(SB)/8, $0x0808080808080808
DATA ·c08<>+8(SB)/8, $0x0808080808080808
DATA ·c08<>+16(SB)/8, $0x0808080808080808
DATA ·c08<>+24(SB)/8, $0x0808080808080808
GLOBL ·c08<>(SB), RODATA|NOPTR, $32
DATA ·c10<>+0(SB)/8, $0x1010101010101010
DATA ·c10<>+8(SB)/8, $0x1010101010101010
DATA ·c10<>+16(SB)/8, $0x1010101010101010
DATA ·c10<>+24(SB)/8, $0x1010101010101010
GLOBL ·c10<>(SB), RODATA|NOPTR, $32
DATA ·cFF<>+0(SB)/8, $0xffffffffffffffff
DATA ·cFF<>+8(SB)/8, $0xffffffffffffffff
DATA ·cFF<>+16(SB)/8, $0xffffffffffffffff
DATA ·cFF<>+24(SB)/8, $0xffffffffffffffff
GLOBL ·cFF<>(SB), RODATA|NOPTR, $32
DATA ·ones16<>+0(SB)/8, $0x0001000100010001
DATA ·ones16<>+8(SB)/8, $0x0001000100010001
DATA ·ones16<>+16(SB)/8, $0x0001000100010001
DATA ·ones16<>+24(SB)/8, $0x0001000100010001
GLOBL ·ones16<>(SB), RODATA|NOPTR, $32
DATA ·qhShuf<>+0(SB)/8, $0x0000000000000000
DATA ·qhShuf<>+8(SB)/8, $0x0101010101010101
DATA ·qhShuf<>+16(SB)/8, $0x0202020202020202
DATA ·qhShuf<>+24(SB)/8, $0x0303030303030303
GLOBL ·qhShuf<>(SB), RODATA|NOPTR, $32
DATA ·qhBits<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA ·qhBits<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA ·qhBits<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA ·qhBits<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL ·qhBits<>(SB), RODATA|NOPTR, $32
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		log.Fatal(err)
	}
}

// run writes the generated files into the directory given by -out (the
// current one by default).
func run(args []string) error {
	fs := flag.NewFlagSet("asmgen", flag.ContinueOnError)
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
			return fmt.Errorf("asmgen: %w", err)
		}
	}
	return nil
}

// file is one generated file: its name in the kernels package and its bytes.
type file struct {
	name string
	data []byte
}

// generate returns the generated files: one assembly file per level and
// the Go declarations and tile tables.
func generate() ([]file, error) {
	var files []file
	var decl bytes.Buffer
	decl.WriteString("// Code generated by internal/asmgen; DO NOT EDIT.\n\npackage kernels\n\n")
	var tables bytes.Buffer
	for _, l := range levels {
		g := &gen{l: l}
		g.b.WriteString("// Code generated by internal/asmgen; DO NOT EDIT.\n\n#include \"textflag.h\"\n")
		fmt.Fprintf(&tables, "// tiles%s returns the %s tile kernels of each weight type.\nfunc tiles%s() map[gguf.TensorType]*tiler {\nreturn map[gguf.TensorType]*tiler{\n", l.name, l.name, l.name)
		for _, k := range kinds {
			if l.wide && !k.float {
				continue // the block types have the grouped kernels at AVX-512
			}
			g.kindTiles(&decl, &tables, k)
		}
		tables.WriteString("}\n}\n\n")
		if !l.wide {
			g.b.WriteString(constants)
		}
		files = append(files, file{l.file, bytes.Clone(g.b.Bytes())})
	}
	src := strings.Replace(decl.String(), "package kernels\n", "package kernels\n\nimport \"github.com/tokenrouter/tokenrouter/gguf\"\n", 1) + tables.String()
	out, err := format.Source([]byte(src))
	if err != nil {
		return nil, fmt.Errorf("format: %w\n%s", err, src)
	}
	return append(files, file{"tiles_amd64.go", out}), nil
}

// kindTiles writes the tiles of weight type k at g's level: the functions
// into g's assembly, their declarations into decl and their table into
// tables.
func (g *gen) kindTiles(decl, tables *bytes.Buffer, k kind) {
	l := g.l
	sh := shapeOf(l, k)
	if k.float {
		fmt.Fprintf(tables, "gguf.%s: {typ: gguf.%s, float: true, step: %d, stepBytes: %d, maxC: %d, maxR: %#v, fn: [][]tileFunc{nil,\n", k.name, k.name, l.lanes, l.lanes*k.elemSize, sh.maxC, sh.maxR)
	} else {
		fmt.Fprintf(tables, "gguf.%s: {typ: gguf.%s, step: 32, stepBytes: %d, maxC: %d, maxR: %#v, fn: [][]tileFunc{nil,\n", k.name, k.name, k.blk, sh.maxC, sh.maxR)
	}
	for c := 1; c <= sh.maxC; c++ {
		tables.WriteString("{nil, ")
		for r := 1; r <= sh.maxR[c]; r++ {
			name := fnName(l, k, r, c)
			fmt.Fprintf(decl, "//go:noescape\nfunc %s(nb int, w *byte, ws int, a *byte, as int, ad *byte, out *float32, os int)\n\n", name)
			fmt.Fprintf(tables, "%s, ", name)
			if k.float {
				g.floatTile(k, r, c)
			} else {
				g.intTileAVX2(k, r, c)
			}
		}
		tables.WriteString("},\n")
	}
	tables.WriteString("}},\n")
}
