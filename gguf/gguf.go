// Package gguf reads and writes GGUF model files (versions 2 and 3): the
// header, every metadata value type, tensor infos and the aligned tensor
// data. Open maps a file read-only so weights are never copied; OpenMeta
// reads the header alone, for callers that need metadata but not weights.
// Parsing is bounded by hard limits on counts and sizes, so a corrupt or
// hostile file yields an error rather than a panic or a huge allocation.
//
// The tensor types F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K decode (Dequantize) exactly as the
// ggml block layouts define them. A Writer produces small files in memory.
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// Hard limits applied while parsing.
const (
	MaxTensors     = 1 << 16 // tensor infos
	MaxKVs         = 1 << 16 // metadata entries
	MaxStringLen   = 1 << 20 // bytes in one string
	MaxArrayLen    = 1 << 24 // elements in one array
	MaxDims        = 4       // dimensions of one tensor
	MaxArrayDepth  = 4       // nested arrays
	MaxMetaBytes   = 1 << 28 // total bytes of decoded metadata
	maxTensorElems = 1 << 40
)

// Errors returned by the reader; they are wrapped with context.
var (
	// ErrFormat reports a malformed file.
	ErrFormat = errors.New("gguf: malformed file")
	// ErrUnsupported reports a valid but unsupported feature (version, tensor type).
	ErrUnsupported = errors.New("gguf: unsupported")
	// ErrLimit reports a count or size above the reader's hard limits.
	ErrLimit = errors.New("gguf: limit exceeded")
	// ErrNoData reports tensor data asked of a file that has none: one from
	// OpenMeta, or one closed.
	ErrNoData = errors.New("gguf: no tensor data")
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String names the value type.
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Value is one metadata value. Scalars are stored as uint8, int8, uint16,
// int16, uint32, int32, float32, bool, string, uint64, int64 or float64;
// arrays as a typed Go slice of those ([]string for strings) or, for arrays of
// arrays, as []Value.
type Value struct {
	Type ValueType
	// ElemType is the element type when Type is TypeArray.
	ElemType ValueType
	// V holds the decoded value.
	V any
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name string
	// Dims are the ggml dimensions: Dims[0] is the contiguous (row) length.
	Dims []uint64
	Type TensorType
	// Offset is relative to the start of the tensor data section.
	Offset uint64
}

// Elems is the number of elements.
func (t *TensorInfo) Elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Size is the number of bytes the tensor's data occupies.
func (t *TensorInfo) Size() uint64 {
	bs, ts := t.Type.blockInfo()
	if bs == 0 {
		return 0
	}
	return t.Elems() / uint64(bs) * uint64(ts)
}

// File is a parsed GGUF file. Its metadata are decoded into Go values; its
// tensor data (Data) are the mapped file for Open, the caller's bytes for
// Parse, and absent for OpenMeta.
type File struct {
	Version   uint32
	KVs       []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is the file offset of the tensor data section.
	DataOffset uint64
	// Data is the tensor data section. After Close it is nil, and slices
	// taken from it before (TensorData) must no longer be used.
	Data []byte

	kvIndex     map[string]int
	tensorIndex map[string]int
	unmap       func() error // releases the mapping behind Data; nil if none
	mapping     Mapping
}

// Open maps the GGUF file at path read-only and parses it. The tensor data
// are not copied: pages are read from the page cache as they are touched
// and shared by every process mapping the same file. On platforms without
// mmap the file is read into memory instead. The caller must Close the
// File when it no longer uses the tensor data, and must not truncate or
// rewrite the file while it is open (reading a vanished page faults).
func Open(path string) (*File, error) { return OpenWith(path, OpenOptions{}) }

// OpenOptions change how OpenWith maps a file.
type OpenOptions struct {
	// Populate reads every page of the file in before OpenWith returns,
	// in huge pages where the system has them for files (on Linux,
	// transparent huge pages: the mapping is advised MADV_HUGEPAGE and,
	// when the file was cached in small pages, its cached pages that no
	// process maps are dropped and read in again). File.Mapping reports
	// the outcome. For weights that every step reads: the first step does
	// not pay for page faults, and a step streams through a few hundred
	// page-table entries instead of one per 4 KiB.
	Populate bool
	// Progress, when set with Populate, is called as the pages are read
	// in, every 64 MiB: done of total bytes. total is the file's size, or
	// twice it once the file is read in again for huge pages (see
	// Populate), so that done only grows.
	Progress func(done, total int64)
}

// Mapping describes how a File's data are held in memory.
type Mapping struct {
	// Bytes is the size of the mapping (the whole file).
	Bytes int64 `json:"bytes"`
	// HugeBytes is how much of it is mapped in huge pages (2 MiB), when
	// Measured.
	HugeBytes int64 `json:"huge_bytes"`
	// Measured is set when HugeBytes was measured (Linux, with Populate).
	Measured bool `json:"measured"`
	// Reread is set when the file's cached pages were dropped and read in
	// again to get huge pages.
	Reread bool `json:"reread"`
}

// HugeFraction is HugeBytes over Bytes (0 when not measured).
func (m Mapping) HugeFraction() float64 {
	if !m.Measured || m.Bytes == 0 {
		return 0
	}
	return float64(m.HugeBytes) / float64(m.Bytes)
}

// OpenWith is Open with options.
func OpenWith(path string, o OpenOptions) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close() // the mapping outlives the descriptor
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	b, unmap, m, err := mapFile(fh, st.Size(), o)
	if err != nil {
		return nil, err
	}
	f, err := Parse(b)
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap, f.mapping = unmap, m
	return f, nil
}

