package nn

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

func TestSafetensorsRoundTripAndDTypes(t *testing.T) {
	ts := map[string]Tensor{
		"a.weight": {Shape: []int{2, 3}, Data: []float32{1, -2, 3, 4.5, 0, -6}},
		"a.bias":   {Shape: []int{2}, Data: []float32{0.25, -1}},
	}
	var b bytes.Buffer
	if err := Write(&b, ts, map[string]string{"hidden_size": "3"}); err != nil {
		t.Fatal(err)
	}
	w, err := Read(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if w.Meta["hidden_size"] != "3" {
		t.Fatalf("metadata %v", w.Meta)
	}
	l, err := w.Linear("a", 3)
	if err != nil {
		t.Fatal(err)
	}
	y := l.Forward([]float32{1, 1, 1, 0, 1, 0}, 2, nil) // two rows
	if want := []float32{2.25, -2.5, -1.75, -1}; !equal(y, want) {
		t.Fatalf("linear: %v, want %v", y, want)
	}
	if _, err := w.Linear("a", 4); err == nil {
		t.Fatal("wrong input width accepted")
	}
	// Hand-built F16 and BF16 tensors: 1.5 and -2.
	hdr := []byte(`{"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]}}`)
	raw := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	raw = append(append(raw, hdr...), 0x00, 0x3e, 0x00, 0xc0)
	w, err = Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if w.Tensors["h"].Data[0] != 1.5 || w.Tensors["b"].Data[0] != -2 {
		t.Fatalf("F16 %v BF16 %v", w.Tensors["h"].Data, w.Tensors["b"].Data)
	}
	for _, bad := range [][]byte{raw[:10], append(binary.LittleEndian.AppendUint64(nil, 5), "{bad}"...), raw[:len(raw)-1]} {
		if _, err := Read(bytes.NewReader(bad)); err == nil {
			t.Fatalf("malformed file accepted: %q", bad)
		}
	}
}

func TestLayers(t *testing.T) {
	ln := LayerNorm{W: []float32{1, 1}, B: []float32{0, 1}, Eps: 0}
	y := ln.Forward([]float32{1, 3}, 1, nil)
	if !equal(y, []float32{-1, 2}) {
		t.Fatalf("layernorm %v", y)
	}
	g := []float32{0, 1, -1}
	GELU(g)
	if !equal(g, []float32{0, 0.8413447, -0.15865526}) {
		t.Fatalf("gelu %v", g)
	}
	if math.Abs(Sigmoid(0)-0.5) > 1e-12 {
		t.Fatal("sigmoid(0)")
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-5 {
			return false
		}
	}
	return true
}
