package gguf

import (
	"bytes"
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

// Bytes encodes the file.
func (w *Writer) Bytes() ([]byte, error) {
	var b bytes.Buffer
	le := binary.LittleEndian
	put := func(v any) { _ = binary.Write(&b, le, v) }
	putStr := func(s string) { put(uint64(len(s))); b.WriteString(s) }
	b.WriteString(Magic)
	put(uint32(3))
	put(uint64(len(w.tensors)))
	put(uint64(len(w.kvs)))
	var putVal func(v Value) error
	putVal = func(v Value) error {
		switch v.Type {
		case TypeString:
			putStr(v.V.(string))
			return nil
		case TypeArray:
			put(uint32(v.ElemType))
			switch a := v.V.(type) {
			case []string:
				put(uint64(len(a)))
				for _, s := range a {
					putStr(s)
				}
			case []bool:
				put(uint64(len(a)))
				for _, x := range a {
					if x {
						b.WriteByte(1)
					} else {
						b.WriteByte(0)
					}
				}
			case []Value:
				put(uint64(len(a)))
				for _, e := range a {
					if err := putVal(e); err != nil {
						return err
					}
				}
			default:
				n := binary.Size(a)
				if n < 0 {
					return fmt.Errorf("gguf: cannot encode %T", a)
				}
				put(uint64(n / v.ElemType.size()))
				put(a)
			}
			return nil
		case TypeBool:
			if v.V.(bool) {
				b.WriteByte(1)
			} else {
				b.WriteByte(0)
			}
			return nil
		}
		put(v.V)
		return nil
	}
	for _, kv := range w.kvs {
		putStr(kv.Key)
		put(uint32(kv.Value.Type))
		if err := putVal(kv.Value); err != nil {
			return nil, err
		}
	}
	align := w.Alignment
	if align == 0 {
		align = DefaultAlignment
	}
	off := uint64(0)
	for i, t := range w.tensors {
		putStr(t.Name)
		put(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			put(d)
		}
		put(uint32(t.Type))
		put(off)
		off += uint64(len(w.data[i]))
		off = (off + align - 1) / align * align
	}
	for b.Len()%int(align) != 0 {
		b.WriteByte(0)
	}
	for _, d := range w.data {
		b.Write(d)
		for b.Len()%int(align) != 0 {
			b.WriteByte(0)
		}
	}
	return b.Bytes(), nil
}
