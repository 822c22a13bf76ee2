package cpu

import (
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Prefix caching: a full KV block (blockTokens positions) whose content is
// fixed by the tokens up to its end is registered under its key, the node
// of the block before it and its own tokens. A new sequence (or one
// truncated to nothing) whose tokens begin with registered blocks takes
// them instead of computing those positions. Blocks are reference-counted;
// a cached block no sequence holds stays until the pool needs its memory
// (least recently released first). A sequence that must write into a
// shared block (after a truncation inside it) gets its own copy first.

// blockKey names a block's content exactly: the node of the block before
// it (0 for the first) and its tokens.
type blockKey struct {
	parent uint64
	toks   [blockTokens]int32
}

// cacheEntry is a registered block and its node (a number never reused, so
// a key naming an evicted parent can never be hit).
type cacheEntry struct {
	block int32
	node  uint64
}

// prefixCache is the pool's index of registered blocks and the idle
// (cached, unheld) blocks in release order.
type prefixCache struct {
	entries    map[blockKey]cacheEntry
	nextNode   uint64
	node       []uint64   // per block: its node (0: not registered)
	key        []blockKey // per block: its key, when registered
	prev, next []int32    // per block: idle list links (-1: none)
	head, tail int32      // idle list ends (-1: empty)
	idle       int
	// looked counts the tokens of sequences that started by looking up the
	// cache, hit those found there.
	looked, hit uint64
}

func newPrefixCache() *prefixCache {
	return &prefixCache{entries: map[blockKey]cacheEntry{}, head: -1, tail: -1}
}

// grow extends the per-block arrays to n blocks.
func (c *prefixCache) grow(n int) {
	for len(c.node) < n {
		c.node = append(c.node, 0)
		c.key = append(c.key, blockKey{})
		c.prev = append(c.prev, -1)
		c.next = append(c.next, -1)
	}
}

// push appends block b to the idle list.
func (c *prefixCache) push(b int32) {
	c.prev[b], c.next[b] = c.tail, -1
	if c.tail >= 0 {
		c.next[c.tail] = b
	} else {
		c.head = b
	}
	c.tail = b
	c.idle++
}

// remove takes block b off the idle list.
func (c *prefixCache) remove(b int32) {
	if c.prev[b] >= 0 {
		c.next[c.prev[b]] = c.next[b]
	} else {
		c.head = c.next[b]
	}
	if c.next[b] >= 0 {
		c.prev[c.next[b]] = c.prev[b]
	} else {
		c.tail = c.prev[b]
	}
	c.prev[b], c.next[b] = -1, -1
	c.idle--
}

// unregister drops block b's entry, if it has one.
func (c *prefixCache) unregister(b int32) {
	if c.node[b] != 0 {
		delete(c.entries, c.key[b])
		c.node[b] = 0
	}
}

// register records block b under key unless identical content is already
// registered; it returns the node of that content.
func (c *prefixCache) register(b int32, key blockKey) uint64 {
	if e, ok := c.entries[key]; ok {
		return e.node
	}
	c.nextNode++
	c.entries[key] = cacheEntry{block: b, node: c.nextNode}
	c.node[b], c.key[b] = c.nextNode, key
	return c.nextNode
}

// attachPrefix gives a sequence that holds nothing the registered blocks
// its input begins with (all but its last position, which must be
// computed for the step's output) and returns how many positions they
// cover. A step that wants a token at every position computes them all.
func (e *Engine) attachPrefix(s *sequence, ip *engine.Input) int {
	c := e.kv.cache
	if c == nil || s.n != 0 || len(s.blocks) != 0 || ip.Want&engine.WantAllTokens != 0 {
		return 0
	}
	c.looked += uint64(len(ip.Tokens))
	var key blockKey
	for (len(s.blocks)+1)*blockTokens < len(ip.Tokens) {
		at := len(s.blocks) * blockTokens
		copy(key.toks[:], ip.Tokens[at:at+blockTokens])
		ent, ok := c.entries[key]
		if !ok {
			break
		}
		e.kv.acquire(ent.block)
		s.blocks = append(s.blocks, ent.block)
		s.nodes = append(s.nodes, ent.node)
		key.parent = ent.node
	}
	k := len(s.blocks) * blockTokens
	s.n = k
	s.toks = append(s.toks[:0], ip.Tokens[:k]...)
	c.hit += uint64(k)
	return k
}

// remember records the tokens a step appended and registers the blocks
// it filled.
func (e *Engine) remember(in []engine.Input) {
	c := e.kv.cache
	if c == nil {
		return
	}
	for i, s := range e.batch {
		s.toks = append(s.toks, in[i].Tokens...)
		for (len(s.nodes)+1)*blockTokens <= s.n {
			b := len(s.nodes)
			key := blockKey{}
			if b > 0 {
				key.parent = s.nodes[b-1]
			}
			copy(key.toks[:], s.toks[b*blockTokens:(b+1)*blockTokens])
			s.nodes = append(s.nodes, c.register(s.blocks[b], key))
		}
	}
}

// truncateShared prepares s for keeping its first n positions: the block
// that will hold position n, when kept in part, must be s's own before the
// next step writes into it: a copy if another sequence holds it, else
// taken out of the cache. It fails (changing nothing) when a copy finds no
// memory.
func (e *Engine) truncateShared(s *sequence, n int) error {
	c := e.kv.cache
	if c == nil {
		return nil
	}
	b := n / blockTokens
	if n%blockTokens != 0 && b < len(s.blocks) {
		blk := s.blocks[b]
		switch {
		case e.kv.ref[blk] > 1:
			if e.kv.available() == 0 {
				return fmt.Errorf("cpu: truncating seq %d inside a shared KV block needs a block, none free: %w", s.id, engine.ErrOutOfMemory)
			}
			own := e.kv.alloc()
			copy(e.kv.blocks[own], e.kv.blocks[blk])
			e.kv.release(blk)
			s.blocks[b] = own
		default:
			c.unregister(blk)
		}
	}
	s.toks = s.toks[:min(len(s.toks), n)]
	s.nodes = s.nodes[:min(len(s.nodes), n/blockTokens)]
	return nil
}

// PrefixCacheStats reports the prefix cache's lookups: tokens of the
// sequences that looked (those starting empty) and tokens found cached,
// plus the cached blocks no sequence holds.
func (e *Engine) PrefixCacheStats() (looked, hit uint64, idleBlocks int) {
	c := e.kv.cache
	if c == nil {
		return 0, 0, 0
	}
	return c.looked, c.hit, c.idle
}
