package nn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// The restricted pickle machine behind ReadTorch. It runs the opcodes a
// torch.save of a state dict produces (pickle protocol 2, plus the few
// protocol 4 ones newer picklers use), builds plain values, and calls only
// a whitelist of globals: collections.OrderedDict, torch's tensor and
// parameter rebuilders, torch's storage types (as persistent ids) and
// dtypes. Every count is bounded; nothing outside the whitelist runs.

// Bounds of one pickle.
const (
	maxPickleBytes = 16 << 20 // data.pkl
	maxPickleStack = 1 << 16  // values on the stack
	maxPickleMarks = 256      // open MARKs: the nesting depth of literals
	maxPickleItems = 1 << 20  // container elements and memo entries in all
	maxPickleDepth = 32       // nesting when values are converted (JSON)
	maxPickleJSON  = 1 << 20  // values and string bytes converted (JSON), in all
	maxPickleKey   = 4096     // bytes of a string dict key
	maxTensorDims  = 8
	maxTensorElems = 1 << 30 // elements of one tensor or storage
)

// Pickle opcodes (Python's pickletools names).
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opNone           = 'N'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opBinUnicode     = 'X'
	opEmptyList      = ']'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opList           = 'l'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'
	opProto          = 0x80
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opShortUnicode   = 0x8c
	opBinUnicode8    = 0x8d
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
	maxPickleProto   = 5
	maxGlobalNameLen = 256
)

// pyTuple is a Python tuple.
type pyTuple []any

// pyList is a Python list (shared by reference, as APPEND mutates it).
type pyList struct{ items []any }

// pyDict is a Python dict or OrderedDict: keys in insertion order.
type pyDict struct {
	keys, vals []any
	index      map[any]int
}

// set stores v under k (a str, int, float, bool or None key).
func (d *pyDict) set(k, v any) error {
	switch k := k.(type) {
	case string:
		if len(k) > maxPickleKey {
			return fmt.Errorf("dict key of %d bytes, at most %d", len(k), maxPickleKey)
		}
	case int64, float64, bool, nil:
	default:
		return fmt.Errorf("dict key of type %s", describe(k))
	}
	if d.index == nil {
		d.index = map[any]int{}
	}
	if i, ok := d.index[k]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[k] = len(d.keys)
	d.keys, d.vals = append(d.keys, k), append(d.vals, v)
	return nil
}

// get returns the value under the string key k.
func (d *pyDict) get(k string) (any, bool) {
	i, ok := d.index[k]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// pyCallable is a whitelisted global that REDUCE may call.
type pyCallable int

const (
	callOrderedDict pyCallable = iota + 1
	callRebuildTensorV2
	callRebuildTensor
	callRebuildParameter
)

// storageType is one of torch's typed storage classes (torch.FloatStorage).
type storageType struct {
	name  string // "FloatStorage"
	dtype string // "F32", "F16", "BF16", "F64"; "" for non-float types
	size  int64  // bytes per element
}

// torchDType is a torch dtype used as a value (torch.float32).
type torchDType string

// torchStorage is a storage a persistent id names: its data is the
// archive's data/<key> entry.
type torchStorage struct {
	typ   storageType
	key   string
	numel int64
}

// torchTensor is a strided view of a storage.
type torchTensor struct {
	storage      *torchStorage
	offset       int64
	size, stride []int64
}

// pickleGlobal resolves GLOBAL module.name against the whitelist.
func pickleGlobal(module, name string) (any, error) {
	switch module + "." + name {
	case "collections.OrderedDict":
		return callOrderedDict, nil
	case "torch._utils._rebuild_tensor_v2":
		return callRebuildTensorV2, nil
	case "torch._utils._rebuild_tensor":
		return callRebuildTensor, nil
	case "torch._utils._rebuild_parameter":
		return callRebuildParameter, nil
	}
	if module == "torch" {
		if st, ok := storageTypeNamed(name); ok {
			return st, nil
		}
		switch name {
		case "float32", "float":
			return torchDType("float32"), nil
		case "float16", "half":
			return torchDType("float16"), nil
		case "bfloat16":
			return torchDType("bfloat16"), nil
		case "float64", "double":
			return torchDType("float64"), nil
		}
	}
	return nil, fmt.Errorf("global %s.%s is not allowed: a router file holds tensors, OrderedDicts, dtypes and plain values only", module, name)
}

// storageTypeNamed returns torch's storage class name.
func storageTypeNamed(name string) (storageType, bool) {
	for _, st := range []storageType{
		{"FloatStorage", "F32", 4}, {"HalfStorage", "F16", 2}, {"BFloat16Storage", "BF16", 2}, {"DoubleStorage", "F64", 8},
		{"LongStorage", "", 8}, {"IntStorage", "", 4}, {"ShortStorage", "", 2}, {"CharStorage", "", 1},
		{"ByteStorage", "", 1}, {"BoolStorage", "", 1},
	} {
		if st.name == name {
			return st, true
		}
	}
	return storageType{}, false
}

// describe names a pickled value's type for error messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		return "dict"
	case pyCallable:
		return "function"
	case storageType:
		return "torch." + v.name
	case torchDType:
		return "torch." + string(v)
	case *torchStorage:
		return "storage"
	case *torchTensor:
		return "tensor"
	}
	return fmt.Sprintf("%T", v)
}

