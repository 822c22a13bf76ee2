package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedFilesAreGenerated checks that the generated files of the
// kernels package are byte for byte what the generator writes now: an edit
// by hand, or a generator change without `go generate`, fails here.
func TestCommittedFilesAreGenerated(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("the generator wrote no file")
	}
	for _, f := range files {
		have, err := os.ReadFile(filepath.Join("..", "..", f.name))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if !bytes.Equal(have, f.data) {
			t.Errorf("%s differs from the generator's output (%d bytes committed, %d generated): run `GOARCH=arm64 go generate ./engine/cpu/kernels/`", f.name, len(have), len(f.data))
		}
	}
	dir := t.TempDir()
	if err := run([]string{"-out", dir}); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s: the command wrote other bytes than generate returns", f.name)
		}
	}
}

// TestEncodings checks one instance of every instruction form against its
// encoding as an independent disassembler (GNU objdump for aarch64) reads
// it back.
func TestEncodings(t *testing.T) {
	for _, c := range []struct {
		in   inst
		want uint32
		asm  string // objdump's reading of want
	}{
		{sdot(7, 9, 2), 0x4e829527, "sdot v7.4s, v9.16b, v2.16b"},
		{smull8(7, 9, 2), 0x0e22c127, "smull v7.8h, v9.8b, v2.8b"},
		{smull28(11, 9, 2), 0x4e22c12b, "smull2 v11.8h, v9.16b, v2.16b"},
		{smlal8(17, 12, 14), 0x0e2e8191, "smlal v17.8h, v12.8b, v14.8b"},
		{smlal28(17, 11, 13), 0x4e2d8171, "smlal2 v17.8h, v11.16b, v13.16b"},
		{smull16(12, 10, 6), 0x0e66c14c, "smull v12.4s, v10.4h, v6.4h"},
		{smlal16(12, 11, 7), 0x0e67816c, "smlal v12.4s, v11.4h, v7.4h"},
		{smlal216(12, 10, 6), 0x4e66814c, "smlal2 v12.4s, v10.8h, v6.8h"},
		{saddlp16(7, 7), 0x4e6028e7, "saddlp v7.4s, v7.8h"},
		{addp32(7, 7, 11), 0x4eabbce7, "addp v7.4s, v7.4s, v11.4s"},
		{addv32(9, 9), 0x4eb1b929, "addv s9, v9.4s"},
		{mul32(9, 9, 7), 0x4ea79d29, "mul v9.4s, v9.4s, v7.4s"},
		{mla32(9, 10, 8), 0x4ea89549, "mla v9.4s, v10.4s, v8.4s"},
		{mlaElem(2, 17, 5, 1), 0x6fa50222, "mla v2.4s, v17.4s, v5.s[1]"},
		{mlaElem(2, 17, 21, 3), 0x6fb50a22, "mla v2.4s, v17.4s, v21.s[3]"},
		{uxtl8(9, 9), 0x2f08a529, "uxtl v9.8h, v9.8b"},
		{uxtl16(5, 9), 0x2f10a525, "uxtl v5.4s, v9.4h"},
		{uxtl216(6, 9), 0x6f10a526, "uxtl2 v6.4s, v9.8h"},
		{sxtl8(6, 12), 0x0f08a586, "sxtl v6.8h, v12.8b"},
		{sxtl28(7, 12), 0x4f08a587, "sxtl2 v7.8h, v12.16b"},
		{sxtl16(8, 6), 0x0f10a4c8, "sxtl v8.4s, v6.4h"},
		{sxtl216(9, 6), 0x4f10a4c9, "sxtl2 v9.4s, v6.8h"},
		{scvtf4(7, 7), 0x4e21d8e7, "scvtf v7.4s, v7.4s"},
		{scvtfS(9, 9), 0x5e21d929, "scvtf s9, s9"},
		{fmlaElem(0, 7, 6, 0), 0x4f8610e0, "fmla v0.4s, v7.4s, v6.s[0]"},
		{fmlaElem(0, 7, 22, 0), 0x4f9610e0, "fmla v0.4s, v7.4s, v22.s[0]"},
		{fmla4(0, 20, 2), 0x4e22ce80, "fmla v0.4s, v20.4s, v2.4s"},
		{fadd4(0, 0, 1), 0x4e21d400, "fadd v0.4s, v0.4s, v1.4s"},
		{fadd2(0, 0, 7), 0x0e27d400, "fadd v0.2s, v0.2s, v7.2s"},
		{faddpS(2, 2), 0x7e30d842, "faddp s2, v2.2s"},
		{fcvtl(20, 22), 0x0e217ad4, "fcvtl v20.4s, v22.4h"},
		{fcvtl2(21, 22), 0x4e217ad5, "fcvtl2 v21.4s, v22.8h"},
		{shll16(20, 22), 0x2e613ad4, "shll v20.4s, v22.4h, #16"},
		{shll216(21, 22), 0x6e613ad5, "shll2 v21.4s, v22.8h, #16"},
		{and16(11, 11, 0), 0x4e201d6b, "and v11.16b, v11.16b, v0.16b"},
		{orr16(15, 15, 18), 0x4eb21def, "orr v15.16b, v15.16b, v18.16b"},
		{sub8(11, 11, 1), 0x6e21856b, "sub v11.16b, v11.16b, v1.16b"},
		{cmtst8(18, 18, 4), 0x4e248e52, "cmtst v18.16b, v18.16b, v4.16b"},
		{tbl(18, 17, 2), 0x4e020232, "tbl v18.16b, {v17.16b}, v2.16b"},
		{ushr8(12, 11, 4), 0x6f0c056c, "ushr v12.16b, v11.16b, #4"},
		{ushr8(20, 17, 2), 0x6f0e0634, "ushr v20.16b, v17.16b, #2"},
		{shl8(20, 16, 4), 0x4f0c5614, "shl v20.16b, v16.16b, #4"},
		{shl16(6, 6, 5), 0x4f1554c6, "shl v6.8h, v6.8h, #5"},
		{movi8(0, 0x0f), 0x4f00e5e0, "movi v0.16b, #0xf"},
		{movi8(1, 0x30), 0x4f01e601, "movi v1.16b, #0x30"},
		{zero(2), 0x6f00e402, "movi v2.2d, #0x0"},
		{ext8(7, 0, 0), 0x6e004007, "ext v7.16b, v0.16b, v0.16b, #8"},
		{insS0(1, 9), 0x6e040521, "mov v1.s[0], v9.s[0]"},
		{insD1(2, 16), 0x4e181e02, "mov v2.d[1], x16"},
	} {
		if c.in.enc != c.want {
			t.Errorf("%s: encoded %#08x, want %#08x (%s)", c.in.text, c.in.enc, c.want, c.asm)
		}
	}
}
