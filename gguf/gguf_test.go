package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

func modelsDir(t testing.TB) string { return testmodels.Dir(t) }

func TestStories260K(t *testing.T) {
	f, err := Open(filepath.Join(modelsDir(t), "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.Tensors) != 48 || len(f.KVs) != 19 || f.Alignment != 32 || f.DataOffset != 14176 {
		t.Fatalf("header: v%d %d tensors %d kvs align %d data at %d", f.Version, len(f.Tensors), len(f.KVs), f.Alignment, f.DataOffset)
	}
	if f.Arch() != "llama" {
		t.Fatalf("arch %q", f.Arch())
	}
	if v, ok := f.Uint("llama.attention.head_count_kv"); !ok || v != 4 {
		t.Fatalf("head_count_kv %v %v", v, ok)
	}
	if v, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || math.Abs(v-1e-5) > 1e-12 {
		t.Fatalf("eps %v", v)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if len(toks) != 512 || len(scores) != 512 || len(types) != 512 || toks[1] != "<s>" || toks[3] != "<0x00>" || scores[511] != -252 || types[3] != 6 {
		t.Fatalf("vocabulary: %d %d %d %q %q %v %v", len(toks), len(scores), len(types), toks[1], toks[3], scores[511], types[3])
	}
	if v, ok := f.Uint("tokenizer.ggml.seperator_token_id"); !ok || v != 4294967295 {
		t.Fatalf("seperator id %v", v)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Type != F32 || !reflect.DeepEqual(emb.Dims, []uint64{64, 512}) {
		t.Fatalf("token_embd %+v", emb)
	}
	out, _ := f.Tensor("output.weight")
	a, _ := f.TensorData(emb)
	b, _ := f.TensorData(out)
	if string(a) != string(b) {
		t.Fatal("output.weight should equal token_embd.weight in this file")
	}
	last := f.Tensors[len(f.Tensors)-1]
	if f.DataOffset+last.Offset+last.Size() != 1185376 {
		t.Fatalf("tensor data ends at %d", f.DataOffset+last.Offset+last.Size())
	}
}

func TestWriterRoundTripAllTypes(t *testing.T) {
	w := NewWriter()
	vals := map[string]any{
		"u8": uint8(200), "i8": int8(-5), "u16": uint16(60000), "i16": int16(-30000),
		"u32": uint32(4000000000), "i32": int32(-2000000000), "f32": float32(1.5), "b": true,
		"s": "héllo", "u64": uint64(1 << 60), "i64": int64(-1 << 60), "f64": 2.25,
		"au8": []uint8{1, 2}, "ai8": []int8{-1, 2}, "au16": []uint16{3}, "ai16": []int16{-4},
		"au32": []uint32{5, 6}, "ai32": []int32{-7}, "af32": []float32{0.5, -0.25}, "ab": []bool{true, false},
		"as": []string{"a", "", "ccc"}, "au64": []uint64{9}, "ai64": []int64{-9}, "af64": []float64{1e300},
		"nested": Value{Type: TypeArray, ElemType: TypeArray, V: []Value{
			{Type: TypeArray, ElemType: TypeInt32, V: []int32{1, 2}},
			{Type: TypeArray, ElemType: TypeString, V: []string{"x"}},
		}},
	}
	keys := []string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "b", "s", "u64", "i64", "f64", "au8", "ai8", "au16", "ai16", "au32", "ai32", "af32", "ab", "as", "au64", "ai64", "af64", "nested"}
	for _, k := range keys {
		if err := w.AddKV(k, vals[k]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddKV("general.alignment", uint32(64)); err != nil {
		t.Fatal(err)
	}
	w.Alignment = 64
	for _, typ := range []TensorType{F32, F16, BF16, Q8_0, Q4_0} {
		v := make([]float32, 64)
		for i := range v {
			v[i] = float32(i-32) / 8
		}
		if err := w.AddFloats("t_"+typ.String(), typ, []uint64{32, 2}, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	for _, k := range keys {
		got, ok := f.Get(k)
		want := vals[k]
		if wv, isV := want.(Value); isV {
			want = wv.V
		}
		if !ok || !reflect.DeepEqual(got.V, want) {
			t.Errorf("%s: got %#v, want %#v", k, got.V, want)
		}
	}
	for _, ti := range f.Tensors {
		data, err := f.TensorData(&ti)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, 64)
		if err := Dequantize(ti.Type, out, data); err != nil {
			t.Fatal(err)
		}
		for i, v := range out {
			want := float32(i-32) / 8
			tol := map[TensorType]float64{F32: 0, F16: 0, BF16: 0, Q8_0: 4.0 / 254, Q4_0: 4.0 / 8}[ti.Type]
			if math.Abs(float64(v-want)) > tol+1e-6 {
				t.Fatalf("%s[%d] = %v, want %v", ti.Name, i, v, want)
			}
		}
	}
}

func TestDequantizeKnownBlocks(t *testing.T) {
	// Q8_0: d = 0.5 (f16 0x3800), q = -128, -1, 0, 1, 127, ...
	q8 := make([]byte, 34)
	binary.LittleEndian.PutUint16(q8, 0x3800)
	for j, q := range []int8{-128, -1, 0, 1, 127} {
		q8[2+j] = byte(q)
	}
	out := make([]float32, 32)
	if err := Dequantize(Q8_0, out, q8); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out[:5], []float32{-64, -0.5, 0, 0.5, 63.5}) || out[31] != 0 {
		t.Fatalf("Q8_0: %v", out[:5])
	}
	// Q4_0: d = 2 (0x4000); byte j holds element j (low nibble) and j+16 (high).
	q4 := make([]byte, 18)
	binary.LittleEndian.PutUint16(q4, 0x4000)
	q4[2] = 0x0F // element 0: 15-8 = 7 -> 14; element 16: 0-8 -> -16
	q4[3] = 0x98 // element 1: 8-8 = 0; element 17: 9-8 = 1 -> 2
	if err := Dequantize(Q4_0, out, q4); err != nil {
		t.Fatal(err)
	}
	if out[0] != 14 || out[16] != -16 || out[1] != 0 || out[17] != 2 || out[2] != -16 {
		t.Fatalf("Q4_0: %v", out)
	}
	// F16 and BF16 specials.
	f16 := []uint16{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00}
	want := []float32{1, -2, 65504, float32(math.Ldexp(1, -24)), float32(math.Copysign(0, -1)), float32(math.Inf(1))}
	for i, h := range f16 {
		if got := F16ToF32(h); got != want[i] || math.Signbit(float64(got)) != math.Signbit(float64(want[i])) {
			t.Errorf("F16 %#04x = %v, want %v", h, got, want[i])
		}
		if back := F32ToF16(want[i]); back != h {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", want[i], back, h)
		}
	}
	bf := make([]byte, 4)
	binary.LittleEndian.PutUint16(bf, 0x3F80)
	binary.LittleEndian.PutUint16(bf[2:], 0xC0A0)
	o2 := make([]float32, 2)
	if err := Dequantize(BF16, o2, bf); err != nil || o2[0] != 1 || o2[1] != -5 {
		t.Fatalf("BF16: %v %v", o2, err)
	}
	if err := Dequantize(IQ4_NL, out, make([]byte, 1000)); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "IQ4_NL") {
		t.Fatalf("IQ4_NL: %v", err)
	}
	if err := Dequantize(Q8_0, out, q8[:20]); !errors.Is(err, ErrFormat) {
		t.Fatalf("short Q8_0 data: %v", err)
	}
}

func TestF16RoundTripExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f {
			continue // NaN
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// validFile builds a small valid GGUF file used as the base of the broken
// corpus and the fuzz seeds.
func validFile(t testing.TB) []byte {
	w := NewWriter()
	for k, v := range map[string]any{"general.architecture": "llama", "a.n": uint32(3), "a.list": []string{"x", "yy"}, "a.f": []float32{1, 2}} {
		if err := w.AddKV(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddFloats("w", Q8_0, []uint64{32, 2}, make([]float32, 64)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddFloats("v", F32, []uint64{4}, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func header(version uint32, tensors, kvs uint64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, tensors)
	return binary.LittleEndian.AppendUint64(b, kvs)
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// brokenFiles is a corpus of deliberately malformed files.
func brokenFiles(t testing.TB) map[string][]byte {
	valid := validFile(t)
	m := map[string][]byte{
		"empty":           {},
		"bad magic":       append([]byte("GGUX"), valid[4:]...),
		"version 1":       header(1, 0, 0),
		"version 4":       header(4, 0, 0),
		"huge tensors":    header(3, 1<<40, 0),
		"huge kvs":        header(3, 0, 1<<40),
		"huge string":     binary.LittleEndian.AppendUint64(header(3, 0, 1), 1<<50),
		"string past end": append(binary.LittleEndian.AppendUint64(header(3, 0, 1), 100), "abc"...),
	}
	kv := func(typ uint32, rest ...byte) []byte {
		b := appendStr(header(3, 0, 1), "k")
		b = binary.LittleEndian.AppendUint32(b, typ)
		return append(b, rest...)
	}
	m["unknown value type"] = kv(13, 0, 0, 0, 0)
	m["huge array"] = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(kv(uint32(TypeArray)), uint32(TypeUint64)), 1<<62)
	m["array past end"] = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(kv(uint32(TypeArray)), uint32(TypeUint64)), 1000)
	m["array of bad type"] = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(kv(uint32(TypeArray)), 99), 1)
	deep := kv(uint32(TypeArray))
	for range 6 {
		deep = binary.LittleEndian.AppendUint32(deep, uint32(TypeArray))
		deep = binary.LittleEndian.AppendUint64(deep, 1)
	}
	m["arrays nested too deep"] = deep
	dup := appendStr(header(3, 0, 2), "k")
	dup = binary.LittleEndian.AppendUint32(dup, uint32(TypeUint8))
	dup = append(dup, 1)
	dup = appendStr(dup, "k")
	dup = binary.LittleEndian.AppendUint32(dup, uint32(TypeUint8))
	m["duplicate key"] = append(dup, 2)
	tensor := func(dims []uint64, typ uint32, off uint64, data int) []byte {
		b := appendStr(header(3, 1, 0), "t")
		b = binary.LittleEndian.AppendUint32(b, uint32(len(dims)))
		for _, d := range dims {
			b = binary.LittleEndian.AppendUint64(b, d)
		}
		b = binary.LittleEndian.AppendUint32(b, typ)
		b = binary.LittleEndian.AppendUint64(b, off)
		for len(b)%32 != 0 {
			b = append(b, 0)
		}
		return append(b, make([]byte, data)...)
	}
	m["zero dimension"] = tensor([]uint64{0}, 0, 0, 64)
	m["five dimensions"] = tensor([]uint64{1, 1, 1, 1, 1}, 0, 0, 64)
	m["huge dimensions"] = tensor([]uint64{1 << 30, 1 << 30, 1 << 30}, 0, 0, 64)
	m["tensor past end"] = tensor([]uint64{32}, 0, 0, 64)
	m["misaligned offset"] = tensor([]uint64{4}, 0, 3, 64)
	m["row not a block multiple"] = tensor([]uint64{33}, uint32(Q8_0), 0, 64)
	m["no tensor data"] = tensor([]uint64{4}, 0, 0, 0)[:len(tensor([]uint64{4}, 0, 0, 0))-1]
	m["alignment not a power of two"] = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(appendStr(header(3, 0, 1), "general.alignment"), uint32(TypeUint32)), 24)
	vf, err := Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	end := dataEnd(vf)
	for _, n := range []int{1, 4, 8, 23, 24, 40, len(valid) / 2, end - 1} {
		m["truncated at "+string(rune('0'+n%10))+"/"+itoa(n)] = valid[:n]
	}
	return m
}

// dataEnd is the file offset where the last tensor's data ends.
func dataEnd(f *File) int {
	end := f.DataOffset
	for _, t := range f.Tensors {
		end = max(end, f.DataOffset+t.Offset+t.Size())
	}
	return int(end)
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}

func TestBrokenFilesGiveErrors(t *testing.T) {
	if _, err := Parse(validFile(t)); err != nil {
		t.Fatalf("valid base file: %v", err)
	}
	for name, b := range brokenFiles(t) {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: error %v is not one of the package's errors", name, err)
		}
	}
	// Every truncation of a valid file fails cleanly.
	valid := validFile(t)
	f, err := Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	for n := range dataEnd(f) {
		if _, err := Parse(valid[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
}

func TestUnsupportedTensorTypeIsNamed(t *testing.T) {
	w := NewWriter()
	w.AddTensor("q", IQ4_NL, []uint64{256}, make([]byte, 144))
	b, _ := w.Bytes()
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("q")
	if _, err := f.TensorData(ti); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "IQ4_NL") {
		t.Fatalf("error %v should name IQ4_NL", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(validFile(f))
	for _, b := range brokenFiles(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			data, err := file.TensorData(ti)
			if err != nil {
				continue
			}
			n := min(int(ti.Dims[0]), 4096)
			out := make([]float32, n)
			if err := Dequantize(ti.Type, out, data); err != nil && uint64(len(data)) >= uint64(ti.Type.RowBytes(n)) {
				t.Fatalf("tensor %q: %v", ti.Name, err)
			}
		}
	})
}