// unpickler is the machine's state.
type unpickler struct {
	data     []byte
	pos      int
	stack    []any
	marks    []int
	memo     map[uint32]any
	items    int
	storages map[string]*torchStorage
}

// unpickle runs a pickle and returns its value.
func unpickle(data []byte) (any, error) {
	if len(data) > maxPickleBytes {
		return nil, fmt.Errorf("pickle of %d bytes exceeds %d", len(data), maxPickleBytes)
	}
	u := &unpickler{data: data, memo: map[uint32]any{}, storages: map[string]*torchStorage{}}
	for u.pos < len(u.data) {
		at, op := u.pos, u.data[u.pos]
		u.pos++
		if op == opStop {
			if len(u.stack) != 1 || len(u.marks) != 0 {
				return nil, fmt.Errorf("pickle offset %d: STOP with %d values and %d marks on the stack", at, len(u.stack), len(u.marks))
			}
			return u.stack[0], nil
		}
		if err := u.step(op); err != nil {
			return nil, fmt.Errorf("pickle offset %d (opcode 0x%02x): %w", at, op, err)
		}
		if len(u.stack) > maxPickleStack {
			return nil, fmt.Errorf("pickle offset %d: stack exceeds %d values", at, maxPickleStack)
		}
	}
	return nil, errors.New("pickle ends without STOP (truncated)")
}

// step runs one opcode.
func (u *unpickler) step(op byte) error {
	for _, group := range [...]func(*unpickler, byte) (bool, error){(*unpickler).scalar, (*unpickler).container, (*unpickler).memoOp, (*unpickler).call} {
		if ok, err := group(u, op); ok || err != nil {
			return err
		}
	}
	return errors.New("unsupported opcode")
}

// take consumes n bytes.
func (u *unpickler) take(n uint64) ([]byte, error) {
	if n > uint64(len(u.data)-u.pos) {
		return nil, fmt.Errorf("needs %d bytes, %d left (truncated)", n, len(u.data)-u.pos)
	}
	b := u.data[u.pos : u.pos+int(n)]
	u.pos += int(n)
	return b, nil
}

