package gguf

import (
	"fmt"
	"io"
)

// Encoder writes a GGUF v3 file in one pass, for files too large to build
// in memory: NewEncoder writes the header, with every tensor's offset
// computed from its type and shape, and Write then takes the tensors' data
// in header order, inserting the alignment padding between tensors itself.
// The alignment is general.alignment when the metadata hold it, else 32.
type Encoder struct {
	w       io.Writer
	sizes   []uint64 // data bytes of each tensor
	align   uint64
	cur     int    // tensor being written
	written uint64 // bytes of tensor cur written so far
}

// NewEncoder checks the tensor infos (supported types, whole blocks per
// row), assigns their offsets, and writes the header to w. The Offset
// fields of tensors are ignored.
func NewEncoder(w io.Writer, kvs []KV, tensors []TensorInfo) (*Encoder, error) {
	e := &Encoder{w: w, align: DefaultAlignment, sizes: make([]uint64, len(tensors))}
	for _, kv := range kvs {
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.Uint()
			if !ok || a == 0 || a&(a-1) != 0 || a > 1<<16 {
				return nil, fmt.Errorf("%w: general.alignment %v", ErrFormat, kv.Value.V)
			}
			e.align = a
		}
	}
	infos := make([]TensorInfo, len(tensors))
	off := uint64(0)
	for i, t := range tensors {
		bs := t.Type.BlockSize()
		if bs == 0 {
			return nil, fmt.Errorf("%w: tensor %q has type %s", ErrUnsupported, t.Name, t.Type)
		}
		if len(t.Dims) == 0 || len(t.Dims) > MaxDims || t.Dims[0]%uint64(bs) != 0 {
			return nil, fmt.Errorf("%w: tensor %q shape %v does not hold whole %s blocks", ErrFormat, t.Name, t.Dims, t.Type)
		}
		t.Offset = off
		infos[i] = t
		e.sizes[i] = t.Size()
		off = padTo(off+e.sizes[i], e.align)
	}
	b, err := appendHeader(nil, kvs, infos, e.align)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, fmt.Errorf("gguf: write header: %w", err)
	}
	e.skipEmpty()
	return e, nil
}

// Write appends tensor data: the bytes of the tensors in header order,
// split across calls in any way. It pads after each tensor's last byte.
func (e *Encoder) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if e.cur == len(e.sizes) {
			return n, fmt.Errorf("%w: %d bytes beyond the last tensor", ErrFormat, len(p))
		}
		k := int(min(uint64(len(p)), e.sizes[e.cur]-e.written))
		m, err := e.w.Write(p[:k])
		n += m
		if err != nil {
			return n, fmt.Errorf("gguf: write tensor data: %w", err)
		}
		p = p[k:]
		e.written += uint64(k)
		if e.written == e.sizes[e.cur] {
			if err := e.pad(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// pad writes the padding after tensor cur and moves to the next tensor
// that has data.
func (e *Encoder) pad() error {
	if z := padTo(e.written, e.align) - e.written; z > 0 {
		if _, err := e.w.Write(make([]byte, z)); err != nil {
			return fmt.Errorf("gguf: write padding: %w", err)
		}
	}
	e.cur++
	e.written = 0
	e.skipEmpty()
	return nil
}

// skipEmpty moves past tensors without data (none of a valid shape, but
// kept safe).
func (e *Encoder) skipEmpty() {
	for e.cur < len(e.sizes) && e.sizes[e.cur] == 0 {
		e.cur++
	}
}

// Close reports an error unless every tensor's data were written. It does
// not close the underlying writer.
func (e *Encoder) Close() error {
	if e.cur != len(e.sizes) {
		return fmt.Errorf("%w: tensor data incomplete: %d of %d tensors written", ErrFormat, e.cur, len(e.sizes))
	}
	return nil
}
