package constrain

import "unicode/utf8"

// Vocab is a vocabulary prepared for masks: a byte trie of its tokens, and
// its "plain" tokens (text that can stand anywhere inside a string: no
// quote, backslash or control byte, whole UTF-8 characters) grouped by
// their length in characters, for the common case of a string being
// written. Build it once per tokenizer; it is read-only after.
type Vocab struct {
	n      int
	pieces []byte  // every token's bytes, back to back
	offs   []int32 // token id's bytes are pieces[offs[id]:offs[id+1]]
	all    trie    // every token with a piece
	other  trie    // the tokens that are not plain, or longer than maxPlainChars
	// plainUpTo[c] is the set of plain tokens of at most c characters,
	// c ≤ maxPlainChars (longer plain tokens, rare, are in other).
	plainUpTo [][]uint64
}

// maxPlainChars is the longest plain-token length tracked on its own.
const maxPlainChars = 16

// trie is a byte trie in arrays: node 0 is the root; each node has its
// first child and next sibling (-1: none), the byte on its edge, and the
// tokens that end at it.
type trie struct {
	first, next []int32
	edge        []byte
	end         []int32           // the token ending at a node (-1: none)
	more        map[int32][]int32 // further tokens with the same bytes (rare)
}

// NewVocab prepares n tokens whose bytes piece returns; tokens for which
// it returns nil (control tokens, the end of generation) are never
// allowed by a mask.
func NewVocab(n int, piece func(id int) []byte) *Vocab {
	v := &Vocab{n: n, all: newTrie(), other: newTrie(), offs: make([]int32, 1, n+1)}
	byChars := make([][]int32, maxPlainChars+1)
	for id := range n {
		p := piece(id)
		v.pieces = append(v.pieces, p...)
		v.offs = append(v.offs, int32(len(v.pieces)))
		if len(p) == 0 {
			continue
		}
		v.all.add(p, int32(id))
		if c, ok := plainChars(p); ok && c <= maxPlainChars {
			byChars[c] = append(byChars[c], int32(id))
		} else {
			v.other.add(p, int32(id))
		}
	}
	words := (n + 63) / 64
	acc := make([]uint64, words)
	for c := range maxPlainChars + 1 {
		for _, id := range byChars[c] {
			acc[id/64] |= 1 << (id % 64)
		}
		v.plainUpTo = append(v.plainUpTo, append([]uint64(nil), acc...))
	}
	return v
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.n }

// Piece returns token id's bytes (empty for a token never allowed or an id
// out of range).
func (v *Vocab) Piece(id int32) []byte {
	if id < 0 || int(id) >= v.n {
		return nil
	}
	return v.pieces[v.offs[id]:v.offs[id+1]]
}

// AdvanceToken feeds token id's bytes; false (and no change) if the
// automaton refuses them or the token has none.
func (m *Matcher) AdvanceToken(v *Vocab, id int32) bool {
	p := v.Piece(id)
	return len(p) > 0 && m.Advance(p)
}

// plainChars returns a piece's length in characters if it is plain.
func plainChars(p []byte) (int, bool) {
	if !utf8.Valid(p) {
		return 0, false
	}
	for _, b := range p {
		if b < 0x20 || b == '"' || b == '\\' {
			return 0, false
		}
	}
	return utf8.RuneCount(p), true
}

func newTrie() trie {
	return trie{first: []int32{-1}, next: []int32{-1}, edge: []byte{0}, end: []int32{-1}, more: map[int32][]int32{}}
}

// add inserts a token's bytes.
func (t *trie) add(p []byte, id int32) {
	at := int32(0)
	for _, b := range p {
		c := t.first[at]
		prev := int32(-1)
		for c >= 0 && t.edge[c] < b {
			prev, c = c, t.next[c]
		}
		if c < 0 || t.edge[c] != b {
			k := int32(len(t.edge))
			t.edge = append(t.edge, b)
			t.first = append(t.first, -1)
			t.next = append(t.next, c)
			t.end = append(t.end, -1)
			if prev < 0 {
				t.first[at] = k
			} else {
				t.next[prev] = k
			}
			c = k
		}
		at = c
	}
	if t.end[at] < 0 {
		t.end[at] = id
	} else {
		t.more[at] = append(t.more[at], id)
	}
}

// snapshot is what one byte can change in a Matcher: the top frames (a
// byte pops at most two and changes the one below), the depth and done.
type snapshot struct {
	fr    [4]frame
	base  int
	depth int
	done  bool
}

func (m *Matcher) save(s *snapshot) {
	s.base = max(0, m.depth-len(s.fr))
	copy(s.fr[:], m.stack[s.base:m.depth])
	s.depth, s.done = m.depth, m.done
}

func (m *Matcher) restore(s *snapshot) {
	copy(m.stack[s.base:s.depth], s.fr[:])
	m.depth, m.done = s.depth, s.done
}

// Allowed sets dst (a bitset of v.Size() bits, bit id%64 of word id/64) to
// the tokens whose bytes the automaton accepts next. The end of
// generation is not among them: it is allowed when Complete reports true.
// It does not allocate; the matcher is unchanged when it returns.
func (m *Matcher) Allowed(v *Vocab, dst []uint64) {
	clear(dst)
	if m.done || m.depth == 0 {
		return
	}
	t := &v.all
	if f := &m.stack[m.depth-1]; f.n.kind == kString && f.n.auto == nil && f.st == 1 && f.aux == 0 {
		// Inside a string, between characters: plain tokens that fit go
		// in at once; only the others need the walk.
		left := maxPlainChars
		if f.n.maxLen >= 0 {
			left = min(left, f.n.maxLen-int(f.idx))
		}
		copy(dst, v.plainUpTo[left])
		t = &v.other
	}
	m.walk(t, 0, dst)
}

// walk feeds each child edge of node and marks the tokens ending where
// the automaton still accepts.
func (m *Matcher) walk(t *trie, at int32, dst []uint64) {
	var s snapshot
	for c := t.first[at]; c >= 0; c = t.next[c] {
		m.save(&s)
		if m.feed(t.edge[c]) {
			if id := t.end[c]; id >= 0 {
				dst[id/64] |= 1 << (id % 64)
				for _, id := range t.more[c] {
					dst[id/64] |= 1 << (id % 64)
				}
			}
			if t.first[c] >= 0 {
				m.walk(t, c, dst)
			}
		}
		m.restore(&s)
	}
}
