package constrain

import "math/bits"

// MaxDepth bounds the nesting of the JSON a Matcher produces, counting
// each object and array and the scalar inside the innermost: at this
// depth no further object or array may open, and short of it only what
// can still be completed within it may open (a recursive schema's
// alternatives that end, an optional property left out). Compile refuses
// a schema whose every value nests deeper.
const MaxDepth = 32

// maxNumber bounds a number's length in bytes: a model cannot run a
// number on forever. The number automata allow a byte only if the
// number can still end within it.
const maxNumber = 24

// frame is one open value: its node, a state within it and two counters
// whose meaning depends on the kind (see step).
type frame struct {
	n   *node
	st  uint8
	idx int32  // object: property; array: items; string: characters; number, literal: bytes
	aux uint64 // literal: live candidates; string: pending UTF-8 or \u state
}

// Matcher follows one output through a Schema's automaton. The zero value
// is not usable: get one from Schema.Matcher. A Matcher is a value: copying
// it copies its state.
type Matcher struct {
	stack [MaxDepth]frame
	depth int
	done  bool // the top-level value is complete: only the end may follow
}

// Matcher returns a matcher at the start of the output.
func (s *Schema) Matcher() Matcher {
	var m Matcher
	m.stack[0] = frame{n: s.root}
	m.depth = 1
	return m
}

// result is what one byte did to the top frame.
type result uint8

const (
	rReject result = iota // the byte cannot come here
	rOK                   // consumed
	rDone                 // consumed, and the frame's value is complete
	rEnd                  // not consumed: the frame's value ended before it
	rAgain                // not consumed: frames changed, feed it to the new top
)

// Advance feeds the bytes of one token and reports whether the automaton
// accepts them; on false the matcher is unchanged.
func (m *Matcher) Advance(piece []byte) bool {
	if m.depth == 0 {
		return false // the zero Matcher: not from a Schema
	}
	save := *m
	for _, b := range piece {
		if !m.feed(b) {
			*m = save
			return false
		}
	}
	return true
}

// Complete reports whether the output so far is a whole value: the end of
// generation may come now.
func (m *Matcher) Complete() bool {
	if m.done {
		return true
	}
	if m.depth != 1 {
		return false
	}
	f := &m.stack[0]
	switch f.n.kind {
	case kNumber, kInteger:
		return f.n.auto.accept[f.aux]
	case kLiteral:
		return f.st == 1 && literalComplete(f) >= 0
	case kEnum:
		return f.st == 1 && enumComplete(f)
	case kCalls:
		return callsComplete(f)
	}
	return false
}

// feed consumes one byte, or reports false (the state is then undefined:
// the caller restores it).
func (m *Matcher) feed(b byte) bool {
	for {
		if m.done {
			return false
		}
		switch m.step(&m.stack[m.depth-1], b) {
		case rReject:
			return false
		case rOK:
			return true
		case rDone:
			m.pop()
			return true
		case rEnd:
			m.pop()
		case rAgain:
		}
	}
}

// push opens a child value; false if the child's least nesting does not
// fit under MaxDepth.
func (m *Matcher) push(f frame) bool {
	if int(f.n.minDepth) > MaxDepth-m.depth {
		return false
	}
	m.stack[m.depth] = f
	m.depth++
	return true
}

// pop closes the top value and tells its parent.
func (m *Matcher) pop() {
	m.depth--
	if m.depth == 0 {
		m.done = true
		return
	}
	child := &m.stack[m.depth]
	p := &m.stack[m.depth-1]
	switch p.n.kind {
	case kObject:
		if p.st == 1 || p.st == 5 { // a key
			p.idx, p.st = int32(literalComplete(child)), 2
		} else {
			p.st = 4
		}
	case kAnyObject:
		p.st++ // key (2) → expect ':' (3); value (4) → after value (5)
	case kArray:
		p.idx++
		p.st = 3
	}
}

// step feeds b to frame f (the top).
func (m *Matcher) step(f *frame, b byte) result {
	switch f.n.kind {
	case kAny, kUnion:
		return m.start(f, b)
	case kObject:
		return m.object(f, b)
	case kAnyObject:
		return m.anyObject(f, b)
	case kArray:
		return m.array(f, b)
	case kString:
		if f.n.auto != nil {
			return autoStep(f, b)
		}
		return stringStep(f, b)
	case kNumber, kInteger:
		return autoStep(f, b)
	case kLiteral:
		return literalStep(f, b)
	case kEnum:
		return enumStep(f, b)
	case kCalls:
		return m.callsStep(f, b)
	}
	return rReject
}

// start resolves an "any value" or a union by the value's first byte:
// the frame (the top) becomes the chosen alternative and b is fed to it.
// An alternative that cannot be completed within MaxDepth from here is
// not chosen.
func (m *Matcher) start(f *frame, b byte) result {
	i := f.n.pick[b]
	if i < 0 {
		return rReject
	}
	alt := f.n.alts[i]
	if int(alt.minDepth) > MaxDepth-m.depth+1 {
		return rReject
	}
	*f = frame{n: alt}
	return rAgain
}

