package gguf

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestEncoderMatchesWriter streams the same file through Encoder in
// odd-sized pieces and compares it byte for byte with Writer.Bytes.
func TestEncoderMatchesWriter(t *testing.T) {
	for _, align := range []uint64{32, 64} {
		w := NewWriter()
		w.Alignment = align
		if err := w.AddKV("general.alignment", uint32(align)); err != nil {
			t.Fatal(err)
		}
		if err := w.AddKV("nested", Value{Type: TypeArray, ElemType: TypeArray, V: []Value{{Type: TypeArray, ElemType: TypeUint8, V: []uint8{1}}}}); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, align))
		var data []byte
		for i, typ := range []TensorType{F32, Q4_K, Q8_0, F16, Q6_K, BF16, Q5_1} {
			x := make([]float32, QK*(i+1))
			for j := range x {
				x[j] = float32(rng.NormFloat64())
			}
			if err := w.AddFloats(typ.String(), typ, []uint64{QK, uint64(i + 1)}, x); err != nil {
				t.Fatal(err)
			}
			q, _ := Quantize(typ, x)
			data = append(data, q...)
		}
		want, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(want)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		e, err := NewEncoder(&got, f.KVs, f.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			n := min(len(data), 1+rng.IntN(700))
			if _, err := e.Write(data[:n]); err != nil {
				t.Fatal(err)
			}
			data = data[n:]
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("alignment %d: encoder output (%d bytes) differs from the writer's (%d bytes)", align, got.Len(), len(want))
		}
		if _, err := e.Write([]byte{0}); !errors.Is(err, ErrFormat) {
			t.Fatalf("write past the last tensor: %v", err)
		}
	}
}

// TestEncoderChecks covers the encoder's refusals.
func TestEncoderChecks(t *testing.T) {
	var b bytes.Buffer
	if _, err := NewEncoder(&b, nil, []TensorInfo{{Name: "x", Type: IQ4_NL, Dims: []uint64{32}}}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unsupported type: %v", err)
	}
	if _, err := NewEncoder(&b, nil, []TensorInfo{{Name: "x", Type: Q4_K, Dims: []uint64{32}}}); !errors.Is(err, ErrFormat) {
		t.Errorf("partial block: %v", err)
	}
	if _, err := NewEncoder(&b, []KV{{Key: "general.alignment", Value: Value{Type: TypeUint32, V: uint32(3)}}}, nil); !errors.Is(err, ErrFormat) {
		t.Errorf("bad alignment: %v", err)
	}
	e, err := NewEncoder(&b, nil, []TensorInfo{{Name: "x", Type: F32, Dims: []uint64{4}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); !errors.Is(err, ErrFormat) {
		t.Errorf("incomplete data: %v", err)
	}
}
