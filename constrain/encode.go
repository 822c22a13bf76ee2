package constrain

import (
	"encoding/binary"
	"unicode/utf8"
)

// The JSON text of a string that a pattern, a format or a length
// automaton constrains writes each character one way: as itself in UTF-8,
// except the quote and the backslash (\" and \\) and the control
// characters (\b \t \n \f \r, the others \u00XX in either case). Any
// JSON parser reads these back as the characters the pattern matched.

// appendQuoted appends the JSON text of s as the automata write it.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r < 0x20:
			if e := shortEscape(r); e != 0 {
				dst = append(dst, '\\', e)
			} else {
				dst = append(dst, '\\', 'u', '0', '0', "01"[r>>4], "0123456789abcdef"[r&15])
			}
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}

// shortEscape returns the letter of a control character's two-byte
// escape, 0 if it has none.
func shortEscape(r rune) byte {
	switch r {
	case '\b':
		return 'b'
	case '\t':
		return 't'
	case '\n':
		return 'n'
	case '\f':
		return 'f'
	case '\r':
		return 'r'
	}
	return 0
}

// encodeClass calls emit with sequences of byte ranges that together
// spell the JSON encodings of the characters in class (pairs of rune
// bounds): each encoding is one sequence's bytes, one from each range.
func encodeClass(class []rune, emit func([][2]byte)) {
	var escaped [2][16]bool // the control characters written \u00XX, by nibbles
	for i := 0; i+1 < len(class); i += 2 {
		lo, hi := class[i], class[i+1]
		for r := lo; r <= min(hi, 0x1f); r++ {
			if e := shortEscape(r); e != 0 {
				emit([][2]byte{{'\\', '\\'}, {e, e}})
			} else {
				escaped[r>>4][r&15] = true
			}
		}
		lo = max(lo, 0x20)
		for _, sp := range []rune{'"', '\\'} {
			if lo <= sp && sp <= hi {
				utf8Seqs(lo, sp-1, emit)
				emit([][2]byte{{'\\', '\\'}, {byte(sp), byte(sp)}})
				lo = sp + 1
			}
		}
		utf8Seqs(lo, min(hi, 0xd7ff), emit)
		utf8Seqs(max(lo, 0xe000), hi, emit) // no surrogates
	}
	for h, lows := range escaped {
		for _, run := range hexRuns(lows) {
			emit([][2]byte{{'\\', '\\'}, {'u', 'u'}, {'0', '0'}, {'0', '0'}, {'0' + byte(h), '0' + byte(h)}, run})
		}
	}
}

// hexRuns returns the byte ranges of the hex digits of the marked
// nibbles, a to f in both cases.
func hexRuns(marked [16]bool) [][2]byte {
	var runs [][2]byte
	add := func(b byte) {
		if k := len(runs) - 1; k >= 0 && runs[k][1]+1 == b {
			runs[k][1] = b
			return
		}
		runs = append(runs, [2]byte{b, b})
	}
	for _, digits := range []string{"0123456789abcdef", "ABCDEF"} {
		for i := range len(digits) {
			if v := i + 16 - len(digits); marked[v] {
				add(digits[i])
			}
		}
	}
	return runs
}

