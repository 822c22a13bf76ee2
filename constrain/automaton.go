package constrain

import (
	"errors"
	"fmt"
	"math"
)

// automaton is a deterministic automaton over the bytes of one scalar's
// JSON text: a number, or a string from its opening quote to its closing
// one. The strings that pattern, format and length keywords allow, and
// the numbers of a type with bounds or multipleOf, compile to one. State
// 0 is the start; every state can reach an accepting one (the others are
// pruned when it is made), so a Matcher that follows it never stands
// where nothing may follow. maxLen, when set, bounds the text's bytes:
// a byte is allowed only if an accepting state is still reachable within
// the bound (dist), so the bound is exact too.
type automaton struct {
	class  [256]uint8 // each byte's class
	nc     int        // classes
	next   []int32    // next[s*nc+class]: the state after the byte, -1 none
	accept []bool     // the text may end here
	done   []bool     // accepting, and nothing may follow
	dist   []int32    // the fewest bytes from the state to an accepting one
	maxLen int32      // the text's bytes at most (0: no bound)
}

// step returns the state after byte b from state s with n bytes of text
// so far, -1 if b may not come.
func (a *automaton) step(s int32, n int32, b byte) int32 {
	t := a.next[int(s)*a.nc+int(a.class[b])]
	if t >= 0 && a.maxLen > 0 && n+1+a.dist[t] > a.maxLen {
		return -1
	}
	return t
}

// first is the set of bytes a text may start with.
func (a *automaton) first() (set [4]uint64) {
	for b := range 256 {
		if a.step(0, 0, byte(b)) >= 0 {
			set[b/64] |= 1 << (b % 64)
		}
	}
	return set
}

// matches reports whether the automaton accepts text, within maxLen when
// bounded is set.
func (a *automaton) matches(text []byte, bounded bool) bool {
	if bounded && a.maxLen > 0 && len(text) > int(a.maxLen) {
		return false
	}
	s := int32(0)
	for _, b := range text {
		if s = a.next[int(s)*a.nc+int(a.class[b])]; s < 0 {
			return false
		}
	}
	return a.accept[s]
}

// byteClasses partitions the bytes into classes that every state of an
// automaton under construction treats alike.
type byteClasses struct {
	of   [256]uint8
	reps []byte // one byte of each class
}

// newClasses groups the bytes by key: bytes with equal keys share a class.
func newClasses(key func(b byte) int) byteClasses {
	var c byteClasses
	ids := map[int]uint8{}
	for b := range 256 {
		k := key(byte(b))
		id, ok := ids[k]
		if !ok {
			id = uint8(len(c.reps))
			ids[k] = id
			c.reps = append(c.reps, byte(b))
		}
		c.of[b] = id
	}
	return c
}

// rawDFA is an automaton under construction: every state reachable from
// state 0, dead ends included.
type rawDFA struct {
	cls    byteClasses
	next   []int32
	accept []bool
}

// budget bounds the automata of one schema: the states they explore and
// the work of building them.
type budget struct {
	states, work int
	unbounded    bool // the standard automata, built outside any schema
}

// budgetError is a budget exceeded: what, and its limit.
type budgetError struct {
	what  string
	limit int
}

func (e *budgetError) Error() string {
	return fmt.Sprintf("%s exceed the limit of %d", e.what, e.limit)
}

// state counts one new state.
func (b *budget) state() error {
	if b.states++; !b.unbounded && b.states > MaxAutomatonStates {
		return &budgetError{"its automata's states", MaxAutomatonStates}
	}
	return nil
}

// spend counts n units of work.
func (b *budget) spend(n int) error {
	if b.work += n; !b.unbounded && b.work > MaxAutomatonWork {
		return &budgetError{"the steps of building its automata", MaxAutomatonWork}
	}
	return nil
}

