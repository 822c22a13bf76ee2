package gguf

import (
	"encoding/binary"
	"fmt"
)

// Writer builds a small GGUF v3 file in memory. Metadata values are given
// as Go values: uint8, int8, uint16, int16, uint32, int32, float32, bool,
// string, uint64, int64, float64 or a slice of one of those.
type Writer struct {
	kvs       []KV
	tensors   []TensorInfo
	data      [][]byte
	Alignment uint64
}

// NewWriter returns an empty writer with the default alignment.
func NewWriter() *Writer { return &Writer{Alignment: DefaultAlignment} }

// AddKV appends a metadata entry.
func (w *Writer) AddKV(key string, v any) error {
	val, err := toValue(v)
	if err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	w.kvs = append(w.kvs, KV{Key: key, Value: val})
	return nil
}

// AddTensor appends a tensor with raw data already encoded as typ.
func (w *Writer) AddTensor(name string, typ TensorType, dims []uint64, data []byte) {
	w.tensors = append(w.tensors, TensorInfo{Name: name, Type: typ, Dims: append([]uint64(nil), dims...)})
	w.data = append(w.data, data)
}

// AddFloats quantises vals as typ and appends the tensor.
func (w *Writer) AddFloats(name string, typ TensorType, dims []uint64, vals []float32) error {
	b, err := Quantize(typ, vals)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	w.AddTensor(name, typ, dims, b)
	return nil
}

func toValue(v any) (Value, error) {
	switch x := v.(type) {
	case uint8:
		return Value{Type: TypeUint8, V: x}, nil
	case int8:
		return Value{Type: TypeInt8, V: x}, nil
	case uint16:
		return Value{Type: TypeUint16, V: x}, nil
	case int16:
		return Value{Type: TypeInt16, V: x}, nil
	case uint32:
		return Value{Type: TypeUint32, V: x}, nil
	case int32:
		return Value{Type: TypeInt32, V: x}, nil
	case float32:
		return Value{Type: TypeFloat32, V: x}, nil
	case bool:
		return Value{Type: TypeBool, V: x}, nil
	case string:
		return Value{Type: TypeString, V: x}, nil
	case uint64:
		return Value{Type: TypeUint64, V: x}, nil
	case int64:
		return Value{Type: TypeInt64, V: x}, nil
	case float64:
		return Value{Type: TypeFloat64, V: x}, nil
	case []uint8:
		return Value{Type: TypeArray, ElemType: TypeUint8, V: x}, nil
	case []int8:
		return Value{Type: TypeArray, ElemType: TypeInt8, V: x}, nil
	case []uint16:
		return Value{Type: TypeArray, ElemType: TypeUint16, V: x}, nil
	case []int16:
		return Value{Type: TypeArray, ElemType: TypeInt16, V: x}, nil
	case []uint32:
		return Value{Type: TypeArray, ElemType: TypeUint32, V: x}, nil
	case []int32:
		return Value{Type: TypeArray, ElemType: TypeInt32, V: x}, nil
	case []float32:
		return Value{Type: TypeArray, ElemType: TypeFloat32, V: x}, nil
	case []bool:
		return Value{Type: TypeArray, ElemType: TypeBool, V: x}, nil
	case []string:
		return Value{Type: TypeArray, ElemType: TypeString, V: x}, nil
	case []uint64:
		return Value{Type: TypeArray, ElemType: TypeUint64, V: x}, nil
	case []int64:
		return Value{Type: TypeArray, ElemType: TypeInt64, V: x}, nil
	case []float64:
		return Value{Type: TypeArray, ElemType: TypeFloat64, V: x}, nil
	case Value:
		return x, nil
	}
	return Value{}, fmt.Errorf("unsupported Go type %T", v)
}

// Bytes encodes the file. Tensor offsets follow from the lengths of the
// data given, so tensors of any type (even unsupported ones) can be written.
func (w *Writer) Bytes() ([]byte, error) {
	align := w.Alignment
	if align == 0 {
		align = DefaultAlignment
	}
	tensors := make([]TensorInfo, len(w.tensors))
	off := uint64(0)
	for i, t := range w.tensors {
		t.Offset = off
		tensors[i] = t
		off = padTo(off+uint64(len(w.data[i])), align)
	}
	b, err := appendHeader(nil, w.kvs, tensors, align)
	if err != nil {
		return nil, err
	}
	for _, d := range w.data {
		b = append(b, d...)
		b = append(b, make([]byte, padTo(uint64(len(b)), align)-uint64(len(b)))...)
	}
	return b, nil
}

// padTo rounds n up to a multiple of align.
func padTo(n, align uint64) uint64 { return (n + align - 1) / align * align }

// appendHeader appends the GGUF v3 header (magic, version, counts, metadata
// and tensor infos with their offsets) and the padding before the data.
func appendHeader(b []byte, kvs []KV, tensors []TensorInfo, align uint64) ([]byte, error) {
	le := binary.LittleEndian
	b = append(b, Magic...)
	b = le.AppendUint32(b, 3)
	b = le.AppendUint64(b, uint64(len(tensors)))
	b = le.AppendUint64(b, uint64(len(kvs)))
	var err error
	for _, kv := range kvs {
		b = appendString(b, kv.Key)
		b = le.AppendUint32(b, uint32(kv.Value.Type))
		if b, err = appendValue(b, kv.Value); err != nil {
			return nil, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	for _, t := range tensors {
		b = appendString(b, t.Name)
		b = le.AppendUint32(b, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint32(b, uint32(t.Type))
		b = le.AppendUint64(b, t.Offset)
	}
	return append(b, make([]byte, padTo(uint64(len(b)), align)-uint64(len(b)))...), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue appends one metadata value (without its type tag).
func appendValue(b []byte, v Value) ([]byte, error) {
	le := binary.LittleEndian
	switch x := v.V.(type) {
	case string:
		if v.Type == TypeString {
			return appendString(b, x), nil
		}
	case bool:
		if v.Type == TypeBool {
			return append(b, b2u8(x)), nil
		}
	case []string:
		b = le.AppendUint32(b, uint32(TypeString))
		b = le.AppendUint64(b, uint64(len(x)))
		for _, s := range x {
			b = appendString(b, s)
		}
		return b, nil
	case []bool:
		b = le.AppendUint32(b, uint32(TypeBool))
		b = le.AppendUint64(b, uint64(len(x)))
		for _, e := range x {
			b = append(b, b2u8(e))
		}
		return b, nil
	case []Value:
		b = le.AppendUint32(b, uint32(v.ElemType))
		b = le.AppendUint64(b, uint64(len(x)))
		var err error
		for _, e := range x {
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	if v.Type == TypeArray {
		n := binary.Size(v.V)
		sz := v.ElemType.size()
		if n < 0 || sz == 0 {
			return nil, fmt.Errorf("cannot encode %T as array of %s", v.V, v.ElemType)
		}
		b = le.AppendUint32(b, uint32(v.ElemType))
		b = le.AppendUint64(b, uint64(n/sz))
		return binary.Append(b, le, v.V)
	}
	if v.Type.size() == 0 || binary.Size(v.V) != v.Type.size() {
		return nil, fmt.Errorf("cannot encode %T as %s", v.V, v.Type)
	}
	return binary.Append(b, le, v.V)
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}
