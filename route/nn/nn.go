// Package nn is the small amount of neural-network code the learned
// routers (r2r, citer, co-llm) share: a safetensors reader and writer and
// batched dense layers (linear, LayerNorm, GELU, sigmoid) on row-major
// float32 matrices. A batch of n inputs of width d is one []float32 of
// n·d values, so a router evaluates a whole engine step in one pass.
package nn

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// Tensor is a dense float32 tensor in row-major order.
type Tensor struct {
	// Shape lists the dimensions, outermost first.
	Shape []int
	// Data holds the product of Shape values.
	Data []float32
}

// Weights are named tensors loaded from a safetensors file.
type Weights struct {
	// Tensors by name.
	Tensors map[string]Tensor
	// Meta is the file's __metadata__ (string to string).
	Meta map[string]string
}

// maxHeader bounds the JSON header of a safetensors file.
const maxHeader = 16 << 20

type entry struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// Load reads a safetensors file.
func Load(path string) (*Weights, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	defer f.Close()
	w, err := Read(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	return w, nil
}

// Read parses safetensors: an 8-byte little-endian header length, a JSON
// header mapping names to dtype, shape and data_offsets, then the data.
// F32, F16 and BF16 tensors are read (converted to float32).
func Read(r io.Reader) (*Weights, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("safetensors header length: %w", err)
	}
	if n == 0 || n > maxHeader {
		return nil, fmt.Errorf("safetensors header length %d out of range", n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("safetensors header: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("safetensors header: %w", err)
	}
	w := &Weights{Tensors: map[string]Tensor{}, Meta: map[string]string{}}
	type named struct {
		name string
		e    entry
	}
	var es []named
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &w.Meta); err != nil {
				return nil, fmt.Errorf("safetensors metadata: %w", err)
			}
			continue
		}
		var e entry
		if err := json.Unmarshal(v, &e); err != nil || len(e.Offsets) != 2 {
			return nil, fmt.Errorf("safetensors tensor %q: bad entry", name)
		}
		es = append(es, named{name, e})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].e.Offsets[0] < es[j].e.Offsets[0] })
	var pos int64
	for _, x := range es {
		size := map[string]int64{"F32": 4, "F16": 2, "BF16": 2}[x.e.DType]
		if size == 0 {
			return nil, fmt.Errorf("safetensors tensor %q: unsupported dtype %s", x.name, x.e.DType)
		}
		count := int64(1)
		for _, d := range x.e.Shape {
			if d < 0 || d > 1<<30 || count*int64(d) > 1<<30 {
				return nil, fmt.Errorf("safetensors tensor %q: bad shape %v", x.name, x.e.Shape)
			}
			count *= int64(d)
		}
		b, e := x.e.Offsets[0], x.e.Offsets[1]
		if b < pos || e-b != count*size {
			return nil, fmt.Errorf("safetensors tensor %q: offsets [%d,%d] do not fit shape %v %s", x.name, b, e, x.e.Shape, x.e.DType)
		}
		if _, err := io.CopyN(io.Discard, r, b-pos); err != nil {
			return nil, fmt.Errorf("safetensors tensor %q: %w", x.name, err)
		}
		buf := make([]byte, e-b)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("safetensors tensor %q: %w", x.name, err)
		}
		pos = e
		t := Tensor{Shape: x.e.Shape, Data: make([]float32, count)}
		for i := range t.Data {
			switch x.e.DType {
			case "F32":
				t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
			case "BF16":
				t.Data[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[2*i:])) << 16)
			case "F16":
				t.Data[i] = half(binary.LittleEndian.Uint16(buf[2*i:]))
			}
		}
		w.Tensors[x.name] = t
	}
	return w, nil
}

// half converts an IEEE binary16 value.
func half(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * float32(math.Ldexp(man, -24))
	case 31:
		if man != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1+man/1024, exp-15))
}

