package constrain

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A number compiles to an automaton over its text, built by exploring
// the states of a reader that keeps, besides where it is in the grammar,
// how the digits so far compare with each bound and their remainder
// modulo multipleOf's digits. The text is canonical: no leading zeros,
// no negative zero (-0, -0.0, -0e1), an integer without fraction or
// exponent, and a number with bounds or multipleOf without exponent;
// every value has such a text, and the bounds and multipleOf are then
// exact, in decimal arithmetic.

// decimal is an exact nonnegative decimal: its integer digits without
// leading zeros ("" for none) and its fraction digits without trailing
// zeros.
type decimal struct{ intd, frac string }

// signed is an exact decimal with its sign; huge: at least
// 10^MaxDecimalDigits in magnitude (intd unset), beyond every number the
// automaton writes.
type signed struct {
	neg, huge bool
	d         decimal
}

// errPrecision is a decimal with more than MaxDecimalDigits fraction
// digits.
var errPrecision = fmt.Errorf("more than %d digits after the decimal point", MaxDecimalDigits)

// parseDecimal reads a JSON number exactly.
func parseDecimal(num string) (signed, error) {
	var v signed
	s := num
	if strings.HasPrefix(s, "-") {
		v.neg, s = true, s[1:]
	}
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		switch {
		case err == nil && e >= -1e6 && e <= 1e6:
		case strings.HasPrefix(s[i+1:], "-"):
			e = -1e6 - 1
		default:
			e = 1e6 + 1
		}
		exp, s = e, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	all := intPart + frac
	point := len(intPart) + exp // where the point is in all
	trimmed := strings.TrimLeft(all, "0")
	point -= len(all) - len(trimmed)
	all = strings.TrimRight(trimmed, "0")
	switch {
	case all == "":
		return signed{}, nil // zero, of either sign
	case point > MaxDecimalDigits:
		v.huge = true
		return v, nil
	case len(all)-point > MaxDecimalDigits:
		return v, errPrecision
	case point >= len(all):
		v.d.intd = all + strings.Repeat("0", point-len(all))
	case point <= 0:
		v.d.frac = strings.Repeat("0", -point) + all
	default:
		v.d.intd, v.d.frac = all[:point], all[point:]
	}
	return v, nil
}

// cmpMag compares two magnitudes.
func cmpMag(a, b signed) int {
	switch {
	case a.huge || b.huge:
		return boolInt(a.huge) - boolInt(b.huge)
	case len(a.d.intd) != len(b.d.intd):
		return len(a.d.intd) - len(b.d.intd)
	case a.d.intd != b.d.intd:
		return strings.Compare(a.d.intd, b.d.intd)
	}
	return strings.Compare(a.d.frac, b.d.frac)
}

