package nn

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/route/nn/torchtest"
)

// sample is a save_model dict exercising every storage type, strided
// and offset views, a parameter, a dtype value and nested plain values.
func sample() (torchtest.Dict, map[string]Tensor) {
	want := map[string]Tensor{
		"a.weight": {Shape: []int{2, 3}, Data: []float32{1, -2, 3.25, 4, 0, -6}},
		"a.bias":   {Shape: []int{2}, Data: []float32{0.5, -1}},
		"t.weight": {Shape: []int{3, 2}, Data: []float32{1, 2, 3, 4, 5, 6}},
		"h.weight": {Shape: []int{2, 2}, Data: []float32{1.5, -0.25, 65504, 6.103515625e-05}},
		"b.weight": {Shape: []int{3}, Data: []float32{-2, 0.5, 3}},
		"d.weight": {Shape: []int{1}, Data: []float32{0.1}},
		"s.scalar": {Shape: []int{}, Data: []float32{7}},
		"p.weight": {Shape: []int{1, 2}, Data: []float32{9, -9}},
	}
	tensor := func(name string, t torchtest.Tensor) torchtest.Pair {
		t.Shape, t.Data = want[name].Shape, want[name].Data
		return torchtest.Pair{Key: name, Value: &t}
	}
	state := []torchtest.Pair{
		tensor("a.weight", torchtest.Tensor{Offset: 3}),
		tensor("a.bias", torchtest.Tensor{}),
		tensor("t.weight", torchtest.Tensor{Transposed: true}),
		tensor("h.weight", torchtest.Tensor{Storage: "HalfStorage"}),
		tensor("b.weight", torchtest.Tensor{Storage: "BFloat16Storage"}),
		tensor("d.weight", torchtest.Tensor{Storage: "DoubleStorage"}),
		tensor("s.scalar", torchtest.Tensor{}),
		tensor("p.weight", torchtest.Tensor{Parameter: true}),
	}
	init := torchtest.Dict{
		{Key: "hidden_states_size", Value: 8}, {Key: "logits_size", Value: 300},
		{Key: "hidden_dims", Value: torchtest.List{6, 10, 6}}, {Key: "expansion_factor", Value: 2},
		{Key: "dropout_rate", Value: 0.1}, {Key: "dtype", Value: torchtest.DType("float32")},
		{Key: "normalize_input", Value: false}, {Key: "big", Value: 1 << 40}, {Key: "neg", Value: -70000},
		{Key: "pair", Value: torchtest.Tuple{1, "x", nil, true}},
	}
	return torchtest.R2R("HiddenStatesTokenLMHeadLogitsClassifier", init, 0.375, state), want
}

func writeSample(t *testing.T, v any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "router.pt")
	if err := torchtest.Write(path, v); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadTorch reads a file built from the format's specification: every
// tensor as its logical values, and the save_model fields as metadata.
func TestReadTorch(t *testing.T) {
	v, want := sample()
	path := writeSample(t, v)
	w, err := LoadRouter(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(w.Tensors), len(want))
	}
	for name, x := range want {
		got := w.Tensors[name]
		if !slices.Equal(got.Shape, x.Shape) || !slices.Equal(got.Data, x.Data) {
			t.Errorf("%s: %v %v, want %v %v", name, got.Shape, got.Data, x.Shape, x.Data)
		}
	}
	if w.Meta["model_type"] != "HiddenStatesTokenLMHeadLogitsClassifier" {
		t.Errorf("model_type %q", w.Meta["model_type"])
	}
	var init map[string]any
	if err := json.Unmarshal([]byte(w.Meta["init_args"]), &init); err != nil {
		t.Fatal(err)
	}
	wantInit := map[string]any{"hidden_states_size": 8.0, "logits_size": 300.0, "hidden_dims": []any{6.0, 10.0, 6.0},
		"expansion_factor": 2.0, "dropout_rate": 0.1, "dtype": "float32", "normalize_input": false,
		"big": float64(1 << 40), "neg": -70000.0, "pair": []any{1.0, "x", nil, true}}
	if !reflect.DeepEqual(init, wantInit) {
		t.Errorf("init_args %v, want %v", init, wantInit)
	}
	if thr, ok, err := w.CommonThreshold(); err != nil || !ok || thr != 0.375 {
		t.Errorf("threshold %v %v %v", thr, ok, err)
	}
	if w.Meta["model_specific_args"] != "{}" {
		t.Errorf("model_specific_args %q", w.Meta["model_specific_args"])
	}

	// The converted file holds the same tensors and metadata.
	out := filepath.Join(t.TempDir(), "router.safetensors")
	if _, err := ConvertTorch(path, out); err != nil {
		t.Fatal(err)
	}
	s, err := LoadRouter(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Meta, w.Meta) {
		t.Errorf("converted metadata %v, want %v", s.Meta, w.Meta)
	}
	for name, x := range w.Tensors {
		if y := s.Tensors[name]; !slices.Equal(y.Shape, x.Shape) || !slices.Equal(y.Data, x.Data) {
			t.Errorf("converted %s: %v, want %v", name, y, x)
		}
	}
}