// open consumes a container's opening byte (state 0 to 1).
func open(f *frame, b, want byte) result {
	if b != want {
		return rReject
	}
	f.st = 1
	return rOK
}

// object states: 0 expect '{'; 1 after '{' (a key or '}'); 2 after a
// key (idx: its property), expect ':'; 3 in the value; 4 after the value
// (',' or '}'); 5 after ',' (a key).
func (m *Matcher) object(f *frame, b byte) result {
	n := f.n
	switch f.st {
	case 0:
		return open(f, b, '{')
	case 1, 5:
		from := 0
		if f.st == 5 {
			from = int(f.idx) + 1
		}
		if b == '}' && f.st == 1 && !requiredFrom(n, from) {
			return rDone
		}
		live := keysFrom(n, from, MaxDepth-m.depth)
		if b != '"' || live == 0 || !m.push(frame{n: n.keys, st: 1, aux: live}) {
			return rReject
		}
		return rAgain
	case 2:
		if b != ':' || !m.push(frame{n: n.props[f.idx].node}) {
			return rReject
		}
		f.st = 3
		return rOK
	case 4:
		next := int(f.idx) + 1
		switch {
		case b == ',' && keysFrom(n, next, MaxDepth-m.depth) != 0:
			f.st = 5
			return rOK
		case b == '}' && !requiredFrom(n, next):
			return rDone
		}
	}
	return rReject
}

// keysFrom is the set of properties that may come next when the first
// not yet passed is from: every one up to and including the first
// required one, less the optional ones whose values take more nesting
// than room (a required one always fits: the object's own minDepth
// counted it).
func keysFrom(n *node, from, room int) uint64 {
	var live uint64
	for i := from; i < len(n.props); i++ {
		p := &n.props[i]
		if p.required {
			return live | 1<<i
		}
		if int(p.node.minDepth) <= room {
			live |= 1 << i
		}
	}
	return live
}

// requiredFrom reports whether a property at or after from is required.
func requiredFrom(n *node, from int) bool {
	for i := from; i < len(n.props); i++ {
		if n.props[i].required {
			return true
		}
	}
	return false
}

// anyObject states: 0 expect '{'; 1 after '{'; 2 in a key; 3 expect ':';
// 4 in a value; 5 after a value; 6 after ','.
func (m *Matcher) anyObject(f *frame, b byte) result {
	key, value := f.n.alts[0], f.n.alts[1]
	switch f.st {
	case 0:
		return open(f, b, '{')
	case 1, 6:
		if b == '}' && f.st == 1 {
			return rDone
		}
		if b != '"' || !m.push(frame{n: key}) {
			return rReject
		}
		f.st = 2
		return rAgain
	case 3:
		if b != ':' || !m.push(frame{n: value}) {
			return rReject
		}
		f.st = 4
		return rOK
	case 5:
		switch b {
		case ',':
			f.st = 6
			return rOK
		case '}':
			return rDone
		}
	}
	return rReject
}

// array states: 0 expect '['; 1 after '[' (an item or ']'); 2 in an item;
// 3 after an item (',' or ']'); 4 after ','. idx counts the items.
func (m *Matcher) array(f *frame, b byte) result {
	n := f.n
	switch f.st {
	case 0:
		return open(f, b, '[')
	case 1, 4:
		if b == ']' && f.st == 1 && n.minItems == 0 {
			return rDone
		}
		if n.maxItems >= 0 && int(f.idx) >= n.maxItems || !m.push(frame{n: n.items}) {
			return rReject
		}
		f.st = 2
		return rAgain
	case 3:
		switch {
		case b == ',' && (n.maxItems < 0 || int(f.idx) < n.maxItems):
			f.st = 4
			return rOK
		case b == ']' && int(f.idx) >= n.minItems:
			return rDone
		}
	}
	return rReject
}

// String states: 0 expect '"'; 1 in the string; 2 after '\'; 3 in a \u
// escape (aux: hex digits so far, bit 8: the first was d or D). In state
// 1, aux holds the UTF-8 continuation bytes still due (low byte) and the
// range of the next one (bits 8-15 low, 16-23 high).
func stringStep(f *frame, b byte) result {
	n := f.n
	full := n.maxLen >= 0 && int(f.idx) >= n.maxLen
	switch f.st {
	case 0:
		if b != '"' {
			return rReject
		}
		f.st = 1
		return rOK
	case 1:
		if due := f.aux & 0xff; due > 0 {
			lo, hi := byte(f.aux>>8), byte(f.aux>>16)
			if b < lo || b > hi {
				return rReject
			}
			f.aux = (due - 1) | 0x80<<8 | 0xbf<<16
			if due == 1 {
				f.aux = 0
			}
			return rOK
		}
		switch {
		case b == '"':
			if int(f.idx) < n.minLen {
				return rReject
			}
			return rDone
		case full || b < 0x20:
			return rReject
		case b == '\\':
			f.st = 2
			return rOK
		case b < 0x80:
			f.idx++
			return rOK
		}
		due, lo, hi := utf8Lead(b)
		if due == 0 {
			return rReject
		}
		f.aux = due | uint64(lo)<<8 | uint64(hi)<<16
		f.idx++
		return rOK
	case 2:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.st = 1
			f.idx++
			return rOK
		case 'u':
			f.st, f.aux = 3, 0
			return rOK
		}
		return rReject
	case 3:
		if !isHex(b) {
			return rReject
		}
		k := f.aux & 0xff
		switch {
		case k == 0 && (b == 'd' || b == 'D'):
			f.aux |= 1 << 8
		case k == 1 && f.aux&(1<<8) != 0 && (b >= '8' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'):
			return rReject // a surrogate: never valid on its own
		}
		f.aux++
		if f.aux&0xff == 4 {
			f.st, f.aux = 1, 0
			f.idx++
		}
		return rOK
	}
	return rReject
}