// explore builds the automaton of the states reachable from start, where
// step gives the state after a byte (false: the byte may not come) and
// accept tells the accepting states. States are keys compared by value.
func explore[K comparable](bud *budget, cls byteClasses, start K, step func(K, byte) (K, bool), accept func(K) bool) (*rawDFA, error) {
	ids := map[K]int32{start: 0}
	keys := []K{start}
	d := &rawDFA{cls: cls}
	if err := bud.state(); err != nil {
		return nil, err
	}
	for i := 0; i < len(keys); i++ {
		k := keys[i]
		d.accept = append(d.accept, accept(k))
		if err := bud.spend(len(cls.reps)); err != nil {
			return nil, err
		}
		for _, b := range cls.reps {
			t := int32(-1)
			if nk, ok := step(k, b); ok {
				id, seen := ids[nk]
				if !seen {
					if err := bud.state(); err != nil {
						return nil, err
					}
					id = int32(len(keys))
					ids[nk] = id
					keys = append(keys, nk)
				}
				t = id
			}
			d.next = append(d.next, t)
		}
	}
	return d, nil
}

// errEmpty is an automaton that accepts nothing (within its bound).
var errEmpty = errors.New("no value satisfies")

// finish prunes the states from which no accepting state can be reached,
// and computes each state's distance to acceptance and whether it is
// done. It returns errEmpty if the start is pruned or, with maxLen set,
// if no accepted text fits in maxLen bytes.
func finish(d *rawDFA, maxLen int) (*automaton, error) {
	nc := len(d.cls.reps)
	n := len(d.accept)
	rev := make([][]int32, n)
	for s := range n {
		for _, t := range d.next[s*nc : (s+1)*nc] {
			if t >= 0 {
				rev[t] = append(rev[t], int32(s))
			}
		}
	}
	dist := make([]int32, n)
	var queue []int32
	for s := range n {
		dist[s] = math.MaxInt32
		if d.accept[s] {
			dist[s] = 0
			queue = append(queue, int32(s))
		}
	}
	for i := 0; i < len(queue); i++ {
		t := queue[i]
		for _, s := range rev[t] {
			if dist[s] == math.MaxInt32 {
				dist[s] = dist[t] + 1
				queue = append(queue, s)
			}
		}
	}
	if dist[0] == math.MaxInt32 || maxLen > 0 && int(dist[0]) > maxLen {
		return nil, errEmpty
	}
	return prune(d, dist, maxLen), nil
}

// prune keeps the states with a finite distance, numbered in order (the
// start stays 0).
func prune(d *rawDFA, dist []int32, maxLen int) *automaton {
	nc := len(d.cls.reps)
	renum := make([]int32, len(dist))
	k := int32(0)
	for s, x := range dist {
		renum[s] = -1
		if x != math.MaxInt32 {
			renum[s] = k
			k++
		}
	}
	a := &automaton{class: d.cls.of, nc: nc, maxLen: int32(maxLen)}
	for s, x := range dist {
		if renum[s] < 0 {
			continue
		}
		live := false
		for _, t := range d.next[s*nc : (s+1)*nc] {
			if t >= 0 {
				t = renum[t]
			}
			live = live || t >= 0
			a.next = append(a.next, t)
		}
		a.accept = append(a.accept, d.accept[s])
		a.done = append(a.done, d.accept[s] && !live)
		a.dist = append(a.dist, x)
	}
	return a
}

// product is the automaton of the texts both a and b accept.
func product(bud *budget, a, b *automaton) (*rawDFA, error) {
	cls := newClasses(func(x byte) int { return int(a.class[x])<<8 | int(b.class[x]) })
	type pair struct{ x, y int32 }
	return explore(bud, cls, pair{}, func(p pair, c byte) (pair, bool) {
		x := a.next[int(p.x)*a.nc+int(a.class[c])]
		y := b.next[int(p.y)*b.nc+int(b.class[c])]
		return pair{x, y}, x >= 0 && y >= 0
	}, func(p pair) bool { return a.accept[p.x] && b.accept[p.y] })
}

// intersect is the automaton of the texts every one of parts accepts,
// within the tightest of their byte bounds.
func intersect(bud *budget, parts []*automaton) (*automaton, error) {
	a := parts[0]
	for _, b := range parts[1:] {
		d, err := product(bud, a, b)
		if err != nil {
			return nil, err
		}
		bound := a.maxLen
		if bound == 0 || b.maxLen > 0 && b.maxLen < bound {
			bound = b.maxLen
		}
		if a, err = finish(d, int(bound)); err != nil {
			return nil, err
		}
	}
	return a, nil
}