// TestReadTorchBareStateDict: a state dict saved alone reads with no
// metadata; a null threshold is no threshold.
func TestReadTorchBareStateDict(t *testing.T) {
	w, err := LoadTorch(writeSample(t, torchtest.OrderedDict{Items: []torchtest.Pair{
		{Key: "x.weight", Value: &torchtest.Tensor{Shape: []int{2}, Data: []float32{1, 2}}}}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Meta) != 0 || !slices.Equal(w.Tensors["x.weight"].Data, []float32{1, 2}) {
		t.Fatalf("bare state dict: %+v", w)
	}
	w, err = LoadTorch(writeSample(t, torchtest.R2R("M", nil, nil, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := w.CommonThreshold(); ok || err != nil {
		t.Fatalf("null threshold: %v %v", ok, err)
	}
}

// archiveWith builds an archive from a pickle and storages.
func archiveWith(t *testing.T, pkl []byte, st map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := torchtest.Archive(&b, "r", pkl, st); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadTorchBad: each malformed or hostile file is a clear error.
func TestReadTorchBad(t *testing.T) {
	v, _ := sample()
	pkl, st, err := torchtest.Pickle(v)
	if err != nil {
		t.Fatal(err)
	}
	good := archiveWith(t, pkl, st)
	short := map[string][]byte{}
	for k, b := range st {
		short[k] = b[:len(b)-1]
	}
	pickled := func(v any) []byte {
		p, s, err := torchtest.Pickle(v)
		if err != nil {
			t.Fatal(err)
		}
		return archiveWith(t, p, s)
	}
	tensor := func(t *torchtest.Tensor) torchtest.OrderedDict {
		return torchtest.OrderedDict{Items: []torchtest.Pair{{Key: "x", Value: t}}}
	}
	zipOf := func(entries map[string][]byte) []byte {
		var b bytes.Buffer
		z := zip.NewWriter(&b)
		for name, data := range entries {
			if f, err := z.Create(name); err != nil {
				t.Fatal(err)
			} else if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"truncated zip", good[:len(good)/2], "zip"},
		{"truncated pickle", archiveWith(t, pkl[:len(pkl)/2], st), "truncated"},
		{"short storage", archiveWith(t, pkl, short), "bytes, want"},
		{"forbidden global", pickled(torchtest.Call{Func: torchtest.Global{Module: "os", Name: "system"}, Args: torchtest.Tuple{"true"}}), "global os.system is not allowed"},
		{"integer tensor", pickled(tensor(&torchtest.Tensor{Shape: []int{1}, Data: []float32{3}, Storage: "LongStorage"})), "only floating-point"},
		{"not a dict", pickled(torchtest.List{1, 2}), "holds a value of type list"},
		{"non-tensor entry", pickled(torchtest.OrderedDict{Items: []torchtest.Pair{{Key: "x", Value: 3}}}), `"x" is of type int`},
		{"big endian", zipOf(map[string][]byte{"r/data.pkl": pkl, "r/byteorder": []byte("big")}), "only little-endian"},
		{"no record", zipOf(map[string][]byte{"r/version": []byte("3\n")}), "without <name>/data.pkl"},
		{"empty file", nil, "zip"},
	} {
		_, err := ReadTorch(bytes.NewReader(c.file), int64(len(c.file)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	legacy := filepath.Join(t.TempDir(), "legacy.pt")
	if err := os.WriteFile(legacy, pkl, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRouter(legacy); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("legacy format: %v", err)
	}
}

// TestUnpickleBounds: views past their storage, cyclic values and deep
// nesting are refused.
func TestUnpickleBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		pkl  string
		want string
	}{
		{"underflow", "\x80\x02K\x01(0.", "underflow"},
		{"unset memo", "\x80\x02h\x05.", "memo 5 unset"},
		{"odd setitems", "\x80\x02}(K\x01u.", "odd number"},
		{"long integer", "\x80\x02\x8a\x09" + strings.Repeat("\x01", 9) + ".", "does not fit"},
		{"unknown opcode", "\x80\x02\xff.", "unsupported opcode"},
		{"two values at stop", "\x80\x02K\x01K\x02.", "STOP with 2 values"},
		{"deep marks", "\x80\x02" + strings.Repeat("(", 300) + ".", "nested MARKs"},
	} {
		_, err := unpickle([]byte(c.pkl))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// A list holding itself cannot become JSON.
	root, err := unpickle([]byte("\x80\x02}q\x00X\x09\x00\x00\x00init_args]q\x01h\x01as."))
	if err != nil {
		t.Fatal(err)
	}
	budget := maxPickleJSON
	if _, err := pyJSON(root, 0, &budget); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("cyclic list: %v", err)
	}
	// Lists sharing their elements twice over, 30 deep: 2³⁰ values as
	// JSON.
	dag := "\x80\x02]q\x00"
	for i := 1; i <= 30; i++ {
		dag += fmt.Sprintf("0]q%c(h%ch%ce", i, i-1, i-1)
	}
	if root, err = unpickle([]byte(dag + ".")); err != nil {
		t.Fatal(err)
	}
	budget = 10000 // as maxPickleJSON, sooner
	if _, err := pyJSON(root, 0, &budget); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("shared lists: %v", err)
	}
	// A view reaching past its storage.
	st := &torchStorage{typ: storageType{"FloatStorage", "F32", 4}, key: "0", numel: 6}
	if _, err := rebuildTensor(st, int64(1), pyTuple{int64(2), int64(3)}, pyTuple{int64(3), int64(1)}); err == nil {
		t.Error("view past its storage accepted")
	}
	if x, err := rebuildTensor(st, int64(0), pyTuple{int64(3), int64(2)}, pyTuple{int64(1), int64(3)}); err != nil {
		t.Error(err)
	} else if c := x.contiguous([]float32{0, 1, 2, 3, 4, 5}); !slices.Equal(c.Data, []float32{0, 3, 1, 4, 2, 5}) {
		t.Errorf("transposed view: %v", c.Data)
	}
}

// FuzzUnpickle runs the pickle machine on arbitrary bytes: no panic, no
// unbounded allocation.
func FuzzUnpickle(f *testing.F) {
	v, _ := sample()
	pkl, _, err := torchtest.Pickle(v)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pkl)
	f.Add([]byte("\x80\x02}q\x00(X\x01\x00\x00\x00a]q\x01h\x01au."))
	f.Add([]byte("\x80\x02ctorch._utils\n_rebuild_tensor_v2\n."))
	f.Fuzz(func(t *testing.T, b []byte) {
		root, err := unpickle(b)
		if err != nil {
			return
		}
		if rec, err := torchRecordOf(root); err == nil {
			for _, x := range rec.tensors {
				if x.storage.numel > maxTensorElems {
					t.Fatalf("storage of %d elements", x.storage.numel)
				}
			}
		}
	})
}

// FuzzReadTorch reads arbitrary bytes as a torch archive.
func FuzzReadTorch(f *testing.F) {
	v, _ := sample()
	pkl, st, err := torchtest.Pickle(v)
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	if err := torchtest.Archive(&b, "r", pkl, st); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ReadTorch(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for name, x := range w.Tensors {
			n := 1
			for _, d := range x.Shape {
				n *= d
			}
			if n != len(x.Data) {
				t.Fatalf("%s: shape %v, %d values", name, x.Shape, len(x.Data))
			}
		}
	})
}