// utf8Lead returns the continuation bytes a lead byte calls for and the
// range of the first of them (0 continuation bytes: not a lead byte).
func utf8Lead(b byte) (due uint64, lo, hi byte) {
	switch {
	case b >= 0xc2 && b <= 0xdf:
		return 1, 0x80, 0xbf
	case b == 0xe0:
		return 2, 0xa0, 0xbf
	case b == 0xed:
		return 2, 0x80, 0x9f
	case b >= 0xe1 && b <= 0xef:
		return 2, 0x80, 0xbf
	case b == 0xf0:
		return 3, 0x90, 0xbf
	case b >= 0xf1 && b <= 0xf3:
		return 3, 0x80, 0xbf
	case b == 0xf4:
		return 3, 0x80, 0x8f
	}
	return 0, 0, 0
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// autoStep follows a scalar's automaton: aux is its state, idx the bytes
// so far. A byte the automaton has no way for ends the value if it may
// end there (a number is followed by what comes after it).
func autoStep(f *frame, b byte) result {
	a := f.n.auto
	s := int32(f.aux)
	if t := a.step(s, f.idx, b); t >= 0 {
		f.aux, f.idx = uint64(t), f.idx+1
		if a.done[t] {
			return rDone
		}
		return rOK
	}
	if a.accept[s] {
		return rEnd
	}
	return rReject
}

// Literal states: 0 not started (aux not yet set); 1 matching (aux: the
// candidates still live, idx: bytes matched).
func literalStep(f *frame, b byte) result {
	lits := f.n.lits
	if f.st == 0 {
		f.st, f.aux = 1, 1<<len(lits)-1
	}
	var next uint64
	for live := f.aux; live != 0; live &= live - 1 {
		i := bits.TrailingZeros64(live)
		if l := lits[i]; len(l) > int(f.idx) && l[f.idx] == b {
			next |= 1 << i
		}
	}
	if next == 0 {
		if literalComplete(f) >= 0 {
			return rEnd
		}
		return rReject
	}
	f.aux = next
	f.idx++
	for live := next; live != 0; live &= live - 1 {
		if len(lits[bits.TrailingZeros64(live)]) > int(f.idx) {
			return rOK
		}
	}
	return rDone
}

// literalComplete returns the live candidate matched in full, or -1.
func literalComplete(f *frame) int {
	for live := f.aux; live != 0; live &= live - 1 {
		i := bits.TrailingZeros64(live)
		if len(f.n.lits[i]) == int(f.idx) {
			return i
		}
	}
	return -1
}

// Enum states: 0 not started; 1 matching: idx bytes matched, and aux the
// range [lo, hi) of the sorted encodings that start with them (lo in the
// low 32 bits). In the range an encoding of exactly idx bytes, if any,
// comes first, then the others in the order of their byte idx.
func enumStep(f *frame, b byte) result {
	lits := f.n.lits
	if f.st == 0 {
		f.st, f.aux = 1, uint64(len(lits))<<32
	}
	lo, hi, k := int(uint32(f.aux)), int(f.aux>>32), int(f.idx)
	from := lo
	if len(lits[lo]) == k {
		from++
	}
	i := byteBound(lits, from, hi, k, int(b))
	j := byteBound(lits, i, hi, k, int(b)+1)
	if i == j {
		if len(lits[lo]) == k {
			return rEnd
		}
		return rReject
	}
	f.aux = uint64(i) | uint64(j)<<32
	f.idx++
	if j-i == 1 && len(lits[i]) == k+1 {
		return rDone
	}
	return rOK
}

// byteBound returns the first index in [i, hi) whose encoding's byte k is
// at least c (hi if none); every encoding there is longer than k bytes and
// they are sorted.
func byteBound(lits [][]byte, i, hi, k, c int) int {
	for i < hi {
		mid := int(uint(i+hi) >> 1)
		if int(lits[mid][k]) < c {
			i = mid + 1
		} else {
			hi = mid
		}
	}
	return i
}

// enumComplete reports whether an enum frame has matched an encoding in
// full.
func enumComplete(f *frame) bool {
	return len(f.n.lits[uint32(f.aux)]) == int(f.idx)
}
