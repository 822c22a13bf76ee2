package constrain

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
)

// A pattern compiles to an automaton over the string's JSON text in
// three steps: regexp/syntax parses it (RE2 syntax, as Go's regexp: the
// ECMA-262 subset schemas use, with \uXXXX escapes read as \x{XXXX}); a
// Thompson NFA over bytes is built from the parsed form, each character
// class expanded to the JSON encodings of its characters (see
// appendQuoted); subset construction makes it deterministic. JSON Schema
// patterns are not anchored: the NFA is .*(pattern).*, with ^ and $
// (\A, \z) true only at the string's start and end.

// nfa operations.
const (
	nByte  uint8 = iota // consume a byte in [lo, hi], go to out
	nSplit              // go to out and to out1
	nBegin              // go to out, at the string's start only
	nEnd                // go to out, at its end only
	nMatch              // the pattern matched
	nFail               // nothing
)

type nstate struct {
	op, lo, hi uint8
	out, out1  int32
}

// nfa is a Thompson automaton under construction.
type nfa struct {
	st  []nstate
	bud *budget
}

// add adds a state. A state costs 4 steps of work, for its memory: an
// NFA takes at most a quarter of MaxAutomatonWork states (3 MiB).
func (n *nfa) add(s nstate) (int32, error) {
	if err := n.bud.spend(4); err != nil {
		return 0, err
	}
	n.st = append(n.st, s)
	return int32(len(n.st) - 1), nil
}

// compilePattern parses a pattern and builds its string automaton.
func compilePattern(bud *budget, pattern string) (*rawDFA, error) {
	re, err := syntax.Parse(ecmaEscapes(pattern), syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnsupported, pattern, err)
	}
	re = re.Simplify()
	if op := unsupportedOp(re); op != "" {
		return nil, fmt.Errorf("%w: %q: %s is not supported", ErrUnsupported, pattern, op)
	}
	n := &nfa{bud: bud}
	anyChar := []rune{0, unicode.MaxRune}
	match, err := n.add(nstate{op: nMatch})
	if err != nil {
		return nil, err
	}
	free := match
	if !anchoredEnd(re) {
		if free, err = n.loop(anyChar, match); err != nil { // what follows a match
			return nil, err
		}
	}
	body, err := n.build(re, free)
	if err != nil {
		return nil, err
	}
	start := body
	if !anchoredStart(re) {
		if start, err = n.loop(anyChar, body); err != nil { // what comes before a match
			return nil, err
		}
	}
	return n.determinize(start, free)
}

// anchoredEnd reports whether re matches only at the string's end (it
// ends with $ or \z): then no characters may follow it.
func anchoredEnd(re *syntax.Regexp) bool {
	for re.Op == syntax.OpConcat && len(re.Sub) > 0 || re.Op == syntax.OpCapture {
		re = re.Sub[len(re.Sub)-1]
	}
	return re.Op == syntax.OpEndText
}

// anchoredStart reports whether re matches only at the string's start
// (it begins with ^ or \A): then no characters may come before it.
func anchoredStart(re *syntax.Regexp) bool {
	for re.Op == syntax.OpConcat && len(re.Sub) > 0 || re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re.Op == syntax.OpBeginText
}