// uint reads an n-byte little-endian unsigned integer.
func (u *unpickler) uint(n int) (uint64, error) {
	b, err := u.take(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

// scalar runs the opcodes that push one plain value.
func (u *unpickler) scalar(op byte) (bool, error) {
	var v any
	var err error
	switch op {
	case opProto:
		var p uint64
		if p, err = u.uint(1); err == nil && p > maxPickleProto {
			err = fmt.Errorf("pickle protocol %d", p)
		}
		return true, err
	case opFrame:
		_, err = u.uint(8)
		return true, err
	case opNone:
	case opNewTrue, opNewFalse:
		v = op == opNewTrue
	case opBinInt:
		var n uint64
		n, err = u.uint(4)
		v = int64(int32(uint32(n)))
	case opBinInt1:
		var n uint64
		n, err = u.uint(1)
		v = int64(n)
	case opBinInt2:
		var n uint64
		n, err = u.uint(2)
		v = int64(n)
	case opLong1:
		v, err = u.long(1)
	case opLong4:
		v, err = u.long(4)
	case opBinFloat:
		var b []byte
		if b, err = u.take(8); err == nil {
			v = math.Float64frombits(binary.BigEndian.Uint64(b))
		}
	case opShortUnicode:
		v, err = u.unicode(1)
	case opBinUnicode:
		v, err = u.unicode(4)
	case opBinUnicode8:
		v, err = u.unicode(8)
	case opGlobal, opStackGlobal:
		v, err = u.global(op)
	default:
		return false, nil
	}
	if err == nil {
		u.push(v)
	}
	return true, err
}

// long reads LONG1 or LONG4: a length, then a little-endian two's
// complement integer, which must fit 64 bits.
func (u *unpickler) long(lenBytes int) (any, error) {
	n, err := u.uint(lenBytes)
	if err != nil {
		return nil, err
	}
	if n > 8 {
		return nil, fmt.Errorf("integer of %d bytes does not fit 64 bits", n)
	}
	b, err := u.take(n)
	if err != nil || n == 0 {
		return int64(0), err
	}
	var v uint64
	for i := int(n) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	if shift := 64 - 8*n; shift > 0 {
		return int64(v<<shift) >> shift, nil // sign-extend
	}
	return int64(v), nil
}

// unicode reads a length-prefixed UTF-8 string.
func (u *unpickler) unicode(lenBytes int) (any, error) {
	n, err := u.uint(lenBytes)
	if err != nil {
		return nil, err
	}
	b, err := u.take(n)
	return string(b), err
}

// global reads GLOBAL (two text lines) or STACK_GLOBAL (two strings on
// the stack) and resolves the name.
func (u *unpickler) global(op byte) (any, error) {
	var module, name string
	if op == opStackGlobal {
		nv, err := u.pop()
		if err != nil {
			return nil, err
		}
		mv, err := u.pop()
		if err != nil {
			return nil, err
		}
		var ok1, ok2 bool
		module, ok1 = mv.(string)
		name, ok2 = nv.(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("STACK_GLOBAL of %s and %s", describe(mv), describe(nv))
		}
	} else {
		var err error
		if module, err = u.line(); err == nil {
			name, err = u.line()
		}
		if err != nil {
			return nil, err
		}
	}
	return pickleGlobal(module, name)
}

// line reads a newline-terminated name.
func (u *unpickler) line() (string, error) {
	rest := u.data[u.pos:]
	i := bytes.IndexByte(rest[:min(len(rest), maxGlobalNameLen+1)], '\n')
	if i < 0 {
		return "", fmt.Errorf("global name longer than %d bytes or truncated", maxGlobalNameLen)
	}
	u.pos += i + 1
	return string(rest[:i]), nil
}

// push adds a value.
func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

// pop removes the top value, which must lie above the innermost mark.
func (u *unpickler) pop() (any, error) {
	floor := 0
	if len(u.marks) > 0 {
		floor = u.marks[len(u.marks)-1]
	}
	if len(u.stack) <= floor {
		return nil, errors.New("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

// top returns the top value without removing it.
func (u *unpickler) top() (any, error) {
	v, err := u.pop()
	if err == nil {
		u.push(v)
	}
	return v, err
}

// popMark removes and returns the values above the innermost mark.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, errors.New("no MARK")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	vs := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return vs, nil
}

// count charges n elements against the item bound.
func (u *unpickler) count(n int) error {
	if u.items += n; u.items > maxPickleItems {
		return fmt.Errorf("more than %d container elements and memo entries", maxPickleItems)
	}
	return nil
}

// container runs the opcodes that build tuples, lists and dicts.
func (u *unpickler) container(op byte) (bool, error) {
	switch op {
	case opMark:
		if len(u.marks) >= maxPickleMarks {
			return true, fmt.Errorf("more than %d nested MARKs", maxPickleMarks)
		}
		u.marks = append(u.marks, len(u.stack))
	case opEmptyTuple:
		u.push(pyTuple{})
	case opEmptyList:
		u.push(&pyList{})
	case opEmptyDict:
		u.push(&pyDict{})
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		t := make(pyTuple, n)
		for i := n - 1; i >= 0; i-- {
			v, err := u.pop()
			if err != nil {
				return true, err
			}
			t[i] = v
		}
		u.push(t)
		return true, u.count(n)
	case opTuple, opList, opDict, opAppends, opSetItems, opPopMark:
		vs, err := u.popMark()
		if err != nil {
			return true, err
		}
		return true, u.fromMark(op, vs)
	case opAppend, opSetItem:
		n, many := 1, byte(opAppends)
		if op == opSetItem {
			n, many = 2, opSetItems
		}
		vs := make([]any, n)
		for i := n - 1; i >= 0; i-- {
			v, err := u.pop()
			if err != nil {
				return true, err
			}
			vs[i] = v
		}
		return true, u.fromMark(many, vs)
	case opPop:
		_, err := u.pop()
		return true, err
	case opDup:
		v, err := u.top()
		if err == nil {
			u.push(v)
		}
		return true, err
	default:
		return false, nil
	}
	return true, nil
}

// fromMark builds or extends a container from the values vs.
func (u *unpickler) fromMark(op byte, vs []any) error {
	if err := u.count(len(vs)); err != nil {
		return err
	}
	switch op {
	case opTuple:
		u.push(pyTuple(vs))
	case opList:
		u.push(&pyList{items: vs})
	case opDict:
		d := &pyDict{}
		u.push(d)
		return setPairs(d, vs)
	case opAppends:
		t, err := u.top()
		if err != nil {
			return err
		}
		l, ok := t.(*pyList)
		if !ok {
			return fmt.Errorf("APPEND to a %s", describe(t))
		}
		l.items = append(l.items, vs...)
	case opSetItems:
		t, err := u.top()
		if err != nil {
			return err
		}
		d, ok := t.(*pyDict)
		if !ok {
			return fmt.Errorf("SETITEM on a %s", describe(t))
		}
		return setPairs(d, vs)
	}
	return nil // POP_MARK
}

// setPairs stores alternating keys and values.
func setPairs(d *pyDict, vs []any) error {
	if len(vs)%2 != 0 {
		return fmt.Errorf("odd number (%d) of dict keys and values", len(vs))
	}
	for i := 0; i < len(vs); i += 2 {
		if err := d.set(vs[i], vs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// memoOp runs the memo opcodes.
func (u *unpickler) memoOp(op byte) (bool, error) {
	var idx uint64
	var err error
	switch op {
	case opBinPut, opBinGet:
		idx, err = u.uint(1)
	case opLongBinPut, opLongBinGet:
		idx, err = u.uint(4)
	case opMemoize:
		idx = uint64(len(u.memo))
	default:
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if op == opBinGet || op == opLongBinGet {
		v, ok := u.memo[uint32(idx)]
		if !ok {
			return true, fmt.Errorf("memo %d unset", idx)
		}
		u.push(v)
		return true, nil
	}
	v, err := u.top()
	if err != nil {
		return true, err
	}
	if _, ok := u.memo[uint32(idx)]; !ok {
		if err := u.count(1); err != nil {
			return true, err
		}
	}
	u.memo[uint32(idx)] = v
	return true, nil
}

// call runs REDUCE, BUILD and BINPERSID.
func (u *unpickler) call(op byte) (bool, error) {
	switch op {
	case opReduce, opBuild:
		arg, err := u.pop()
		if err != nil {
			return true, err
		}
		f, err := u.pop()
		if err != nil {
			return true, err
		}
		if op == opBuild {
			// Only an OrderedDict's attributes (a state dict's _metadata):
			// they carry nothing a router needs.
			if _, ok := f.(*pyDict); !ok {
				return true, fmt.Errorf("BUILD on a %s", describe(f))
			}
			if _, ok := arg.(*pyDict); !ok && arg != nil {
				return true, fmt.Errorf("BUILD with a %s state", describe(arg))
			}
			u.push(f)
			return true, nil
		}
		v, err := u.reduce(f, arg)
		if err == nil {
			u.push(v)
		}
		return true, err
	case opBinPersID:
		pid, err := u.pop()
		if err != nil {
			return true, err
		}
		s, err := u.persistent(pid)
		if err == nil {
			u.push(s)
		}
		return true, err
	}
	return false, nil
}

// reduce calls a whitelisted callable.
func (u *unpickler) reduce(f, arg any) (any, error) {
	c, ok := f.(pyCallable)
	if !ok {
		return nil, fmt.Errorf("calls a %s, which is not callable here", describe(f))
	}
	args, ok := arg.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("call with a %s for arguments", describe(arg))
	}
	switch c {
	case callOrderedDict:
		if len(args) != 0 {
			return nil, fmt.Errorf("OrderedDict with %d arguments", len(args))
		}
		return &pyDict{}, nil
	case callRebuildParameter:
		if len(args) != 3 && len(args) != 4 {
			return nil, fmt.Errorf("_rebuild_parameter with %d arguments", len(args))
		}
		if _, ok := args[0].(*torchTensor); !ok {
			return nil, fmt.Errorf("_rebuild_parameter of a %s", describe(args[0]))
		}
		return args[0], nil
	case callRebuildTensor:
		if len(args) != 4 {
			return nil, fmt.Errorf("_rebuild_tensor with %d arguments", len(args))
		}
	default: // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])
		if len(args) != 6 && len(args) != 7 {
			return nil, fmt.Errorf("_rebuild_tensor_v2 with %d arguments", len(args))
		}
	}
	return rebuildTensor(args[0], args[1], args[2], args[3])
}

// rebuildTensor checks a strided view against its storage.
func rebuildTensor(st, off, size, stride any) (*torchTensor, error) {
	s, ok := st.(*torchStorage)
	if !ok {
		return nil, fmt.Errorf("tensor over a %s, not a storage", describe(st))
	}
	t := &torchTensor{storage: s}
	o, ok := off.(int64)
	if !ok || o < 0 || o > s.numel {
		return nil, fmt.Errorf("tensor offset %v outside its storage of %d elements", off, s.numel)
	}
	t.offset = o
	var err error
	if t.size, err = dims(size, "size"); err != nil {
		return nil, err
	}
	if t.stride, err = dims(stride, "stride"); err != nil {
		return nil, err
	}
	if len(t.size) != len(t.stride) {
		return nil, fmt.Errorf("tensor size %v and stride %v differ in rank", t.size, t.stride)
	}
	count, last := int64(1), t.offset
	for i, n := range t.size {
		if count *= n; count > maxTensorElems {
			return nil, fmt.Errorf("tensor size %v exceeds %d elements", t.size, maxTensorElems)
		}
		if n > 0 && t.stride[i] > s.numel {
			return nil, fmt.Errorf("tensor stride %v outside its storage of %d elements", t.stride, s.numel)
		}
		if n > 0 {
			last += (n - 1) * t.stride[i]
		}
	}
	if count > 0 && last >= s.numel {
		return nil, fmt.Errorf("tensor (offset %d, size %v, stride %v) reaches past its storage of %d elements", t.offset, t.size, t.stride, s.numel)
	}
	return t, nil
}

// dims reads a tuple of non-negative integers (a size or stride).
func dims(v any, what string) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok || len(t) > maxTensorDims {
		return nil, fmt.Errorf("tensor %s is a %s of %d, want a tuple of at most %d integers", what, describe(v), len(t), maxTensorDims)
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 || n > maxTensorElems {
			return nil, fmt.Errorf("tensor %s %v: element %d out of range", what, []any(t), i)
		}
		out[i] = n
	}
	return out, nil
}

// persistent resolves a persistent id ('storage', type, key, location,
// numel) to a storage, the same one for the same key.
func (u *unpickler) persistent(pid any) (*torchStorage, error) {
	t, ok := pid.(pyTuple)
	if !ok || len(t) != 5 || t[0] != "storage" {
		return nil, fmt.Errorf("persistent id %s, want ('storage', type, key, location, numel)", describe(pid))
	}
	typ, ok1 := t[1].(storageType)
	key, ok2 := t[2].(string)
	_, ok3 := t[3].(string)
	numel, ok4 := t[4].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, fmt.Errorf("persistent id ('storage', %s, %s, %s, %s), want a storage type, a key, a location and a count",
			describe(t[1]), describe(t[2]), describe(t[3]), describe(t[4]))
	}
	if key == "" || len(key) > 64 || strings.ContainsAny(key, "/\\") {
		return nil, fmt.Errorf("storage key %q", key)
	}
	if numel < 0 || numel > maxTensorElems {
		return nil, fmt.Errorf("storage %s of %d elements", key, numel)
	}
	if s, ok := u.storages[key]; ok {
		if s.typ != typ || s.numel != numel {
			return nil, fmt.Errorf("storage %s named twice, as %s of %d and %s of %d", key, s.typ.name, s.numel, typ.name, numel)
		}
		return s, nil
	}
	if len(u.storages) >= maxTorchEntries {
		return nil, fmt.Errorf("more than %d storages", maxTorchEntries)
	}
	s := &torchStorage{typ: typ, key: key, numel: numel}
	u.storages[key] = s
	return s, nil
}
