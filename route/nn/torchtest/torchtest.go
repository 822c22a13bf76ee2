// Package torchtest writes files in the format torch.save writes, built
// from the format's specification for tests of readers: a zip archive
// whose folder <name> holds data.pkl (a pickle, protocol 2, as Python's
// pickler writes it: memoised globals and containers, MARK-batched
// items), data/<key> (each storage's little-endian elements), byteorder
// and version. Tensors pickle as torch._utils._rebuild_tensor_v2 over a
// persistent id ('storage', torch.<Type>Storage, key, 'cpu', numel).
package torchtest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// Pair is one dict entry.
type Pair struct {
	// Key and Value are the entry.
	Key   string
	Value any
}

// Dict is a Python dict, entries in order.
type Dict []Pair

// OrderedDict is a collections.OrderedDict. With Metadata it carries a
// _metadata attribute, as a state dict does (set by BUILD).
type OrderedDict struct {
	// Items are the entries, in order.
	Items []Pair
	// Metadata adds the _metadata attribute.
	Metadata bool
}

// List is a Python list.
type List []any

// Tuple is a Python tuple.
type Tuple []any

// Global is a module-level name used as a value (GLOBAL).
type Global struct {
	// Module and Name spell it: "os", "system".
	Module, Name string
}

// Call is Func(*Args) (REDUCE).
type Call struct {
	// Func is the callable; Args its arguments.
	Func Global
	Args Tuple
}

// DType is a torch dtype value such as torch.float32 ("float32").
type DType string

// Tensor is a tensor of logical row-major values Data of shape Shape.
type Tensor struct {
	// Shape and Data are the logical tensor.
	Shape []int
	Data  []float32
	// Storage is the storage class: FloatStorage (default), HalfStorage,
	// BFloat16Storage, DoubleStorage or LongStorage. Half and BFloat16
	// values must be exact in that type.
	Storage string
	// Transposed stores a 2-D tensor's transpose, the view striding
	// (1, rows) over it.
	Transposed bool
	// Offset puts this many zero elements before the view in its storage.
	Offset int
	// Parameter wraps it in torch._utils._rebuild_parameter.
	Parameter bool
}

// Pickle opcodes written.
const (
	opMark, opStop, opBinInt, opBinInt1, opBinInt2, opNone = '(', '.', 'J', 'K', 'M', 'N'
	opBinPersID, opReduce, opBinUnicode, opEmptyList       = 'Q', 'R', 'X', ']'
	opAppend, opBuild, opGlobal, opEmptyDict, opAppends    = 'a', 'b', 'c', '}', 'e'
	opBinGet, opBinPut, opLongBinPut, opSetItems           = 'h', 'q', 'r', 'u'
	opTuple, opEmptyTuple, opBinFloat, opProto             = 't', ')', 'G', 0x80
	opTuple1, opNewTrue, opNewFalse, opLong1               = 0x85, 0x88, 0x89, 0x8a
)

// pickler is the encoder's state.
type pickler struct {
	b        bytes.Buffer
	memo     int
	globals  map[string]int
	storages map[string][]byte
}

// Pickle encodes v as a protocol 2 pickle. Each tensor gets its own
// storage, keys "0", "1", ..., returned as raw bytes.
func Pickle(v any) (pkl []byte, storages map[string][]byte, err error) {
	p := &pickler{globals: map[string]int{}, storages: map[string][]byte{}}
	p.b.Write([]byte{opProto, 2})
	if err := p.save(v); err != nil {
		return nil, nil, err
	}
	p.b.WriteByte(opStop)
	return p.b.Bytes(), p.storages, nil
}

// Archive writes the zip archive: folder name holding the pickle, the
// storages, byteorder and version.
func Archive(w io.Writer, name string, pkl []byte, storages map[string][]byte) error {
	z := zip.NewWriter(w)
	put := func(entry string, b []byte) error {
		f, err := z.CreateHeader(&zip.FileHeader{Name: name + "/" + entry, Method: zip.Store})
		if err == nil {
			_, err = f.Write(b)
		}
		return err
	}
	if err := put("data.pkl", pkl); err != nil {
		return err
	}
	if err := put("byteorder", []byte("little")); err != nil {
		return err
	}
	for i := range len(storages) {
		key := strconv.Itoa(i)
		if err := put("data/"+key, storages[key]); err != nil {
			return err
		}
	}
	if err := put("version", []byte("3\n")); err != nil {
		return err
	}
	return z.Close()
}