// ecmaEscapes rewrites ECMA-262's \uXXXX escapes as RE2's \x{XXXX}.
func ecmaEscapes(p string) string {
	if !strings.Contains(p, `\u`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+6 <= len(p) && p[i+1] == 'u' && isHexString(p[i+2:i+6]) {
			b.WriteString(`\x{` + p[i+2:i+6] + `}`)
			i += 5
			continue
		}
		b.WriteByte(p[i])
		if p[i] == '\\' && i+1 < len(p) {
			i++
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

func isHexString(s string) bool {
	for i := range len(s) {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// unsupportedOp names an operator the automaton does not implement: line
// anchors ((?m)^, (?m)$) and word boundaries.
func unsupportedOp(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine:
		return "a line anchor ((?m)^ or (?m)$)"
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return `a word boundary (\b or \B)`
	}
	for _, sub := range re.Sub {
		if op := unsupportedOp(sub); op != "" {
			return op
		}
	}
	return ""
}

// loop adds a state that goes round any number of characters of class
// and then to next.
func (n *nfa) loop(class []rune, next int32) (int32, error) {
	s, err := n.add(nstate{op: nSplit, out1: next})
	if err != nil {
		return 0, err
	}
	c, err := n.class(class, s)
	n.st[s].out = c
	return s, err
}

// build adds the states of re, which go to next once it has matched, and
// returns its entry.
func (n *nfa) build(re *syntax.Regexp, next int32) (int32, error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return n.add(nstate{op: nFail})
	case syntax.OpEmptyMatch:
		return next, nil
	case syntax.OpLiteral:
		var err error
		for i := len(re.Rune) - 1; i >= 0 && err == nil; i-- {
			next, err = n.class(literalClass(re.Rune[i], re.Flags&syntax.FoldCase != 0), next)
		}
		return next, err
	case syntax.OpCharClass:
		return n.class(re.Rune, next)
	case syntax.OpAnyCharNotNL:
		return n.class([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}, next)
	case syntax.OpAnyChar:
		return n.class([]rune{0, unicode.MaxRune}, next)
	case syntax.OpBeginText:
		return n.add(nstate{op: nBegin, out: next})
	case syntax.OpEndText:
		return n.add(nstate{op: nEnd, out: next})
	case syntax.OpCapture:
		return n.build(re.Sub[0], next)
	case syntax.OpStar, syntax.OpPlus:
		s, err := n.add(nstate{op: nSplit, out1: next})
		if err != nil {
			return 0, err
		}
		body, err := n.build(re.Sub[0], s)
		n.st[s].out = body
		if re.Op == syntax.OpStar {
			return s, err
		}
		return body, err
	case syntax.OpQuest:
		body, err := n.build(re.Sub[0], next)
		if err != nil {
			return 0, err
		}
		return n.add(nstate{op: nSplit, out: body, out1: next})
	}
	return n.buildList(re, next)
}

// buildList builds a concatenation or an alternation.
func (n *nfa) buildList(re *syntax.Regexp, next int32) (int32, error) {
	var err error
	switch re.Op {
	case syntax.OpConcat:
		for i := len(re.Sub) - 1; i >= 0 && err == nil; i-- {
			next, err = n.build(re.Sub[i], next)
		}
		return next, err
	case syntax.OpAlternate:
		entry := int32(-1)
		for i := len(re.Sub) - 1; i >= 0; i-- {
			alt, err := n.build(re.Sub[i], next)
			if err != nil {
				return 0, err
			}
			if entry < 0 {
				entry = alt
			} else if entry, err = n.add(nstate{op: nSplit, out: alt, out1: entry}); err != nil {
				return 0, err
			}
		}
		return entry, nil
	}
	return 0, fmt.Errorf("%w: the regular expression operator %v", ErrUnsupported, re.Op)
}

// literalClass is the class of one literal character: itself, and its
// case variants when the match ignores case.
func literalClass(r rune, fold bool) []rune {
	class := []rune{r, r}
	if fold {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			class = append(class, f, f)
		}
	}
	return class
}

// class adds states that consume one character of class (ranges, as
// regexp/syntax gives them) in its JSON encoding and go to next.
func (n *nfa) class(class []rune, next int32) (int32, error) {
	entry := int32(-1)
	var err error
	encodeClass(class, func(seq [][2]byte) {
		if err != nil {
			return
		}
		s := next
		for j := len(seq) - 1; j >= 0 && err == nil; j-- {
			s, err = n.add(nstate{op: nByte, lo: seq[j][0], hi: seq[j][1], out: s})
		}
		if err == nil && entry >= 0 {
			s, err = n.add(nstate{op: nSplit, out: s, out1: entry})
		}
		entry = s
	})
	if err == nil && entry < 0 {
		return n.add(nstate{op: nFail})
	}
	return entry, err
}

// subsets is the state of a subset construction: the visit marks of
// each NFA state in each mode (free, or after an end anchor: then it may
// only reach nMatch).
type subsets struct {
	n        *nfa
	mark     [2][]uint32
	gen      uint32
	stack    []int32
	free     int32   // the state after a match: any characters, then the end
	freeSet  []int32 // its closure
	sawFree  bool
	accepted bool
}

// closure returns the byte states reachable from seeds without consuming
// a byte (sorted), and reports whether the pattern may end there. A set
// that reached the free state is that state's set: after a match any
// characters may come.
func (x *subsets) closure(seeds []int32, atStart bool) ([]int32, bool, error) {
	x.gen++
	x.sawFree, x.accepted = false, false
	var set []int32
	x.stack = x.stack[:0]
	for _, s := range seeds {
		x.stack = append(x.stack, s<<1)
	}
	for len(x.stack) > 0 {
		e := x.stack[len(x.stack)-1]
		x.stack = x.stack[:len(x.stack)-1]
		s, end := e>>1, e&1
		if x.mark[end][s] == x.gen {
			continue
		}
		x.mark[end][s] = x.gen
		if err := x.n.bud.spend(1); err != nil {
			return nil, false, err
		}
		set = x.visit(s, end, atStart, set)
	}
	if x.sawFree {
		return x.freeSet, true, nil
	}
	slices.Sort(set)
	return set, x.accepted, nil
}

// visit handles one state of a closure.
func (x *subsets) visit(s, end int32, atStart bool, set []int32) []int32 {
	st := &x.n.st[s]
	if s == x.free && end == 0 {
		x.sawFree = true
	}
	switch st.op {
	case nByte:
		if end == 0 {
			set = append(set, s)
		}
	case nSplit:
		x.stack = append(x.stack, st.out<<1|end, st.out1<<1|end)
	case nBegin:
		if atStart {
			x.stack = append(x.stack, st.out<<1|end)
		}
	case nEnd:
		x.stack = append(x.stack, st.out<<1|1)
	case nMatch:
		x.accepted = true
	}
	return set
}
