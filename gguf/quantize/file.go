package quantize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// ErrRequantize reports an input tensor that is already quantised and
// would need another type: the result would carry both rounding errors, so
// it must be asked for (Options.AllowRequantize).
var ErrRequantize = errors.New("quantize: tensor already quantised")

// Options tune File.
type Options struct {
	// Threads quantising rows in parallel (0: GOMAXPROCS). The output does
	// not depend on it.
	Threads int
	// AllowRequantize lets quantised input tensors be decoded and
	// quantised again to another type.
	AllowRequantize bool
}

// threads is the worker count to use.
func (o Options) threads() int {
	if o.Threads > 0 {
		return o.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// Summary counts what File wrote.
type Summary struct {
	// Tensors counts the output tensors of each type.
	Tensors map[gguf.TensorType]int
	// Bytes is the size of the tensor data written (padding excluded).
	Bytes int64
}

// Header returns the metadata and tensor infos of src quantised with m:
// every key kept, general.file_type set to the mix's, and
// general.quantization_version set to 2 (the ggml block layouts this
// package writes) when a block type is used.
func Header(src *gguf.File, m Mix) ([]gguf.KV, []gguf.TensorInfo) {
	types := m.Types(src.Tensors, gqa(src))
	tensors := make([]gguf.TensorInfo, len(src.Tensors))
	quant := false
	for i, t := range src.Tensors {
		t.Type = types[i]
		tensors[i] = t
		quant = quant || isQuantType(t.Type)
	}
	kvs := append([]gguf.KV(nil), src.KVs...)
	kvs = setKV(kvs, "general.file_type", m.FileType)
	if quant {
		kvs = setKV(kvs, "general.quantization_version", uint32(2))
	}
	return kvs, tensors
}

// setKV replaces or appends a uint32 metadata entry.
func setKV(kvs []gguf.KV, key string, v uint32) []gguf.KV {
	val := gguf.Value{Type: gguf.TypeUint32, V: v}
	for i := range kvs {
		if kvs[i].Key == key {
			kvs[i].Value = val
			return kvs
		}
	}
	return append(kvs, gguf.KV{Key: key, Value: val})
}

// gqa is head_count / head_count_kv of the file's architecture, 0 if
// unknown.
func gqa(f *gguf.File) int {
	arch := f.Arch()
	h, ok1 := f.Uint(arch + ".attention.head_count")
	kv, ok2 := f.Uint(arch + ".attention.head_count_kv")
	if !ok1 || !ok2 || kv == 0 {
		return 0
	}
	return int(h / kv)
}

// File writes src to dst with its tensors retyped by m, one tensor at a
// time in src's order: a tensor whose type is unchanged is copied, others
// are decoded row by row and quantised in parallel. Memory use is a few
// chunks of rows, whatever the model's size.
func File(ctx context.Context, dst io.Writer, src *gguf.File, m Mix, opt Options) (Summary, error) {
	kvs, tensors := Header(src, m)
	for i, t := range src.Tensors {
		if tensors[i].Type != t.Type && isQuantType(t.Type) && !opt.AllowRequantize {
			return Summary{}, fmt.Errorf("%w: %s is %s (want %s)", ErrRequantize, t.Name, t.Type, tensors[i].Type)
		}
	}
	enc, err := gguf.NewEncoder(dst, kvs, tensors)
	if err != nil {
		return Summary{}, fmt.Errorf("quantize: %w", err)
	}
	sum := Summary{Tensors: map[gguf.TensorType]int{}}
	for i := range src.Tensors {
		in, out := &src.Tensors[i], &tensors[i]
		data, err := src.TensorData(in)
		if err != nil {
			return sum, fmt.Errorf("quantize: %w", err)
		}
		if in.Type == out.Type {
			_, err = enc.Write(data)
		} else {
			n := int(in.Dims[0])
			rows := int(in.Elems()) / n
			rb := in.Type.RowBytes(n)
			err = Rows(ctx, enc, out.Type, rows, n, opt.threads(), func(r int, dst []float32) error {
				return gguf.Dequantize(in.Type, dst, data[r*rb:(r+1)*rb])
			})
		}
		if err != nil {
			return sum, fmt.Errorf("quantize: tensor %s: %w", in.Name, err)
		}
		sum.Tensors[out.Type]++
		sum.Bytes += int64(out.Size())
	}
	return sum, enc.Close()
}

// chunkBytes is about how much quantised output Rows holds at once.
const chunkBytes = 4 << 20

// Rows writes rows × n values as type t to w: fill produces row r's values
// (it is called concurrently for different rows, from up to threads
// goroutines, all finished when Rows returns), and the rows are quantised
// in parallel a chunk at a time and written in order. The output does not
// depend on threads. ctx is checked between chunks.
func Rows(ctx context.Context, w io.Writer, t gguf.TensorType, rows, n, threads int, fill func(r int, dst []float32) error) error {
	rb := t.RowBytes(n)
	if rb == 0 || n%t.BlockSize() != 0 {
		return fmt.Errorf("quantize: rows of %d values cannot be %s", n, t)
	}
	threads = max(1, threads)
	per := max(1, min(rows, max(threads, chunkBytes/rb)))
	out := make([]byte, per*rb)
	bufs := make([][]float32, threads)
	for k := range bufs {
		bufs[k] = make([]float32, n)
	}
	for r0 := 0; r0 < rows; r0 += per {
		if err := ctx.Err(); err != nil {
			return err
		}
		cnt := min(per, rows-r0)
		errs := make([]error, threads)
		var wg sync.WaitGroup
		for k := range threads {
			lo, hi := r0+cnt*k/threads, r0+cnt*(k+1)/threads
			wg.Go(func() {
				for r := lo; r < hi && errs[k] == nil; r++ {
					if errs[k] = fill(r, bufs[k]); errs[k] == nil {
						errs[k] = gguf.QuantizeInto(t, out[(r-r0)*rb:(r-r0+1)*rb], bufs[k])
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if _, err := w.Write(out[:cnt*rb]); err != nil {
			return err
		}
	}
	return nil
}