// Mapping reports how the file's data are held (zero for files from Parse
// or OpenMeta).
func (f *File) Mapping() Mapping { return f.mapping }

// Close releases the tensor data of a File from Open (it unmaps the file)
// and sets Data to nil; every slice of the data taken before, such as those
// TensorData returns, is invalid afterwards and reading one faults. Metadata
// and tensor infos stay usable. Close is a no-op for files from Parse or
// OpenMeta, and closing twice is harmless. It must not run concurrently with
// readers of the data.
func (f *File) Close() error {
	f.Data = nil
	if f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap = nil
	if err := unmap(); err != nil {
		return fmt.Errorf("gguf: unmap: %w", err)
	}
	return nil
}

// OpenMeta reads the header of the GGUF file at path: its metadata and
// tensor infos, without the tensor data (Data is nil). It reads the first
// 4 MiB, and twice as much each time the header runs past what it read, so
// looking up a tokenizer or a chat template does not read the weights. The tensor
// infos are checked against the file's size as Open checks them against
// the data it read.
func OpenMeta(path string) (*File, error) {
	return openMeta(path, 4<<20)
}

// openMeta is OpenMeta reading first bytes at first and twice as many each
// time the header runs past them.
func openMeta(path string, first int64) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	for n := min(max(first, 16), size); ; n = min(2*n, size) {
		b := make([]byte, n)
		if _, err := io.ReadFull(io.NewSectionReader(fh, 0, n), b); err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", path, err)
		}
		f, r, err := parse(b, false)
		if err == nil {
			if f.DataOffset > uint64(size) {
				if len(f.Tensors) > 0 {
					return nil, fmt.Errorf("%s: %w: truncated before tensor data", path, ErrFormat)
				}
				f.DataOffset = uint64(size) // as Parse has it
			}
			if err := f.checkExtents(uint64(size) - min(f.DataOffset, uint64(size))); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return f, nil
		}
		if !r.short || n >= size {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
}