// utf8Seqs calls emit with sequences of byte ranges whose products are
// exactly the UTF-8 encodings of the runes in [lo, hi] (no surrogates).
func utf8Seqs(lo, hi rune, emit func([][2]byte)) {
	if lo > hi {
		return
	}
	for _, m := range []rune{0x7f, 0x7ff, 0xffff} {
		if lo <= m && hi > m {
			utf8Seqs(lo, m, emit)
			utf8Seqs(m+1, hi, emit)
			return
		}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m == hi&^m {
			continue
		}
		if lo&m != 0 {
			utf8Seqs(lo, lo|m, emit)
			utf8Seqs(lo|m+1, hi, emit)
			return
		}
		if hi&m != m {
			utf8Seqs(lo, hi&^m-1, emit)
			utf8Seqs(hi&^m, hi, emit)
			return
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([][2]byte, n)
	for i := range n {
		seq[i] = [2]byte{a[i], b[i]}
	}
	emit(seq)
}

// determinize builds the string automaton of the NFA from start (free:
// its state after a match): state 0 expects the opening quote, state 1
// is after the closing one, which may come wherever the pattern has
// matched.
func (n *nfa) determinize(start, free int32) (*rawDFA, error) {
	x := &subsets{n: n, free: -1}
	x.mark[0], x.mark[1] = make([]uint32, len(n.st)), make([]uint32, len(n.st))
	var err error
	if x.freeSet, _, err = x.closure([]int32{free}, false); err != nil {
		return nil, err
	}
	x.free = free
	d := &rawDFA{cls: nfaClasses(n)}
	sets := [][]int32{nil, nil}
	accept := []bool{false, false}
	ids := map[string]int32{}
	intern := func(set []int32, acc bool) (int32, error) {
		key := make([]byte, 4*len(set)+1)
		for i, s := range set {
			binary.LittleEndian.PutUint32(key[4*i:], uint32(s))
		}
		if acc {
			key[len(key)-1] = 1
		}
		if id, ok := ids[string(key)]; ok {
			return id, nil
		}
		if err := n.bud.state(); err != nil {
			return 0, err
		}
		ids[string(key)] = int32(len(sets))
		sets, accept = append(sets, set), append(accept, acc)
		return int32(len(sets) - 1), nil
	}
	for i := 0; i < len(sets); i++ {
		d.accept = append(d.accept, i == 1)
		for _, b := range d.cls.reps {
			t, err := x.move(i, b, sets[i], accept[i], start, intern)
			if err != nil {
				return nil, err
			}
			d.next = append(d.next, t)
		}
	}
	return d, nil
}

// move returns the subset after byte b from subset i.
func (x *subsets) move(i int, b byte, set []int32, acc bool, start int32, intern func([]int32, bool) (int32, error)) (int32, error) {
	switch {
	case i == 0:
		if b != '"' {
			return -1, nil
		}
		next, acc, err := x.closure([]int32{start}, true)
		if err != nil {
			return 0, err
		}
		return intern(next, acc)
	case i == 1:
		return -1, nil
	case b == '"' && !x.inEscape(set):
		if acc {
			return 1, nil
		}
		return -1, nil
	}
	if err := x.n.bud.spend(len(set)); err != nil {
		return 0, err
	}
	var seeds []int32
	for _, s := range set {
		if st := &x.n.st[s]; st.lo <= b && b <= st.hi {
			seeds = append(seeds, st.out)
		}
	}
	if len(seeds) == 0 {
		return -1, nil
	}
	next, acc, err := x.closure(seeds, false)
	if err != nil || len(next) == 0 && !acc {
		return -1, err
	}
	return intern(next, acc)
}

// inEscape reports whether a subset is inside an escape (after its
// backslash), where a quote is the character escaped, not the end. The
// encodings are a prefix code, so the states of a subset are all inside
// one or none is.
func (x *subsets) inEscape(set []int32) bool {
	for _, s := range set {
		if st := &x.n.st[s]; st.lo <= '"' && '"' <= st.hi {
			return true
		}
	}
	return false
}

// nfaClasses are the byte classes of an NFA's byte ranges, the quote a
// class of its own.
func nfaClasses(n *nfa) byteClasses {
	var cut [257]bool
	cut['"'], cut['"'+1] = true, true
	for _, st := range n.st {
		if st.op == nByte {
			cut[st.lo], cut[int(st.hi)+1] = true, true
		}
	}
	var interval [256]int
	k := 0
	for b := 1; b < 256; b++ {
		if cut[b] {
			k++
		}
		interval[b] = k
	}
	return newClasses(func(b byte) int { return interval[b] })
}