// Write writes tensors (as F32) and metadata in safetensors format, tensors
// in name order.
func Write(w io.Writer, ts map[string]Tensor, meta map[string]string) error {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	if len(meta) > 0 {
		hdr["__metadata__"] = meta
	}
	var off int64
	for _, n := range names {
		t := ts[n]
		count := 1
		for _, d := range t.Shape {
			count *= d
		}
		if count != len(t.Data) {
			return fmt.Errorf("nn: tensor %q: shape %v holds %d values, data has %d", n, t.Shape, count, len(t.Data))
		}
		hdr[n] = entry{DType: "F32", Shape: t.Shape, Offsets: []int64{off, off + 4*int64(count)}}
		off += 4 * int64(count)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("nn: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	out = append(out, js...)
	for _, n := range names {
		for _, v := range ts[n].Data {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("nn: %w", err)
	}
	return nil
}

// Save writes tensors and metadata to a safetensors file at path.
func Save(path string, ts map[string]Tensor, meta map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("nn: %w", err)
	}
	if err := Write(f, ts, meta); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Has reports whether a tensor is present.
func (w *Weights) Has(name string) bool { _, ok := w.Tensors[name]; return ok }

// Vector returns a 1-D tensor of n values (n < 0 accepts any length).
func (w *Weights) Vector(name string, n int) ([]float32, error) {
	t, ok := w.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("nn: tensor %q missing", name)
	}
	if len(t.Shape) != 1 || n >= 0 && t.Shape[0] != n {
		return nil, fmt.Errorf("nn: tensor %q has shape %v, want [%d]", name, t.Shape, n)
	}
	return t.Data, nil
}

// Linear is y = x·Wᵀ + b with W of shape [Out, In] (PyTorch nn.Linear).
type Linear struct {
	// In and Out are the input and output widths.
	In, Out int
	// W holds Out rows of In weights; B holds Out biases (nil: none).
	W, B []float32
}

// Linear loads prefix.weight [out, in] and, when present, prefix.bias [out].
// in < 0 accepts any input width.
func (w *Weights) Linear(prefix string, in int) (Linear, error) {
	t, ok := w.Tensors[prefix+".weight"]
	if !ok {
		return Linear{}, fmt.Errorf("nn: tensor %q missing", prefix+".weight")
	}
	if len(t.Shape) != 2 || in >= 0 && t.Shape[1] != in {
		return Linear{}, fmt.Errorf("nn: tensor %q has shape %v, want [out, %d]", prefix+".weight", t.Shape, in)
	}
	l := Linear{In: t.Shape[1], Out: t.Shape[0], W: t.Data}
	if w.Has(prefix + ".bias") {
		b, err := w.Vector(prefix+".bias", l.Out)
		if err != nil {
			return Linear{}, err
		}
		l.B = b
	}
	return l, nil
}

// Forward computes n rows: y[n×Out] = x[n×In]·Wᵀ + b. y is grown as needed
// and returned.
func (l *Linear) Forward(x []float32, n int, y []float32) []float32 {
	y = Grow(y, n*l.Out)
	for r := range n {
		xr := x[r*l.In : (r+1)*l.In]
		for o := range l.Out {
			var s float32
			if l.B != nil {
				s = l.B[o]
			}
			for k, v := range l.W[o*l.In : (o+1)*l.In] {
				s += v * xr[k]
			}
			y[r*l.Out+o] = s
		}
	}
	return y
}

// LayerNorm normalises each row to zero mean and unit variance, then
// scales by W and shifts by B.
type LayerNorm struct {
	// W and B are the per-feature scale and shift.
	W, B []float32
	// Eps guards the variance (PyTorch default 1e-5).
	Eps float32
}

// LayerNorm loads prefix.weight and prefix.bias, both [d].
func (w *Weights) LayerNorm(prefix string, d int) (LayerNorm, error) {
	g, err := w.Vector(prefix+".weight", d)
	if err != nil {
		return LayerNorm{}, err
	}
	b, err := w.Vector(prefix+".bias", d)
	if err != nil {
		return LayerNorm{}, err
	}
	return LayerNorm{W: g, B: b, Eps: 1e-5}, nil
}

// Forward normalises n rows of x into y (grown as needed and returned).
func (l *LayerNorm) Forward(x []float32, n int, y []float32) []float32 {
	d := len(l.W)
	y = Grow(y, n*d)
	for r := range n {
		xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
		var mean, vr float64
		for _, v := range xr {
			mean += float64(v)
		}
		mean /= float64(d)
		for _, v := range xr {
			vr += (float64(v) - mean) * (float64(v) - mean)
		}
		inv := 1 / math.Sqrt(vr/float64(d)+float64(l.Eps))
		for k, v := range xr {
			yr[k] = float32((float64(v)-mean)*inv)*l.W[k] + l.B[k]
		}
	}
	return y
}

// GELU applies the exact (erf) GELU in place.
func GELU(x []float32) {
	for i, v := range x {
		x[i] = float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2)))
	}
}

// ReLU applies max(0, x) in place.
func ReLU(x []float32) {
	for i, v := range x {
		x[i] = max(v, 0)
	}
}

// Sigmoid is 1/(1+e^−x).
func Sigmoid(x float32) float64 { return 1 / (1 + math.Exp(-float64(x))) }

// Grow returns b with length n, reallocating when its capacity is short.
func Grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