// Parse parses a whole GGUF file held in memory. The returned File refers to
// b's tensor data without copying.
func Parse(b []byte) (*File, error) {
	f, _, err := parse(b, true)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// parse parses the header in b and, with data, takes the rest of b as the
// tensor data and checks every tensor against it. The reader is returned so
// that a caller holding only a prefix of the file can tell a header that
// ran past b (reader.short) from a malformed one.
func parse(b []byte, data bool) (*File, *reader, error) {
	r := &reader{b: b}
	f, err := r.header()
	if err != nil {
		return nil, r, err
	}
	off := uint64(r.off)
	if rem := off % f.Alignment; rem != 0 {
		off += f.Alignment - rem
	}
	f.DataOffset = off
	if !data {
		return f, r, nil
	}
	if len(f.Tensors) > 0 && off > uint64(len(b)) {
		return nil, r, fmt.Errorf("%w: truncated before tensor data", ErrFormat)
	}
	if off > uint64(len(b)) {
		off = uint64(len(b))
	}
	f.DataOffset = off
	f.Data = b[off:]
	if err := f.checkExtents(uint64(len(f.Data))); err != nil {
		return nil, r, err
	}
	return f, r, nil
}

// header reads the magic, version, metadata and tensor infos.
func (r *reader) header() (*File, error) {
	f, nTensors, nKV, err := r.preamble()
	if err != nil {
		return nil, err
	}
	if err := r.metadata(f, nKV); err != nil {
		return nil, err
	}
	if err := f.applyAlignment(); err != nil {
		return nil, err
	}
	if err := r.tensorInfos(f, nTensors); err != nil {
		return nil, err
	}
	return f, nil
}

// preamble reads and bounds the magic, version, tensor count and
// metadata count, returning a File with only Version and Alignment set.
func (r *reader) preamble() (f *File, nTensors, nKV uint64, err error) {
	magic, err := r.bytes(4)
	if err != nil {
		return nil, 0, 0, err
	}
	if string(magic) != Magic {
		return nil, 0, 0, fmt.Errorf("%w: bad magic %q", ErrFormat, magic)
	}
	f = &File{Alignment: DefaultAlignment}
	if f.Version, err = r.u32(); err != nil {
		return nil, 0, 0, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, 0, 0, fmt.Errorf("%w: version %d (want 2 or 3)", ErrUnsupported, f.Version)
	}
	if nTensors, err = r.u64(); err != nil {
		return nil, 0, 0, err
	}
	if nKV, err = r.u64(); err != nil {
		return nil, 0, 0, err
	}
	if nTensors > MaxTensors {
		return nil, 0, 0, fmt.Errorf("%w: %d tensors (max %d)", ErrLimit, nTensors, MaxTensors)
	}
	if nKV > MaxKVs {
		return nil, 0, 0, fmt.Errorf("%w: %d metadata entries (max %d)", ErrLimit, nKV, MaxKVs)
	}
	return f, nTensors, nKV, nil
}

// metadata reads nKV key/value pairs into f, rejecting duplicate keys.
func (r *reader) metadata(f *File, nKV uint64) error {
	f.kvIndex = make(map[string]int, min(nKV, 1024))
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str()
		if err != nil {
			return fmt.Errorf("metadata %d key: %w", i, err)
		}
		t, err := r.u32()
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		v, err := r.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		if _, dup := f.kvIndex[key]; dup {
			return fmt.Errorf("%w: duplicate metadata key %q", ErrFormat, key)
		}
		f.kvIndex[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	return nil
}

// applyAlignment sets f.Alignment from general.alignment when present,
// requiring a power of two no larger than 64 KiB.
func (f *File) applyAlignment() error {
	v, ok := f.Get("general.alignment")
	if !ok {
		return nil
	}
	a, ok := v.Uint()
	if !ok || a == 0 || a&(a-1) != 0 || a > 1<<16 {
		return fmt.Errorf("%w: general.alignment %v", ErrFormat, v.V)
	}
	f.Alignment = a
	return nil
}

// tensorInfos reads nTensors tensor infos into f, rejecting duplicate names.
func (r *reader) tensorInfos(f *File, nTensors uint64) error {
	f.tensorIndex = make(map[string]int, min(nTensors, 1024))
	for i := uint64(0); i < nTensors; i++ {
		ti, err := r.tensorInfo(i)
		if err != nil {
			return err
		}
		if _, dup := f.tensorIndex[ti.Name]; dup {
			return fmt.Errorf("%w: duplicate tensor %q", ErrFormat, ti.Name)
		}
		f.tensorIndex[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	return nil
}

// tensorInfo reads the i-th tensor's name, dimensions, type and offset.
func (r *reader) tensorInfo(i uint64) (TensorInfo, error) {
	var ti TensorInfo
	var err error
	if ti.Name, err = r.str(); err != nil {
		return ti, fmt.Errorf("tensor %d name: %w", i, err)
	}
	if ti.Dims, err = r.tensorDims(ti.Name); err != nil {
		return ti, err
	}
	tt, err := r.u32()
	if err != nil {
		return ti, fmt.Errorf("tensor %q: %w", ti.Name, err)
	}
	ti.Type = TensorType(tt)
	if ti.Offset, err = r.u64(); err != nil {
		return ti, fmt.Errorf("tensor %q: %w", ti.Name, err)
	}
	return ti, nil
}

// tensorDims reads a tensor's dimension count and dimensions, bounding
// each dimension and the running element count by maxTensorElems.
func (r *reader) tensorDims(name string) ([]uint64, error) {
	nd, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if nd == 0 || nd > MaxDims {
		return nil, fmt.Errorf("%w: tensor %q has %d dimensions", ErrFormat, name, nd)
	}
	dims := make([]uint64, nd)
	elems := uint64(1)
	for d := range dims {
		if dims[d], err = r.u64(); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		if dims[d] == 0 || dims[d] > maxTensorElems {
			return nil, fmt.Errorf("%w: tensor %q dimension %d is %d", ErrFormat, name, d, dims[d])
		}
		elems *= dims[d]
		if elems > maxTensorElems {
			return nil, fmt.Errorf("%w: tensor %q has too many elements", ErrLimit, name)
		}
	}
	return dims, nil
}

// checkExtents checks every tensor's alignment, row length and extent
// against a data section of dataLen bytes.
func (f *File) checkExtents(dataLen uint64) error {
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Offset%f.Alignment != 0 {
			return fmt.Errorf("%w: tensor %q offset %d not aligned to %d", ErrFormat, ti.Name, ti.Offset, f.Alignment)
		}
		bs, _ := ti.Type.blockInfo()
		if bs == 0 {
			continue // reported when the tensor is read
		}
		if ti.Dims[0]%uint64(bs) != 0 {
			return fmt.Errorf("%w: tensor %q row length %d not a multiple of %s block size %d", ErrFormat, ti.Name, ti.Dims[0], ti.Type, bs)
		}
		if end := ti.Offset + ti.Size(); end < ti.Offset || end > dataLen {
			return fmt.Errorf("%w: tensor %q data [%d, %d) beyond the %d data bytes", ErrFormat, ti.Name, ti.Offset, end, dataLen)
		}
	}
	return nil
}

// Get returns the metadata value for key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.V.(string)
	return s, ok
}

// Uint returns an integer metadata value (any unsigned or non-negative
// signed integer type).
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return v.Uint()
}

// Float returns a numeric metadata value as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.V.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if u, ok := v.Uint(); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a boolean metadata value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Get(key)
	if !ok {
		return false, false
	}
	b, ok := v.V.(bool)
	return b, ok
}