// Write writes v to path as torch.save would, the folder named "router".
func Write(path string, v any) error {
	pkl, st, err := Pickle(v)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := Archive(&b, "router", pkl, st); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// R2R is the dict R2R's save_model saves: model_type, init_args,
// common_args (threshold, a float or nil, and the input types),
// model_specific_args and the state dict.
func R2R(modelType string, initArgs Dict, threshold any, state []Pair) Dict {
	return Dict{
		{"model_type", modelType},
		{"init_args", initArgs},
		{"common_args", Dict{{"threshold", threshold}, {"input_type", List{"hidden_states", "token", "logits"}}}},
		{"model_specific_args", Dict{}},
		{"state_dict", OrderedDict{Items: state, Metadata: true}},
	}
}

// put memoises the value just written.
func (p *pickler) put() {
	if p.memo < 256 {
		p.b.Write([]byte{opBinPut, byte(p.memo)})
	} else {
		p.b.WriteByte(opLongBinPut)
		p.b.Write(binary.LittleEndian.AppendUint32(nil, uint32(p.memo)))
	}
	p.memo++
}

// global writes module.name, once; later uses fetch it from the memo.
func (p *pickler) global(module, name string) {
	key := module + "\n" + name + "\n"
	if i, ok := p.globals[key]; ok && i < 256 {
		p.b.Write([]byte{opBinGet, byte(i)})
		return
	}
	p.b.WriteByte(opGlobal)
	p.b.WriteString(key)
	p.globals[key] = p.memo
	p.put()
}

// save writes one value.
func (p *pickler) save(v any) error {
	switch v := v.(type) {
	case nil:
		p.b.WriteByte(opNone)
	case bool:
		if v {
			p.b.WriteByte(opNewTrue)
		} else {
			p.b.WriteByte(opNewFalse)
		}
	case int:
		p.int(int64(v))
	case float64:
		p.b.WriteByte(opBinFloat)
		p.b.Write(binary.BigEndian.AppendUint64(nil, math.Float64bits(v)))
	case string:
		p.b.WriteByte(opBinUnicode)
		p.b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(v))))
		p.b.WriteString(v)
		p.put()
	case Global:
		p.global(v.Module, v.Name)
	case DType:
		p.global("torch", string(v))
	case Call:
		p.global(v.Func.Module, v.Func.Name)
		if err := p.save(v.Args); err != nil {
			return err
		}
		p.b.WriteByte(opReduce)
		p.put()
	case Tuple:
		return p.tuple(v)
	case List:
		return p.list(v)
	case Dict:
		p.b.WriteByte(opEmptyDict)
		p.put()
		return p.items(v)
	case OrderedDict:
		return p.orderedDict(v)
	case *Tensor:
		return p.tensor(v)
	default:
		return fmt.Errorf("torchtest: cannot pickle %T", v)
	}
	return nil
}

// int writes the smallest integer opcode that holds n.
func (p *pickler) int(n int64) {
	switch {
	case n >= 0 && n < 1<<8:
		p.b.Write([]byte{opBinInt1, byte(n)})
	case n >= 0 && n < 1<<16:
		p.b.WriteByte(opBinInt2)
		p.b.Write(binary.LittleEndian.AppendUint16(nil, uint16(n)))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		p.b.WriteByte(opBinInt)
		p.b.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(n))))
	default:
		p.b.Write([]byte{opLong1, 8})
		p.b.Write(binary.LittleEndian.AppendUint64(nil, uint64(n)))
	}
}

// tuple writes EMPTY_TUPLE, TUPLE1..3 or MARK ... TUPLE.
func (p *pickler) tuple(t Tuple) error {
	if len(t) == 0 {
		p.b.WriteByte(opEmptyTuple)
		return nil
	}
	if len(t) > 3 {
		p.b.WriteByte(opMark)
	}
	for _, x := range t {
		if err := p.save(x); err != nil {
			return err
		}
	}
	if len(t) > 3 {
		p.b.WriteByte(opTuple)
	} else {
		p.b.WriteByte(opTuple1 + byte(len(t)-1))
	}
	p.put()
	return nil
}

// list writes EMPTY_LIST, then APPEND or MARK ... APPENDS.
func (p *pickler) list(l List) error {
	p.b.WriteByte(opEmptyList)
	p.put()
	if len(l) == 1 {
		if err := p.save(l[0]); err != nil {
			return err
		}
		p.b.WriteByte(opAppend)
		return nil
	}
	if len(l) > 1 {
		p.b.WriteByte(opMark)
		for _, x := range l {
			if err := p.save(x); err != nil {
				return err
			}
		}
		p.b.WriteByte(opAppends)
	}
	return nil
}

// items writes dict entries in MARK ... SETITEMS batches of 1000.
func (p *pickler) items(ps []Pair) error {
	for lo := 0; lo < len(ps); lo += 1000 {
		p.b.WriteByte(opMark)
		for _, kv := range ps[lo:min(lo+1000, len(ps))] {
			if err := p.save(kv.Key); err != nil {
				return err
			}
			if err := p.save(kv.Value); err != nil {
				return err
			}
		}
		p.b.WriteByte(opSetItems)
	}
	return nil
}

