package chat

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// privateBase is the first placeholder rune: supplementary private use
// area A, which no tokenizer gives meaning to.
const privateBase = 0xF0000

// escaper keeps message content away from special-token parsing. Before
// rendering, every control-token text in a message (and every rune of the
// placeholder range, so that none is mistaken for a placeholder) is
// replaced by one placeholder rune; string operations of the template
// (trim, split, startswith, ...) see the same characters elsewhere. After
// rendering, control-token texts left in the output are the template's
// own and become Special segments, and placeholders turn back into their
// text inside Text segments.
type escaper struct {
	specials []string // longest first
	first    [256]bool
	lits     []string // the text each placeholder stands for
	index    map[string]rune
}

func newEscaper(specials []string) *escaper {
	e := &escaper{index: map[string]rune{}}
	for _, s := range specials {
		if s != "" {
			e.specials = append(e.specials, s)
			e.first[s[0]] = true
		}
	}
	slices.SortStableFunc(e.specials, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return e
}

// special returns the length of the longest control-token text at the
// start of s (0 if none).
func (e *escaper) special(s string) int {
	if s == "" || !e.first[s[0]] {
		return 0
	}
	for _, sp := range e.specials {
		if strings.HasPrefix(s, sp) {
			return len(sp)
		}
	}
	return 0
}

func (e *escaper) placeholder(lit string) rune {
	if r, ok := e.index[lit]; ok {
		return r
	}
	r := rune(privateBase + len(e.lits))
	e.lits = append(e.lits, lit)
	e.index[lit] = r
	return r
}

// escape replaces control-token texts and placeholder-range runes in s.
func (e *escaper) escape(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is written or escaped
	for i := 0; i < len(s); {
		n := e.special(s[i:])
		if n == 0 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r < privateBase {
				i += size
				continue
			}
			n = size
		}
		b.WriteString(s[done:i])
		b.WriteRune(e.placeholder(s[i : i+n]))
		i += n
		done = i
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// segments splits rendered output into Special segments (the template's
// control-token texts) and Text segments with placeholders restored.
func (e *escaper) segments(out string) []Segment {
	var r renderer
	var text strings.Builder
	flush := func() {
		r.text(text.String())
		text.Reset()
	}
	for i := 0; i < len(out); {
		if n := e.special(out[i:]); n > 0 {
			flush()
			r.special(out[i : i+n])
			i += n
			continue
		}
		c, size := utf8.DecodeRuneInString(out[i:])
		if k := int(c - privateBase); c >= privateBase && k < len(e.lits) {
			text.WriteString(e.lits[k])
		} else {
			text.WriteString(out[i : i+size])
		}
		i += size
	}
	flush()
	return r.segs
}