// Strings returns a string-array metadata value.
func (f *File) Strings(key string) ([]string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	s, ok := v.V.([]string)
	return s, ok
}

// Float32s returns a float32-array metadata value.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	s, ok := v.V.([]float32)
	return s, ok
}

// Int32s returns an integer-array metadata value converted to int32.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	switch s := v.V.(type) {
	case []int32:
		return s, true
	case []uint32:
		out := make([]int32, len(s))
		for i, x := range s {
			out[i] = int32(x)
		}
		return out, true
	case []int8:
		out := make([]int32, len(s))
		for i, x := range s {
			out[i] = int32(x)
		}
		return out, true
	case []uint8:
		out := make([]int32, len(s))
		for i, x := range s {
			out[i] = int32(x)
		}
		return out, true
	}
	return nil, false
}

// Uint converts an integer scalar to uint64; negative values fail.
func (v Value) Uint() (uint64, bool) {
	switch x := v.V.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the raw bytes of a tensor (a slice of Data, valid until
// Close), or an error for an unsupported tensor type or a file whose data
// are absent (OpenMeta) or closed.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	if !t.Type.Supported() {
		return nil, fmt.Errorf("%w: tensor %q has type %s", ErrUnsupported, t.Name, t.Type)
	}
	end := t.Offset + t.Size()
	if end < t.Offset || end > uint64(len(f.Data)) {
		return nil, fmt.Errorf("%w: tensor %q: no data (file closed or opened without data)", ErrNoData, t.Name)
	}
	return f.Data[t.Offset:end], nil
}

// Floats decodes a whole tensor into a new float32 slice.
func (f *File) Floats(t *TensorInfo) ([]float32, error) {
	data, err := f.TensorData(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elems())
	if err := Dequantize(t.Type, out, data); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return out, nil
}

// Arch returns general.architecture.
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