// orderedDict writes OrderedDict() by REDUCE, its items, and with
// Metadata a state by BUILD: {"_metadata": OrderedDict({"": {"version":
// 1}})}.
func (p *pickler) orderedDict(d OrderedDict) error {
	p.global("collections", "OrderedDict")
	p.b.WriteByte(opEmptyTuple)
	p.b.WriteByte(opReduce)
	p.put()
	if err := p.items(d.Items); err != nil {
		return err
	}
	if d.Metadata {
		meta := OrderedDict{Items: []Pair{{"", Dict{{"version", 1}}}}}
		if err := p.save(Dict{{"_metadata", meta}}); err != nil {
			return err
		}
		p.b.WriteByte(opBuild)
	}
	return nil
}

// tensor writes _rebuild_tensor_v2((storage pid), offset, size, stride,
// False, OrderedDict()) and the storage's bytes.
func (p *pickler) tensor(t *Tensor) error {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	if n != len(t.Data) || t.Transposed && len(t.Shape) != 2 {
		return fmt.Errorf("torchtest: tensor of shape %v with %d values (transposed %v)", t.Shape, len(t.Data), t.Transposed)
	}
	typ := t.Storage
	if typ == "" {
		typ = "FloatStorage"
	}
	st, err := encode(typ, t)
	if err != nil {
		return err
	}
	key := strconv.Itoa(len(p.storages))
	p.storages[key] = st
	stride := make(Tuple, len(t.Shape))
	for i, s := len(t.Shape)-1, 1; i >= 0; i-- {
		stride[i], s = s, s*t.Shape[i]
	}
	if t.Transposed {
		stride = Tuple{1, t.Shape[0]}
	}
	size := make(Tuple, len(t.Shape))
	for i, d := range t.Shape {
		size[i] = d
	}
	if t.Parameter {
		p.global("torch._utils", "_rebuild_parameter")
	}
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.b.WriteByte(opMark)
	if err := p.save(Tuple{"storage", Global{"torch", typ}, key, "cpu", t.Offset + n}); err != nil {
		return err
	}
	p.b.WriteByte(opBinPersID)
	for _, x := range []any{t.Offset, size, stride, false, OrderedDict{}} {
		if err := p.save(x); err != nil {
			return err
		}
	}
	p.b.Write([]byte{opTuple, opReduce})
	p.put()
	if t.Parameter {
		if err := p.save(true); err != nil {
			return err
		}
		if err := p.save(OrderedDict{}); err != nil {
			return err
		}
		p.b.Write([]byte{opTuple1 + 2, opReduce})
		p.put()
	}
	return nil
}

// encode lays out a tensor's storage: Offset zeros, then the values in
// row-major order (of the transpose when Transposed).
func encode(typ string, t *Tensor) ([]byte, error) {
	vals := make([]float32, t.Offset, t.Offset+len(t.Data))
	if t.Transposed {
		r, c := t.Shape[0], t.Shape[1]
		for j := range c {
			for i := range r {
				vals = append(vals, t.Data[i*c+j])
			}
		}
	} else {
		vals = append(vals, t.Data...)
	}
	var out []byte
	for _, v := range vals {
		bits := math.Float32bits(v)
		switch typ {
		case "FloatStorage":
			out = binary.LittleEndian.AppendUint32(out, bits)
		case "LongStorage":
			out = binary.LittleEndian.AppendUint64(out, uint64(int64(v)))
		case "DoubleStorage":
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(float64(v)))
		case "BFloat16Storage":
			if bits&0xffff != 0 {
				return nil, fmt.Errorf("torchtest: %v is not a bfloat16 value", v)
			}
			out = binary.LittleEndian.AppendUint16(out, uint16(bits>>16))
		case "HalfStorage":
			h, err := half(v)
			if err != nil {
				return nil, err
			}
			out = binary.LittleEndian.AppendUint16(out, h)
		default:
			return nil, fmt.Errorf("torchtest: storage type %s", typ)
		}
	}
	return out, nil
}

// half encodes v as IEEE binary16; v must be exact in it.
func half(v float32) (uint16, error) {
	bits := math.Float32bits(v)
	sign := uint16(bits>>16) & 0x8000
	if v == 0 {
		return sign, nil
	}
	exp, mant := int(bits>>23&0xff)-127, bits&0x7fffff
	switch {
	case exp >= -14 && exp <= 15 && mant&0x1fff == 0:
		return sign | uint16(exp+15)<<10 | uint16(mant>>13), nil
	case exp < -14:
		m := math.Abs(float64(v)) * (1 << 24) // subnormal: m × 2^-24
		if m == math.Trunc(m) && m < 1024 {
			return sign | uint16(m), nil
		}
	}
	return 0, fmt.Errorf("torchtest: %v is not a float16 value", v)
}
