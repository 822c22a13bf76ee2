package constrain

import (
	"fmt"
	"math/bits"
)

// firstBytes is the set of bytes a value of n can start with, for a node
// that is not a union (a union's set depends on its alternatives: see
// compiler.first).
func firstBytes(n *node) (set [4]uint64) {
	if n.auto != nil {
		return n.auto.first()
	}
	add := func(s string) {
		for i := range len(s) {
			set[s[i]/64] |= 1 << (s[i] % 64)
		}
	}
	switch n.kind {
	case kAny:
		add(`"{[tfn-0123456789`)
	case kObject, kAnyObject:
		add("{")
	case kArray:
		add("[")
	case kString:
		add(`"`)
	case kLiteral, kEnum:
		for _, l := range n.lits {
			add(string(l[:1]))
		}
	}
	return set
}

// pickTable maps each byte to the alternative whose first bytes (first[i]
// for alternative i) hold it, -1 for none.
func pickTable(first [][4]uint64) *[256]int8 {
	var t [256]int8
	for b := range t {
		t[b] = -1
	}
	for i, f := range first {
		for b := range 256 {
			if f[b/64]&(1<<(b%64)) != 0 {
				t[b] = int8(i)
			}
		}
	}
	return &t
}

// firstSets computes the first bytes of unions, each once.
type firstSets struct {
	at   map[*node]*path      // where each union is, for errors
	sets map[*node]*[4]uint64 // the unions done (nil: under way)
}

// checkUnions checks that the alternatives of each union start with
// different bytes, and gives each union its pick table.
func (c *compiler) checkUnions() error {
	fs := firstSets{at: make(map[*node]*path, len(c.unions)), sets: make(map[*node]*[4]uint64, len(c.unions))}
	for _, u := range c.unions {
		fs.at[u.n] = u.at
	}
	for _, u := range c.unions {
		first := make([][4]uint64, len(u.n.alts))
		var seen [4]uint64
		for i, a := range u.n.alts {
			f, err := fs.first(a)
			if err != nil {
				return err
			}
			for w := range seen {
				if both := seen[w] & f[w]; both != 0 {
					return fmt.Errorf("%w: %s: alternatives that can start with the same character (%d)", ErrUnsupported, u.at, w*64+bits.TrailingZeros64(both))
				}
				seen[w] |= f[w]
			}
			first[i] = f
		}
		u.n.pick = pickTable(first)
	}
	return nil
}

// first is the set of bytes a value of n can start with. A union that
// comes back to itself through its alternatives (by $ref) before any byte
// is refused: either its alternatives overlap or none can start at all.
func (fs *firstSets) first(n *node) ([4]uint64, error) {
	if n.kind != kUnion {
		return firstBytes(n), nil
	}
	if s, ok := fs.sets[n]; ok {
		if s == nil {
			return [4]uint64{}, fmt.Errorf("%w: %s: an alternative leads back through $ref to this choice before any character", ErrUnsupported, fs.at[n])
		}
		return *s, nil
	}
	fs.sets[n] = nil
	var set [4]uint64
	for _, a := range n.alts {
		f, err := fs.first(a)
		if err != nil {
			return set, err
		}
		for w := range set {
			set[w] |= f[w]
		}
	}
	fs.sets[n] = &set
	return set, nil
}

// measure sets each node's minDepth, the least nesting a complete value
// of it takes: 1 for a node that has a value with no child (a scalar, {},
// []); for an object with required properties, one more than the
// deepest of them takes; for an array with minItems, one more than its
// items take; for a union, the least of its alternatives. A node whose
// every value goes round a cycle stays unbounded. Nodes are settled in
// increasing minDepth, as in Dijkstra's algorithm generalised to these
// max and min rules (Knuth, 1977), so each edge is followed once: linear
// in the size of the graph.
func (c *compiler) measure() {
	parents := make(map[*node][]*node, len(c.nodes))
	waiting := make(map[*node]int, len(c.nodes)) // an object's or array's children not yet settled
	var level []*node
	for _, n := range c.nodes {
		n.minDepth = unbounded
		switch {
		case n.kind == kRef:
			continue
		case isChoice(n):
			for _, a := range n.alts {
				parents[a] = append(parents[a], n)
			}
			continue
		case n.kind == kObject:
			for _, p := range n.props {
				if p.required {
					parents[p.node] = append(parents[p.node], n)
					waiting[n]++
				}
			}
		case n.kind == kArray && n.minItems > 0:
			parents[n.items] = append(parents[n.items], n)
			waiting[n]++
		}
		if waiting[n] == 0 {
			level = append(level, n)
		}
	}
	for d := int32(1); len(level) > 0; d++ {
		var next []*node
		for i := 0; i < len(level); i++ { // level grows as unions settle at d
			n := level[i]
			if n.minDepth != unbounded {
				continue
			}
			n.minDepth = d
			for _, p := range parents[n] {
				switch {
				case p.minDepth != unbounded:
				case isChoice(p):
					level = append(level, p)
				default:
					if waiting[p]--; waiting[p] == 0 {
						next = append(next, p)
					}
				}
			}
		}
		level = next
	}
}

// isChoice reports whether a node's value is one of its alternatives'.
func isChoice(n *node) bool { return n.kind == kUnion || n.kind == kAny }