type reader struct {
	b     []byte
	off   int
	meta  int  // decoded metadata bytes so far
	short bool // a read ran past the end of b
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		r.short = n >= 0
		return nil, fmt.Errorf("%w: truncated at byte %d (need %d more)", ErrFormat, r.off, n)
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

func (r *reader) u32() (uint32, error) {
	s, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (r *reader) u64() (uint64, error) {
	s, err := r.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if n > MaxStringLen {
		return "", fmt.Errorf("%w: string of %d bytes (max %d)", ErrLimit, n, MaxStringLen)
	}
	if err := r.account(int(n) + 16); err != nil {
		return "", err
	}
	s, err := r.bytes(int(n))
	if err != nil {
		return "", err
	}
	return string(s), nil
}

func (r *reader) account(n int) error {
	r.meta += n
	if r.meta > MaxMetaBytes {
		return fmt.Errorf("%w: metadata larger than %d bytes", ErrLimit, MaxMetaBytes)
	}
	return nil
}

func (r *reader) value(t ValueType, depth int) (Value, error) {
	v := Value{Type: t}
	if t == TypeArray {
		if depth >= MaxArrayDepth {
			return v, fmt.Errorf("%w: arrays nested deeper than %d", ErrLimit, MaxArrayDepth)
		}
		et, err := r.u32()
		if err != nil {
			return v, err
		}
		v.ElemType = ValueType(et)
		n, err := r.u64()
		if err != nil {
			return v, err
		}
		if n > MaxArrayLen {
			return v, fmt.Errorf("%w: array of %d elements (max %d)", ErrLimit, n, MaxArrayLen)
		}
		v.V, err = r.array(v.ElemType, int(n), depth)
		return v, err
	}
	sz := t.size()
	if t == TypeString {
		s, err := r.str()
		v.V = s
		return v, err
	}
	if sz == 0 {
		return v, fmt.Errorf("%w: unknown metadata value type %d", ErrFormat, uint32(t))
	}
	s, err := r.bytes(sz)
	if err != nil {
		return v, err
	}
	v.V = scalar(t, s)
	return v, nil
}

func scalar(t ValueType, s []byte) any {
	switch t {
	case TypeUint8:
		return s[0]
	case TypeInt8:
		return int8(s[0])
	case TypeBool:
		return s[0] != 0
	case TypeUint16:
		return binary.LittleEndian.Uint16(s)
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(s))
	case TypeUint32:
		return binary.LittleEndian.Uint32(s)
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(s))
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(s))
	case TypeUint64:
		return binary.LittleEndian.Uint64(s)
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(s))
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(s))
	}
	return nil
}

// array reads n elements of type et; nested arrays recurse at depth+1.
func (r *reader) array(et ValueType, n, depth int) (any, error) {
	switch et {
	case TypeString:
		out := make([]string, 0, min(n, 1<<12))
		for range n {
			s, err := r.str()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case TypeArray:
		out := make([]Value, 0, min(n, 1<<12))
		for range n {
			v, err := r.value(TypeArray, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	sz := et.size()
	if sz == 0 {
		return nil, fmt.Errorf("%w: unknown array element type %d", ErrFormat, uint32(et))
	}
	if err := r.account(n * sz); err != nil {
		return nil, err
	}
	s, err := r.bytes(n * sz)
	if err != nil {
		return nil, err
	}
	return decodeFixedArray(et, s, n)
}

// decodeFixedArray decodes n little-endian elements of the fixed-size
// type et from s, which holds exactly n*et.size() bytes.
func decodeFixedArray(et ValueType, s []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		return append([]uint8(nil), s...), nil
	case TypeInt8:
		return fillArray(n, func(i int) int8 { return int8(s[i]) }), nil
	case TypeBool:
		return fillArray(n, func(i int) bool { return s[i] != 0 }), nil
	case TypeUint16:
		return fillArray(n, func(i int) uint16 { return le.Uint16(s[2*i:]) }), nil
	case TypeInt16:
		return fillArray(n, func(i int) int16 { return int16(le.Uint16(s[2*i:])) }), nil
	case TypeUint32:
		return fillArray(n, func(i int) uint32 { return le.Uint32(s[4*i:]) }), nil
	case TypeInt32:
		return fillArray(n, func(i int) int32 { return int32(le.Uint32(s[4*i:])) }), nil
	case TypeFloat32:
		return fillArray(n, func(i int) float32 { return math.Float32frombits(le.Uint32(s[4*i:])) }), nil
	case TypeUint64:
		return fillArray(n, func(i int) uint64 { return le.Uint64(s[8*i:]) }), nil
	case TypeInt64:
		return fillArray(n, func(i int) int64 { return int64(le.Uint64(s[8*i:])) }), nil
	case TypeFloat64:
		return fillArray(n, func(i int) float64 { return math.Float64frombits(le.Uint64(s[8*i:])) }), nil
	}
	return nil, fmt.Errorf("%w: array element type %s", ErrFormat, et)
}

// fillArray returns a slice of n elements where element i is at(i).
func fillArray[T any](n int, at func(i int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = at(i)
	}
	return out
}
