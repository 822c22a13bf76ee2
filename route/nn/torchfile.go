package nn

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Bounds of a torch archive.
const (
	maxTorchArchive = 16 << 30 // bytes of the file
	maxTorchEntries = 1 << 16  // zip entries, and storages
	maxTorchTotal   = 1 << 30  // elements read from storages, in all
)

// LoadRouter reads a router file: a torch.save archive (a zip file, as
// R2R's save_model writes it) or safetensors, told apart by content.
func LoadRouter(path string) (*Weights, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	switch {
	case n == 4 && string(magic[:]) == "PK\x03\x04":
		return loadTorch(path, f)
	case n > 0 && magic[0] == opProto:
		return nil, fmt.Errorf("nn: %s: a torch file in the legacy (pre-1.6, non-zip) format; save it again with torch.save's default format", path)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	w, err := Read(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	return w, nil
}

// LoadTorch reads a torch.save archive file (see ReadTorch).
func LoadTorch(path string) (*Weights, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	defer f.Close()
	return loadTorch(path, f)
}

// loadTorch reads the open torch file f.
func loadTorch(path string, f *os.File) (*Weights, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	w, err := ReadTorch(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	return w, nil
}

// ConvertTorch reads the torch file in and writes its tensors (F32) and
// metadata to the safetensors file out, which r2r then reads as it reads
// in. It returns what it wrote.
func ConvertTorch(in, out string) (*Weights, error) {
	w, err := LoadTorch(in)
	if err != nil {
		return nil, err
	}
	if err := Save(out, w.Tensors, w.Meta); err != nil {
		os.Remove(out)
		return nil, err
	}
	return w, nil
}

// ReadTorch reads what torch.save writes for a state dict or for R2R's
// save_model dict {model_type, init_args, common_args,
// model_specific_args, state_dict}: a zip archive of <name>/data.pkl (a
// pickle), <name>/data/<key> (each storage's raw little-endian elements),
// <name>/version and maybe <name>/byteorder. The pickle runs on a
// restricted machine (its opcodes, whitelisted globals and bounds are in
// torchpickle.go). Tensors become float32 (from F32, F16, BF16 or F64
// storages; strided views are made contiguous) under their state-dict
// names; model_type becomes metadata model_type, and init_args,
// common_args and model_specific_args become metadata of the same names,
// as JSON.
func ReadTorch(r io.ReaderAt, size int64) (*Weights, error) {
	if size > maxTorchArchive {
		return nil, fmt.Errorf("torch archive of %d bytes exceeds %d", size, int64(maxTorchArchive))
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("torch archive (a zip file): %w", err)
	}
	a, err := openArchive(zr)
	if err != nil {
		return nil, err
	}
	pkl, err := a.read("data.pkl", maxPickleBytes)
	if err != nil {
		return nil, err
	}
	root, err := unpickle(pkl)
	if err != nil {
		return nil, fmt.Errorf("torch archive: %w", err)
	}
	rec, err := torchRecordOf(root)
	if err != nil {
		return nil, fmt.Errorf("torch archive: %w", err)
	}
	return a.weights(rec)
}

// archive is an opened torch zip archive.
type archive struct {
	prefix string               // "<name>/"
	files  map[string]*zip.File // by name inside prefix
}

// openArchive finds the archive's record prefix (the folder holding
// data.pkl) and checks its byte order.
func openArchive(zr *zip.Reader) (*archive, error) {
	if len(zr.File) > maxTorchEntries {
		return nil, fmt.Errorf("torch archive of %d entries exceeds %d", len(zr.File), maxTorchEntries)
	}
	a := &archive{files: map[string]*zip.File{}}
	for _, f := range zr.File {
		if dir, ok := strings.CutSuffix(f.Name, "/data.pkl"); ok && !strings.Contains(dir, "/") {
			if a.prefix != "" {
				return nil, fmt.Errorf("torch archive holds two records, %sdata.pkl and %s", a.prefix, f.Name)
			}
			a.prefix = dir + "/"
		}
	}
	if a.prefix == "" {
		return nil, errors.New("torch archive without <name>/data.pkl: not a file torch.save writes")
	}
	for _, f := range zr.File {
		if name, ok := strings.CutPrefix(f.Name, a.prefix); ok {
			a.files[name] = f
		}
	}
	if _, ok := a.files["byteorder"]; ok {
		b, err := a.read("byteorder", 16)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(b)); s != "little" {
			return nil, fmt.Errorf("torch archive of byte order %q: only little-endian files are read", s)
		}
	}
	return a, nil
}

// read returns the whole of entry name, at most limit bytes, checking
// its length and (as the zip reader does at the end) its checksum.
func (a *archive) read(name string, limit int64) ([]byte, error) {
	f, ok := a.files[name]
	if !ok {
		return nil, fmt.Errorf("torch archive lacks %s%s", a.prefix, name)
	}
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("torch archive entry %s of %d bytes exceeds %d", f.Name, f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("torch archive entry %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1)) // grown as the data arrives
	switch {
	case err != nil:
		return nil, fmt.Errorf("torch archive entry %s: %w", f.Name, err)
	case uint64(len(b)) != f.UncompressedSize64:
		return nil, fmt.Errorf("torch archive entry %s holds %d bytes, declares %d", f.Name, len(b), f.UncompressedSize64)
	}
	return b, nil
}

// atEOF checks that r has nothing more (and, for a zip entry, that its
// checksum holds).
func atEOF(r io.Reader) error {
	var one [1]byte
	switch _, err := io.ReadFull(r, one[:]); {
	case err == nil:
		return errors.New("longer than its declared size")
	case err != io.EOF:
		return err
	}
	return nil
}

// weights reads the storages rec's tensors use and builds the tensors.
func (a *archive) weights(rec *torchRecord) (*Weights, error) {
	w := &Weights{Tensors: map[string]Tensor{}, Meta: rec.meta}
	names := make([]string, 0, len(rec.tensors))
	for n := range rec.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	data := map[*torchStorage][]float32{}
	var read, built int64
	for _, n := range names {
		t := rec.tensors[n]
		s := t.storage
		if s.typ.dtype == "" {
			return nil, fmt.Errorf("torch archive: tensor %q is of %s; only floating-point tensors are read", n, s.typ.name)
		}
		d, ok := data[s]
		if !ok {
			if read += s.numel; read > maxTorchTotal {
				return nil, fmt.Errorf("torch archive: storages exceed %d elements", maxTorchTotal)
			}
			var err error
			if d, err = a.storage(s); err != nil {
				return nil, fmt.Errorf("torch archive: tensor %q: %w", n, err)
			}
			data[s] = d
		}
		// Views may share a storage (tied weights), but not repeat it
		// without bound.
		if built += t.numel(); built > 2*read+1<<20 {
			return nil, fmt.Errorf("torch archive: tensors of %d elements over storages of %d", built, read)
		}
		c := t.contiguous(d)
		w.Tensors[n] = c
	}
	return w, nil
}

// storage reads data/<key> as s.numel elements of s's type.
func (a *archive) storage(s *torchStorage) ([]float32, error) {
	name := "data/" + s.key
	f, ok := a.files[name]
	if !ok {
		return nil, fmt.Errorf("storage %s%s missing", a.prefix, name)
	}
	if want := uint64(s.numel * s.typ.size); f.UncompressedSize64 != want {
		return nil, fmt.Errorf("storage %s holds %d bytes, want %d (%d elements of torch.%s)", f.Name, f.UncompressedSize64, want, s.numel, s.typ.name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", f.Name, err)
	}
	defer rc.Close()
	// Grown as the data arrives: a declared size is no promise of data.
	out := make([]float32, 0, min(s.numel, 1<<16))
	buf := make([]byte, 64<<10)
	for int64(len(out)) < s.numel {
		n := min(int(s.numel)-len(out), len(buf)/int(s.typ.size))
		b := buf[:n*int(s.typ.size)]
		if _, err := io.ReadFull(rc, b); err != nil {
			return nil, fmt.Errorf("storage %s: %w", f.Name, err)
		}
		i := len(out)
		out = append(out, make([]float32, n)...)
		decode(s.typ.dtype, b, out[i:])
	}
	if err := atEOF(rc); err != nil {
		return nil, fmt.Errorf("storage %s: %w", f.Name, err)
	}
	return out, nil
}

// decode converts little-endian elements of dtype to float32.
func decode(dtype string, b []byte, dst []float32) {
	for i := range dst {
		switch dtype {
		case "F32":
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "F16":
			dst[i] = half(binary.LittleEndian.Uint16(b[2*i:]))
		case "BF16":
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		case "F64":
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	}
}

// numel is the number of elements of the view.
func (t *torchTensor) numel() int64 {
	n := int64(1)
	for _, d := range t.size {
		n *= d
	}
	return n
}

// contiguous copies the view's elements out of its storage's data, in
// row-major order.
func (t *torchTensor) contiguous(data []float32) Tensor {
	out := Tensor{Shape: make([]int, len(t.size))}
	count := 1
	for i, n := range t.size {
		out.Shape[i] = int(n)
		count *= int(n)
	}
	out.Data = make([]float32, count)
	if count == 0 {
		return out
	}
	idx := make([]int64, len(t.size))
	for k := range out.Data {
		pos := t.offset
		for d, i := range idx {
			pos += i * t.stride[d]
		}
		out.Data[k] = data[pos]
		for d := len(idx) - 1; d >= 0; d-- { // next index, last dimension fastest
			if idx[d]++; idx[d] < t.size[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// torchRecord is what a torch file holds for a router.
type torchRecord struct {
	meta    map[string]string
	tensors map[string]*torchTensor
}

// torchRecordOf reads R2R's save_model dict, or a bare state dict.
func torchRecordOf(root any) (*torchRecord, error) {
	d, ok := root.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("the pickle holds a value of type %s, want a dict (R2R's save_model, or a state dict)", describe(root))
	}
	rec := &torchRecord{meta: map[string]string{}, tensors: map[string]*torchTensor{}}
	sd := d
	if v, ok := d.get("state_dict"); ok {
		if sd, ok = v.(*pyDict); !ok {
			return nil, fmt.Errorf("state_dict is of type %s, want a dict", describe(v))
		}
		if v, ok := d.get("model_type"); ok {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("model_type is of type %s, want a str", describe(v))
			}
			rec.meta["model_type"] = s
		}
		for _, k := range []string{"init_args", "common_args", "model_specific_args"} {
			if v, ok := d.get(k); ok {
				budget := maxPickleJSON
				js, err := pyJSON(v, 0, &budget)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				b, err := json.Marshal(js)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				rec.meta[k] = string(b)
			}
		}
	}
	for i, k := range sd.keys {
		name, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("state dict key of type %s", describe(k))
		}
		t, ok := sd.vals[i].(*torchTensor)
		if !ok {
			return nil, fmt.Errorf("state dict entry %q is of type %s, not a tensor", name, describe(sd.vals[i]))
		}
		rec.tensors[name] = t
	}
	return rec, nil
}

// pyJSON converts a plain pickled value to a JSON value (dtypes become
// their names, tuples arrays). Each value converted, and each byte of its
// strings, is charged to budget (a value the memo shares is charged each
// time it appears).
func pyJSON(v any, depth int, budget *int) (any, error) {
	if depth > maxPickleDepth {
		return nil, fmt.Errorf("values nested deeper than %d", maxPickleDepth)
	}
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("more than %d values and string bytes", maxPickleJSON)
	}
	switch v := v.(type) {
	case string:
		if *budget -= len(v); *budget < 0 {
			return nil, fmt.Errorf("more than %d values and string bytes", maxPickleJSON)
		}
		return v, nil
	case nil, bool, int64:
		return v, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%v has no JSON form", v)
		}
		return v, nil
	case torchDType:
		return string(v), nil
	case pyTuple:
		return jsonList(v, depth, budget)
	case *pyList:
		return jsonList(v.items, depth, budget)
	case *pyDict:
		m := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dict key of type %s has no JSON form", describe(k))
			}
			x, err := pyJSON(v.vals[i], depth+1, budget)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s, err)
			}
			m[s] = x
		}
		return m, nil
	}
	return nil, fmt.Errorf("a value of type %s where plain values belong", describe(v))
}

// jsonList converts a tuple's or list's elements.
func jsonList(vs []any, depth int, budget *int) (any, error) {
	out := make([]any, len(vs))
	for i, x := range vs {
		var err error
		if out[i], err = pyJSON(x, depth+1, budget); err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return out, nil
}

// CommonThreshold returns the threshold of metadata common_args (R2R's
// save_model records the one its training chose there); ok is false when
// there is none (no common_args, or a null threshold).
func (w *Weights) CommonThreshold() (t float64, ok bool, err error) {
	s, has := w.Meta["common_args"]
	if !has {
		return 0, false, nil
	}
	var c struct {
		Threshold *float64 `json:"threshold"`
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return 0, false, fmt.Errorf("nn: metadata common_args: %w", err)
	}
	if c.Threshold == nil {
		return 0, false, nil
	}
	return *c.Threshold, true, nil
}