// cmpSigned compares two decimals.
func cmpSigned(a, b signed) int {
	if a.neg != b.neg {
		return boolInt(b.neg) - boolInt(a.neg)
	}
	if a.neg {
		return -cmpMag(a, b)
	}
	return cmpMag(a, b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// magBound is a bound on a number's magnitude: at least d (a lower
// bound) or at most d (an upper one), or strictly so.
type magBound struct {
	d      decimal
	strict bool
}

// cmpState is how the digits read so far compare with a bound's: while
// reading the integer part, pos digits read (capped one past the
// bound's) and c the comparison of those with the bound's first pos
// digits; in the fraction, pos fraction digits matched so far and c the
// comparison of the whole so far (-1, 0, 1).
type cmpState struct {
	pos  int16
	c    int8
	frac bool
}

func cmpByte(a, b byte) int8 { return int8(boolInt(a > b) - boolInt(a < b)) }

// intDigit reads an integer digit.
func (m *magBound) intDigit(s cmpState, d byte) cmpState {
	l := len(m.d.intd)
	if int(s.pos) >= l {
		return cmpState{pos: int16(l + 1)} // longer: greater, whatever the digits
	}
	if s.c == 0 {
		s.c = cmpByte(d, m.d.intd[s.pos])
	}
	s.pos++
	return s
}

// endInt ends the integer part.
func (m *magBound) endInt(s cmpState) cmpState {
	if s.frac {
		return s
	}
	l := len(m.d.intd)
	switch {
	case int(s.pos) < l:
		s.c = -1
	case int(s.pos) > l:
		s.c = 1
	}
	return cmpState{c: s.c, frac: true}
}

// fracDigit reads a fraction digit.
func (m *magBound) fracDigit(s cmpState, d byte) cmpState {
	if s.c != 0 {
		return cmpState{c: s.c, frac: true}
	}
	want := byte('0')
	if int(s.pos) < len(m.d.frac) {
		want = m.d.frac[s.pos]
		s.pos++
	}
	if s.c = cmpByte(d, want); s.c != 0 {
		s.pos = 0
	}
	return s
}

// holds reports whether a number that ends in state s meets the bound.
func (m *magBound) holds(s cmpState, upper bool) bool {
	s = m.endInt(s)
	c := s.c
	if c == 0 && int(s.pos) < len(m.d.frac) {
		c = -1 // the bound has nonzero digits still to come
	}
	if upper {
		return c < 0 || c == 0 && !m.strict
	}
	return c > 0 || c == 0 && !m.strict
}

// magBranch is what the bounds ask of the magnitude of the numbers of
// one sign.
type magBranch struct {
	lo, hi *magBound
	empty  bool
}

// numSpec is a number type's constraints.
type numSpec struct {
	integer bool
	plain   bool         // no bounds and no multipleOf: exponents allowed
	branch  [2]magBranch // for numbers at least zero, and below it
	mulP    int64        // multipleOf is mulP × 10^-mulK (mulP 0: none)
	mulK    int
	pow     []int64 // pow[i] = 10^i mod mulP
}

// bound is a signed bound from the schema.
type bound struct {
	v      signed
	strict bool
}

// branches sets what the bounds (nil: none) ask of each sign.
func (ns *numSpec) branches(lo, hi *bound) {
	pos, neg := &ns.branch[0], &ns.branch[1]
	if lo != nil {
		switch {
		case !lo.v.neg && lo.v.huge:
			pos.empty, neg.empty = true, true
		case !lo.v.neg:
			pos.lo, neg.empty = &magBound{lo.v.d, lo.strict}, true // -y ≥ lo ≥ 0 fails for y > 0
		case !lo.v.huge:
			neg.hi = &magBound{lo.v.d, lo.strict} // -y ≥ lo: y ≤ |lo|
		}
	}
	if hi != nil {
		switch {
		case hi.v.neg && hi.v.huge:
			pos.empty, neg.empty = true, true
		case hi.v.neg:
			pos.empty, neg.lo = true, &magBound{hi.v.d, hi.strict} // -y ≤ hi: y ≥ |hi|
		case !hi.v.huge:
			pos.hi = &magBound{hi.v.d, hi.strict}
		}
	}
}

// numKey is a state of the number reader. Phases: 0 start; 1 after '-';
// 2 after a leading 0; 3 in the integer digits; 4 after '.'; 5 in the
// fraction; 6 after 'e'; 7 after the exponent's sign; 8 in the exponent.
type numKey struct {
	phase   uint8
	neg, nz bool // nz: a nonzero digit was read
	lo, hi  cmpState
	rem     int32 // the digits so far modulo mulP
	j       int16 // fraction digits (with multipleOf)
}

// step reads one byte.
func (ns *numSpec) step(k numKey, b byte) (numKey, bool) {
	exp := (b == 'e' || b == 'E') && ns.plain && !ns.integer && (!k.neg || k.nz)
	switch {
	case k.phase == 0 && b == '-':
		return numKey{phase: 1, neg: true}, !ns.branch[1].empty
	case k.phase == 0 && ns.branch[0].empty:
		return k, false
	case k.phase <= 1 && isDigit(b), k.phase == 3 && isDigit(b):
		return ns.intDigit(k, b), true
	case (k.phase == 2 || k.phase == 3) && b == '.' && !ns.integer:
		br := &ns.branch[boolInt(k.neg)]
		if br.lo != nil {
			k.lo = br.lo.endInt(k.lo)
		}
		if br.hi != nil {
			k.hi = br.hi.endInt(k.hi)
		}
		k.phase = 4
		return k, true
	case (k.phase == 4 || k.phase == 5) && isDigit(b):
		return ns.fracDigit(k, b)
	case (k.phase == 2 || k.phase == 3 || k.phase == 5) && exp:
		k.phase = 6
		return k, true
	case k.phase == 6 && (b == '+' || b == '-'):
		k.phase = 7
		return k, true
	case k.phase >= 6 && isDigit(b):
		k.phase = 8
		return k, true
	}
	return k, false
}

// intDigit reads a digit of the integer part.
func (ns *numSpec) intDigit(k numKey, d byte) numKey {
	if k.phase <= 1 && d == '0' {
		k.phase = 2 // the integer part is 0: no digits to compare
		return k
	}
	k.phase = 3
	k.nz = k.nz || d != '0'
	br := &ns.branch[boolInt(k.neg)]
	if br.lo != nil {
		k.lo = br.lo.intDigit(k.lo, d)
	}
	if br.hi != nil {
		k.hi = br.hi.intDigit(k.hi, d)
	}
	if ns.mulP > 0 {
		k.rem = int32((int64(k.rem)*10 + int64(d-'0')) % ns.mulP)
	}
	return k
}

// fracDigit reads a digit of the fraction.
func (ns *numSpec) fracDigit(k numKey, d byte) (numKey, bool) {
	if ns.mulP > 0 {
		if int(k.j) >= ns.mulK {
			return k, false // not a multiple, whatever follows
		}
		k.j++
		k.rem = int32((int64(k.rem)*10 + int64(d-'0')) % ns.mulP)
	}
	k.phase = 5
	k.nz = k.nz || d != '0'
	br := &ns.branch[boolInt(k.neg)]
	if br.lo != nil {
		k.lo = br.lo.fracDigit(k.lo, d)
	}
	if br.hi != nil {
		k.hi = br.hi.fracDigit(k.hi, d)
	}
	return k, true
}

// accept reports whether a number may end in state k.
func (ns *numSpec) accept(k numKey) bool {
	switch {
	case k.phase != 2 && k.phase != 3 && k.phase != 5 && k.phase != 8:
		return false
	case k.neg && !k.nz:
		return false // negative zero
	}
	br := &ns.branch[boolInt(k.neg)]
	if br.lo != nil && !br.lo.holds(k.lo, false) || br.hi != nil && !br.hi.holds(k.hi, true) {
		return false
	}
	return ns.mulP == 0 || int64(k.rem)*ns.pow[ns.mulK-int(k.j)]%ns.mulP == 0
}

// numberClasses are the bytes a number reader tells apart.
func numberClasses() byteClasses {
	return newClasses(func(b byte) int {
		if strings.IndexByte("0123456789-+.eE", b) >= 0 {
			return int(b)
		}
		return -1
	})
}

// numberAuto builds the automaton of the numbers spec allows.
func numberAuto(bud *budget, ns *numSpec) (*automaton, error) {
	raw, err := explore(bud, numberClasses(), numKey{}, ns.step, ns.accept)
	if err != nil {
		return nil, err
	}
	return finish(raw, maxNumber)
}

// numericKeywords are the keywords of numbers.
var numericKeywords = []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf"}

// hasNumeric reports whether s has a numeric keyword.
func hasNumeric(s map[string]any) bool {
	for _, kw := range numericKeywords {
		if _, ok := s[kw]; ok {
			return true
		}
	}
	return false
}

// numberNode compiles a number or integer type with its keywords.
func (c *compiler) numberNode(integer bool, s map[string]any, at *path) (*node, error) {
	if !integer && !hasNumeric(s) {
		return c.std.num, nil
	}
	a, err := c.numberAutoFor(integer, s, at)
	if err != nil {
		return nil, err
	}
	k := kNumber
	if integer {
		k = kInteger
	}
	return c.add(&node{kind: k, auto: a})
}

// numberAutoFor returns the automaton of a number or integer type with
// its keywords, built once per schema.
func (c *compiler) numberAutoFor(integer bool, s map[string]any, at *path) (*automaton, error) {
	key := fmt.Sprint("n", integer)
	for _, kw := range numericKeywords {
		if v, ok := s[kw]; ok {
			key += fmt.Sprintf("\x00%s=%v", kw, v)
		}
	}
	if a, ok := c.autos[key]; ok {
		return a, nil
	}
	ns, kws, err := numSpecOf(s, integer, at)
	if err != nil {
		return nil, err
	}
	a, err := numberAuto(&c.bud, ns)
	if errors.Is(err, errEmpty) {
		return nil, fmt.Errorf("%w: %s: no number of at most %d characters satisfies %s", ErrUnsupported, at, maxNumber, strings.Join(kws, ", "))
	}
	if err != nil {
		return nil, autoError(err, at, kws...)
	}
	c.autos[key] = a
	return a, nil
}

// numSpecOf reads a number type's keywords. It returns the keywords it
// found, for errors.
func numSpecOf(s map[string]any, integer bool, at *path) (*numSpec, []string, error) {
	ns := &numSpec{integer: integer}
	var found []string
	for _, kw := range numericKeywords {
		if _, ok := s[kw]; ok {
			found = append(found, kw)
		}
	}
	lo, err := readBound(s, "minimum", "exclusiveMinimum", 1, at)
	if err != nil {
		return nil, nil, err
	}
	hi, err := readBound(s, "maximum", "exclusiveMaximum", -1, at)
	if err != nil {
		return nil, nil, err
	}
	ns.branches(lo, hi)
	if err := ns.multipleOf(s, at); err != nil {
		return nil, nil, err
	}
	ns.plain = lo == nil && hi == nil && ns.mulP == 0
	if len(found) == 0 {
		found = []string{"type"}
	}
	return ns, found, nil
}

// readBound reads a bound and its exclusive form (a number, or in the
// draft-04 style a boolean that makes the bound exclusive). Of two, it
// keeps the tighter: the greater lower bound (tighter 1) or the smaller
// upper one (-1).
func readBound(s map[string]any, key, exclKey string, tighter int, at *path) (*bound, error) {
	var b *bound
	if v, ok := s[key]; ok {
		x, err := schemaNumber(v, at, key)
		if err != nil {
			return nil, err
		}
		b = &bound{v: x}
	}
	switch e := s[exclKey].(type) {
	case nil:
	case bool:
		if e && b == nil {
			return nil, fmt.Errorf("constrain: %s/%s: true without %s", at, exclKey, key)
		}
		if e {
			b.strict = true
		}
	default:
		x, err := schemaNumber(e, at, exclKey)
		if err != nil {
			return nil, err
		}
		if c := cmpSigned(x, b.orZero()) * tighter; b == nil || c >= 0 {
			b = &bound{v: x, strict: true}
		}
	}
	return b, nil
}

// orZero is b's value (zero for none).
func (b *bound) orZero() signed {
	if b == nil {
		return signed{}
	}
	return b.v
}

// schemaNumber reads a numeric keyword's value exactly.
func schemaNumber(v any, at *path, key string) (signed, error) {
	num, ok := v.(json.Number)
	if !ok {
		return signed{}, fmt.Errorf("constrain: %s/%s: want a number", at, key)
	}
	x, err := parseDecimal(string(num))
	if err != nil {
		return signed{}, fmt.Errorf("%w: %s/%s: %s has %w", ErrLimit, at, key, num, err)
	}
	return x, nil
}

// multipleOf reads the multipleOf keyword: mulP × 10^-mulK, mulP at most
// MaxMultipleOf.
func (ns *numSpec) multipleOf(s map[string]any, at *path) error {
	v, ok := s["multipleOf"]
	if !ok {
		return nil
	}
	x, err := schemaNumber(v, at, "multipleOf")
	if err != nil {
		return err
	}
	if x.neg || !x.huge && x.d == (decimal{}) {
		return fmt.Errorf("constrain: %s/multipleOf: want a number above 0", at)
	}
	digits := strings.TrimLeft(x.d.intd+x.d.frac, "0")
	p, err := strconv.ParseInt(digits, 10, 64)
	if x.huge || err != nil || p > MaxMultipleOf {
		return fmt.Errorf("%w: %s/multipleOf: %v: its significant digits exceed the limit of %d", ErrLimit, at, v, MaxMultipleOf)
	}
	ns.mulP, ns.mulK = p, len(x.d.frac)
	ns.pow = make([]int64, ns.mulK+1)
	ns.pow[0] = 1 % p
	for i := 1; i <= ns.mulK; i++ {
		ns.pow[i] = ns.pow[i-1] * 10 % p
	}
	return nil
}

// plainNumbers builds the automaton of unconstrained numbers.
func plainNumbers() *automaton {
	a, err := numberAuto(&budget{unbounded: true}, &numSpec{plain: true})
	if err != nil {
		panic(err) // a fixed grammar: cannot fail
	}
	return a
}

// canonical is the text the number automata write for x.
func (x signed) canonical() string {
	s := x.d.intd
	if s == "" {
		s = "0"
	}
	if x.d.frac != "" {
		s += "." + x.d.frac
	}
	if x.neg {
		s = "-" + s
	}
	return s
}
