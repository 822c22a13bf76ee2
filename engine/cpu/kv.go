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
	ref         []int32 // per block: the sequences holding it
	free        []int32
	cache       *prefixCache // nil: prefix caching off
	arena       *Arena       // nil: new blocks are new memory
	slabs       []*slab      // with an arena: the slab of each block
}

func newKVPool(layers, kvDim int, budgetBytes int64, prefix bool, arena *Arena) *kvPool {
	lf := 2 * blockTokens * kvDim
	p := &kvPool{layerFloats: lf, blockFloats: layers * lf, kvDim: kvDim, arena: arena}
	p.maxBlocks = int(min(budgetBytes/int64(4*p.blockFloats), 1<<31-1))
	if prefix {
		p.cache = newPrefixCache()
	}
	return p
}

// available reports how many more blocks can be handed out (cached blocks
// no sequence holds count: they are evicted on demand).
func (p *kvPool) available() int {
	n := len(p.free) + p.maxBlocks - len(p.blocks)
	if p.cache != nil {
		n += p.cache.idle
	}
	return n
}

// alloc hands out a block held once: a free one, a new one within the
// budget, or the cached block released longest ago.
func (p *kvPool) alloc() int32 {
	var b int32
	switch n := len(p.free); {
	case n > 0:
		b = p.free[n-1]
		p.free = p.free[:n-1]
	case len(p.blocks) < p.maxBlocks || p.cache == nil || p.cache.head < 0:
		p.newBlock()
		p.ref = append(p.ref, 0)
		b = int32(len(p.blocks) - 1)
		if p.cache != nil {
			p.cache.grow(len(p.blocks))
		}
	default:
		b = p.cache.head
		p.cache.remove(b)
		p.cache.unregister(b)
	}
	p.ref[b] = 1
	return b
}

// newBlock adds memory for one more block: the arena's, else new.
func (p *kvPool) newBlock() {
	if p.arena == nil {
		p.blocks = append(p.blocks, make([]float32, p.blockFloats))
		return
	}
	b, s := p.arena.get(p.blockFloats)
	p.blocks, p.slabs = append(p.blocks, b), append(p.slabs, s)
}

// close hands every block back to the arena (if any); the pool must not
// be used afterwards.
func (p *kvPool) close() {
	if p.arena != nil {
		for i, b := range p.blocks {
			p.arena.put(b, p.slabs[i])
		}
	}
	p.blocks, p.slabs = nil, nil
}

// acquire adds a holder to a cached block.
func (p *kvPool) acquire(b int32) {
	if p.ref[b] == 0 {
		p.cache.remove(b)
	}
	p.ref[b]++
}

// release drops a holder; a block no one holds is freed, or kept idle in
// the cache when it is registered there.
func (p *kvPool) release(b int32) {
	if p.ref[b]--; p.ref[b] > 0 {
		return
	}
	if p.cache != nil && p.cache.node[b] != 0 {
		p.cache.push(b)
		return
	}
	p.free = append(p.free, b)
}

// held reports the blocks sequences hold.
func (p *kvPool) held() int {
	n := len(p.blocks) - len(p.free)
	if p.cache != nil {
		n -= p.cache.idle
	}
	return n
}

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
	// with prefix caching: the tokens held, and the cache node of each
	// full block's content (the parents of the next blocks' keys)
	toks  []int32
	nodes []uint64
	// step bookkeeping
	inBatch bool
	created bool
	oldN    int
	oldBlk  int
}

func blocksFor(n int) int { return (n + blockTokens - 1) / blockTokens }
