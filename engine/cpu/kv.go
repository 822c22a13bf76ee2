package cpu

import (
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
)

// blockTokens is the number of positions per KV block: a transposed key
// block of the attention kernels.
const blockTokens = kernels.KeyBlock

// kvPool hands out fixed-size KV blocks within a byte budget. A block holds
// keys and values of blockTokens positions for every layer, laid out per
// layer as keys transposed, [kvDim][position] (the attention kernels'
// layout: a vector lane per position), then values, [position][kvDim].
// Freed blocks are reused.
type kvPool struct {
	blockFloats int
	layerFloats int // floats per layer in a block (keys and values)
	kvDim       int
	maxBlocks   int
	blocks      [][]float32
	free        []int32
}

func newKVPool(layers, kvDim int, budgetBytes int64) *kvPool {
	lf := 2 * blockTokens * kvDim
	p := &kvPool{layerFloats: lf, blockFloats: layers * lf, kvDim: kvDim}
	p.maxBlocks = int(min(budgetBytes/int64(4*p.blockFloats), 1<<31-1))
	return p
}

// available reports how many more blocks can be handed out.
func (p *kvPool) available() int {
	return len(p.free) + p.maxBlocks - len(p.blocks)
}

func (p *kvPool) alloc() int32 {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	p.blocks = append(p.blocks, make([]float32, p.blockFloats))
	return int32(len(p.blocks) - 1)
}

func (p *kvPool) release(b int32) { p.free = append(p.free, b) }

// putKey stores key k of position off within block b at layer l.
func (p *kvPool) putKey(b int32, l, off int, k []float32) {
	keys := p.blocks[b][l*p.layerFloats : l*p.layerFloats+blockTokens*p.kvDim]
	for i, v := range k[:p.kvDim] {
		keys[i*blockTokens+off] = v
	}
}

// value returns the value vector slot of position off within block b at layer l.
func (p *kvPool) value(b int32, l, off int) []float32 {
	base := l*p.layerFloats + (blockTokens+off)*p.kvDim
	return p.blocks[b][base : base+p.kvDim]
}

// sequence is one sequence's KV state.
type sequence struct {
	id     engine.SeqID
	n      int     // tokens held
	blocks []int32 // KV blocks, block i holds positions [16i, 16i+16)
	// step bookkeeping
	inBatch bool
	created bool
	oldN    int
	oldBlk  int
}

func blocksFor(n int) int { return (n + blockTokens - 1) / blockTokens }
