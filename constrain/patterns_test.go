package constrain

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// patternSchema is a string schema with pattern p.
func patternSchema(p string) string {
	q, _ := json.Marshal(p)
	return `{"type":"string","pattern":` + string(q) + `}`
}

// acceptsString reports whether s accepts the string v, written as the
// automata write strings.
func acceptsString(s *Schema, v string) bool { return accepts(s, string(appendQuoted(nil, v))) }

// TestPatternExamples: unanchored search, anchors, classes, counted
// repetition, case folding, ECMA \u escapes, characters that JSON
// escapes, characters beyond the BMP.
func TestPatternExamples(t *testing.T) {
	cases := []struct {
		pattern string
		yes, no []string
	}{
		{`a+`, []string{"a", "xxaxx", "baaa"}, []string{"", "xyz"}},
		{`^a+$`, []string{"a", "aaa"}, []string{"", "aab", "ba"}},
		{`^[A-Z]{3}-\d{2,4}$`, []string{"ABC-12", "XYZ-1234"}, []string{"ABC-1", "ABC-12345", "abc-12", "ABCD-12"}},
		{`(?i)^hello$`, []string{"hello", "HeLLo"}, []string{"hell", "hello!"}},
		{`^\u00e9+$`, []string{"é", "ééé"}, []string{"e", ""}},
		{`^.{2}$`, []string{"ab", "é😀", "\"\\"}, []string{"a", "abc", "a\n"}},
		{`^[^a]$`, []string{"\"", "\\", "\x01", "\n", "\x1f", "\u2028", "😀"}, []string{"a", "", "bb"}},
		{`^$`, []string{""}, []string{"a"}},
		{`x|^y$`, []string{"axb", "y", "x"}, []string{"ay", "yy", ""}},
		{`\d{3}$`, []string{"123", "ab123"}, []string{"123a", "12"}},
		{`^(ab)*$`, []string{"", "ab", "ababab"}, []string{"aba", "b"}},
		{`["\\]`, []string{`a"b`, `\`}, []string{"ab"}},
		{`^😀+$`, []string{"😀", "😀😀"}, []string{"😁", ""}},
		{`^\p{Greek}+$`, []string{"αβγ"}, []string{"abc"}},
		{`^[\x00-\x1f]+$`, []string{"\x00\t\x1b", "\b\f\r"}, []string{" "}},
		{`^\/api\/v[0-9]+$`, []string{"/api/v2"}, []string{"/api/v", "api/v2"}},
	}
	for _, c := range cases {
		s := compileText(t, patternSchema(c.pattern))
		for _, v := range c.yes {
			if !acceptsString(s, v) {
				t.Errorf("%s: %q refused", c.pattern, v)
			}
		}
		for _, v := range c.no {
			if acceptsString(s, v) {
				t.Errorf("%s: %q accepted", c.pattern, v)
			}
		}
	}
	// One spelling per character: \u escapes only for control characters,
	// / never escaped.
	s := compileText(t, patternSchema(`^a/$`))
	for _, text := range []string{`"\u0061/"`, `"a\/"`} {
		if accepts(s, text) {
			t.Errorf("%s accepted", text)
		}
	}
}

// TestPatternLength: a pattern with minLength and maxLength counts
// characters, escapes and multi-byte ones as one.
func TestPatternLength(t *testing.T) {
	s := compileText(t, `{"type":"string","pattern":"^[a-z\\n\\u00e9]+$","minLength":2,"maxLength":4}`)
	for v, want := range map[string]bool{"ab": true, "abcd": true, "a": false, "abcde": false, "é\né\n": true, "é\né\né": false, "\n\n": true} {
		if acceptsString(s, v) != want {
			t.Errorf("%q: accepted %v", v, !want)
		}
	}
	if _, err := Compile([]byte(`{"type":"string","pattern":"^a{5}$","maxLength":3}`)); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no value") {
		t.Errorf("a pattern longer than maxLength: %v", err)
	}
}

// TestPatternRefusals: what the automaton cannot compile is refused with
// an error naming the pattern's place.
func TestPatternRefusals(t *testing.T) {
	for p, word := range map[string]string{
		`(?=a)b`:           "invalid or unsupported Perl syntax",
		`(?<!a)b`:          "error parsing regexp",
		`(a)\1`:            "invalid escape",
		`\bword\b`:         "word boundary",
		`(?m)^a$`:          "line anchor",
		`[a-`:              "missing closing ]",
		`a{1001}`:          "invalid repeat count",
		`(a|b)*a(a|b){20}`: "exceed the limit",
	} {
		_, err := Compile([]byte(`{"type":"object","properties":{"code":` + patternSchema(p) + `}}`))
		if err == nil || !strings.Contains(err.Error(), "#/properties/code/pattern") || !strings.Contains(err.Error(), word) {
			t.Errorf("%s: %v, want an error at #/properties/code/pattern naming %q", p, err, word)
		}
	}
	if _, err := Compile([]byte(`{"type":"string","pattern":3}`)); err == nil || !strings.Contains(err.Error(), "pattern") {
		t.Errorf("a pattern that is not a string: %v", err)
	}
	_, err := Compile([]byte(patternSchema(`(a|b)*a(a|b){20}`)))
	if !errors.Is(err, ErrLimit) {
		t.Errorf("a pattern whose automaton is exponential: %v, want ErrLimit", err)
	}
}

// patternSeeds are the fuzz seeds: patterns and strings.
var patternSeeds = [][2]string{
	{`a+`, "xaay"}, {`^[A-Z]{2,3}\d?$`, "AB1"}, {`(?i)straße`, "STRASSE"}, {`^(a|ab)(c|bcd)(d*)$`, "abcd"},
	{`[^\x00-\x7f]`, "é"}, {`^.*$`, "a\nb"}, {`(?s)^.*$`, "a\nb"}, {`^\s*\w+\s*$`, " a_1 "}, {`x*`, ""},
	{`^[\p{L}\p{N}]{1,8}$`, "日本語1"}, {`\.(png|jpe?g)$`, "a.jpeg"}, {`^\d{4}-\d{2}-\d{2}$`, "2024-02-30"},
	{`^[^"\\]*$`, `a"b`}, {`^(?:[a-z0-9-]+\.)+[a-z]{2,}$`, "api.example.com"}, {`\A\z`, ""}, {`[[:alpha:]]{2}`, "a1b2"},
}

// FuzzPattern: for any pattern regexp/syntax parses, the automaton
// accepts a string exactly when Go's regexp finds the pattern in it, and
// the strings it writes (random walks, which never stand where nothing
// may follow) decode to strings regexp matches.
func FuzzPattern(f *testing.F) {
	for _, s := range patternSeeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, v string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(v) || len(pattern) > 200 {
			return
		}
		s, err := Compile([]byte(patternSchema(pattern)))
		if err != nil {
			if !strings.Contains(err.Error(), "pattern") {
				t.Fatalf("%q: %v does not name the pattern", pattern, err)
			}
			return
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return // an ECMA escape regexp does not know
		}
		if got, want := acceptsString(s, v), re.MatchString(v); got != want {
			t.Fatalf("%q on %q: accepted %v, regexp %v", pattern, v, got, want)
		}
		rng := rand.New(rand.NewPCG(uint64(len(pattern)), uint64(len(v))))
		for range 2 {
			text, ok := walkChecked(t, rng, s, pattern)
			var got string
			if !ok {
				continue
			}
			if err := json.Unmarshal([]byte(text), &got); err != nil || !re.MatchString(got) {
				t.Fatalf("%q: wrote %s (%v)", pattern, text, err)
			}
		}
	})
}

// FuzzQuoted: the JSON text the automata write for a string reads back
// as the string.
func FuzzQuoted(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\t\n\r\b\f", "é😀\u2028", "</script>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) {
			return
		}
		var back string
		q := appendQuoted(nil, v)
		if err := json.Unmarshal(q, &back); err != nil || back != v {
			t.Fatalf("%q: wrote %s, read back %q (%v)", v, q, back, err)
		}
	})
}
