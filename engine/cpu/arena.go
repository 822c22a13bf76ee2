package cpu

import (
	"context"
	"fmt"
	"sync"
)

// Arena recycles KV cache memory between the engines opened with it
// (Options.Arena): the blocks an engine's cache took go back to the arena
// when the engine closes, and the next engine's cache takes them before
// new memory.
//
// New memory costs a page fault for every page the first time it is
// written, and a cache that grows into new memory steps slower for it. On
// the two-core virtual machine this was measured on, a first write cost
// about 3 ms per MB (a SmolLM2-135M block of 16 positions, 0.7 MB:
// 2.1-2.7 ms; writes to warm memory 0.04 ms per MB), and a SmolLM2-135M
// decode step of one sequence took 7.6 ms where its cache grew into a new
// block against 5.3 ms where it reused one. An engine's cache keeps the
// blocks of finished sequences for the prefix cache until its budget is
// full, so it grows for as long as that takes: in a server that has run
// for a while every block is warm, but an engine opened for a few seconds
// of measurement (bench opens fresh ones for every slice) grows the whole
// time. Opened with one Arena, the later engines find warm memory; Reserve
// warms memory ahead for the first ones (a server's engine reserves its
// own with Options.KVReserveBytes).
//
// An Arena is safe for concurrent use; its memory is held until the arena
// is no longer referenced.
type Arena struct {
	mu    sync.Mutex
	slabs []*slab
}

// slab is one piece of the arena's memory: blocks are carved from its
// front (used) and come back to free, by length; when none is out, the
// whole slab is free again.
type slab struct {
	mem  []float32
	used int // floats carved
	out  int // blocks handed out and not returned
	free map[int][][]float32
}

// NewArena returns an empty arena.
func NewArena() *Arena { return &Arena{} }

// pageFloats is the float32s in a 4 KiB page: Reserve writes one per page.
const pageFloats = 1024

// slabFloats is the size of the slabs Reserve warms (16 MiB) and the
// least size of those the arena adds when it runs out.
const slabFloats = 4 << 20

// Reserve adds at least bytes of warm memory to the arena (written once,
// so that its pages are mapped), in slabs that blocks of any size are
// carved from. It returns ctx's error if ctx ends first (keeping what it
// warmed).
func (a *Arena) Reserve(ctx context.Context, bytes int64) error {
	for ; bytes > 0; bytes -= 4 * slabFloats {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: reserving KV memory: %w", err)
		}
		s := &slab{mem: make([]float32, slabFloats)}
		for i := 0; i < len(s.mem); i += pageFloats {
			s.mem[i] = 0 // fault the page in
		}
		a.mu.Lock()
		a.slabs = append(a.slabs, s)
		a.mu.Unlock()
	}
	return nil
}

// reserveTo reserves (Reserve) what the arena lacks of holding bytes.
func (a *Arena) reserveTo(ctx context.Context, bytes int64) error {
	return a.Reserve(ctx, bytes-a.Held())
}

// get returns a block of n floats and the slab it belongs to: a returned
// block, one carved from a slab, or one from a new slab. Its contents are
// undefined.
func (a *Arena) get(n int) ([]float32, *slab) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.slabs {
		if fs := s.free[n]; len(fs) > 0 {
			b := fs[len(fs)-1]
			fs[len(fs)-1] = nil
			s.free[n] = fs[:len(fs)-1]
			s.out++
			return b, s
		}
	}
	var s *slab
	for _, t := range a.slabs {
		if len(t.mem)-t.used >= n {
			s = t
			break
		}
	}
	if s == nil {
		s = &slab{mem: make([]float32, max(n, slabFloats))}
		a.slabs = append(a.slabs, s)
	}
	b := s.mem[s.used : s.used+n : s.used+n]
	s.used += n
	s.out++
	return b, s
}

// put returns a block that get handed out with slab s.
func (a *Arena) put(b []float32, s *slab) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.out--; s.out == 0 {
		s.used, s.free = 0, nil
		return
	}
	if s.free == nil {
		s.free = map[int][][]float32{}
	}
	s.free[len(b)] = append(s.free[len(b)], b)
}

// Held reports the memory, in bytes, the arena holds.
func (a *Arena) Held() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for _, s := range a.slabs {
		n += int64(4 * len(s.mem))
	}
	return n
}
