package constrain

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Pieces of the formats' regular expressions.
const (
	reDate = `\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))` +
		`|(?:\d{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29`
	reTime    = `(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)`
	reDurTime = `T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)`
	reLabel   = `[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?`
	reHost    = reLabel + `(?:\.` + reLabel + `)*`
	reAtext   = "[A-Za-z0-9!#$%&'*+/=?^_\\x60{|}~-]"
	reOctet   = `(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`
	reIPv4    = `(?:` + reOctet + `\.){3}` + reOctet
	reH16     = `[0-9A-Fa-f]{1,4}`
	reLs32    = `(?:` + reH16 + `:` + reH16 + `|` + reIPv4 + `)`
)

// formats are the regular expressions of the string formats (the
// grammars of RFC 3339, RFC 1123, RFC 4291 and RFC 4122; email a
// practical subset of RFC 5321), whole-string.
var formats = map[string]string{
	"date-time": `^(?:` + reDate + `)T` + reTime + `$`,
	"date":      `^(?:` + reDate + `)$`,
	"time":      `^` + reTime + `$`,
	"duration":  `^P(?:\d+W|(?:\d+D|\d+M(?:\d+D)?|\d+Y(?:\d+M(?:\d+D)?)?)(?:` + reDurTime + `)?|` + reDurTime + `)$`,
	"email":     `^` + reAtext + `+(?:\.` + reAtext + `+)*@` + reHost + `$`,
	"hostname":  `^` + reHost + `$`,
	"ipv4":      `^` + reIPv4 + `$`,
	"ipv6":      `^(?:` + ipv6 + `)$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
}

// ipv6 is RFC 4291's text form, as RFC 3986 spells it out: eight groups,
// or fewer with one "::", the last two optionally an IPv4 address.
var ipv6 = strings.Join([]string{
	`(?:` + reH16 + `:){6}` + reLs32,
	`::(?:` + reH16 + `:){5}` + reLs32,
	`(?:` + reH16 + `)?::(?:` + reH16 + `:){4}` + reLs32,
	`(?:(?:` + reH16 + `:){0,1}` + reH16 + `)?::(?:` + reH16 + `:){3}` + reLs32,
	`(?:(?:` + reH16 + `:){0,2}` + reH16 + `)?::(?:` + reH16 + `:){2}` + reLs32,
	`(?:(?:` + reH16 + `:){0,3}` + reH16 + `)?::` + reH16 + `:` + reLs32,
	`(?:(?:` + reH16 + `:){0,4}` + reH16 + `)?::` + reLs32,
	`(?:(?:` + reH16 + `:){0,5}` + reH16 + `)?::` + reH16,
	`(?:(?:` + reH16 + `:){0,6}` + reH16 + `)?::`,
}, "|")

// The lengths formats bound beyond their grammar: a hostname's 253
// characters (RFC 1035), an email address's 254 and its local part's 64
// (RFC 5321). Format texts are ASCII without escapes: a character is a
// byte.
const (
	maxHostname   = 253
	maxEmail      = 254
	maxEmailLocal = 64
)

// stringAuto compiles a string's pattern, format and length bounds (lo,
// hi < 0: none) into one automaton, or returns nil if it has neither
// pattern nor format.
func (c *compiler) stringAuto(s map[string]any, lo, hi int, at *path) (*automaton, error) {
	pattern, hasPattern := s["pattern"].(string)
	format, hasFormat := s["format"].(string)
	if !hasPattern && !hasFormat {
		return nil, nil
	}
	key := fmt.Sprintf("s\x00%t%s\x00%t%s\x00%d\x00%d", hasPattern, pattern, hasFormat, format, lo, hi)
	if a, ok := c.autos[key]; ok {
		return a, nil
	}
	var parts []*automaton
	var names []string
	if hasPattern {
		raw, err := compilePattern(&c.bud, pattern)
		if err != nil {
			return nil, autoError(err, at, "pattern")
		}
		a, err := finish(raw, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: %s/pattern: %q matches no string", ErrUnsupported, at, pattern)
		}
		parts, names = append(parts, a), append(names, "pattern")
	}
	if hasFormat {
		a, err := formatAuto(&c.bud, format)
		if err != nil {
			return nil, autoError(err, at, "format")
		}
		parts, names = append(parts, a), append(names, "format")
	}
	if lo > 0 || hi >= 0 {
		a, err := lengthAuto(&c.bud, lo, hi)
		if err != nil {
			return nil, autoError(err, at, "minLength", "maxLength")
		}
		parts, names = append(parts, a), append(names, "minLength", "maxLength")
	}
	a, err := intersect(&c.bud, parts)
	if err != nil {
		return nil, autoError(err, at, names...)
	}
	c.autos[key] = a
	return a, nil
}

// autoError names the keywords and place of an error building an
// automaton: at/keyword for one keyword, at (keywords) for several.
func autoError(err error, at *path, keywords ...string) error {
	where := at.String() + "/" + keywords[0]
	if len(keywords) > 1 {
		where = at.String() + " (" + strings.Join(keywords, ", ") + ")"
	}
	var be *budgetError
	switch {
	case errors.As(err, &be):
		return fmt.Errorf("%w: %s: %s", ErrLimit, where, be)
	case errors.Is(err, errEmpty):
		return fmt.Errorf("%w: %s: no value satisfies these keywords together", ErrUnsupported, where)
	case errors.Is(err, ErrUnsupported):
		return fmt.Errorf("%w: %s: %s", ErrUnsupported, where, strings.TrimPrefix(err.Error(), ErrUnsupported.Error()+": "))
	}
	return fmt.Errorf("constrain: %s: %w", where, err)
}

// formatAuto builds the automaton of a format.
func formatAuto(bud *budget, name string) (*automaton, error) {
	re, ok := formats[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (supported: date-time, date, time, duration, email, hostname, ipv4, ipv6, uuid)", ErrUnsupported, name)
	}
	raw, err := compilePattern(bud, re)
	if err != nil {
		return nil, err
	}
	maxLen := 0
	switch name {
	case "hostname":
		maxLen = maxHostname + 2
	case "email":
		maxLen = maxEmail + 2
	}
	a, err := finish(raw, maxLen)
	if err != nil || name != "email" {
		return a, err
	}
	local, err := emailLocalAuto(bud)
	if err != nil {
		return nil, err
	}
	return intersect(bud, []*automaton{a, local})
}

// emailLocalAuto bounds the characters before a string's '@'.
func emailLocalAuto(bud *budget) (*automaton, error) {
	type key struct {
		phase uint8 // 0 before the quote, 1 before the '@', 2 after it, 3 after the closing quote
		n     int32
	}
	cls := newClasses(func(b byte) int { return strings.IndexByte(`"@`, b) })
	raw, err := explore(bud, cls, key{}, func(k key, b byte) (key, bool) {
		switch {
		case k.phase == 0:
			return key{phase: 1}, b == '"'
		case b == '"':
			return key{phase: 3}, k.phase < 3
		case k.phase == 1 && b == '@':
			return key{phase: 2}, true
		case k.phase == 1:
			return key{phase: 1, n: k.n + 1}, k.n < maxEmailLocal
		}
		return k, k.phase == 2
	}, func(k key) bool { return k.phase == 3 })
	if err != nil {
		return nil, err
	}
	return finish(raw, 0)
}

// lengthAuto bounds a string's characters: at least lo, at most hi (hi
// < 0: no bound). A character is a byte that is not a UTF-8 continuation
// byte, or an escape from its backslash on.
func lengthAuto(bud *budget, lo, hi int) (*automaton, error) {
	type key struct {
		phase uint8 // 0 before the quote, 1 inside, 2 after the closing quote
		esc   uint8 // 1 after a backslash, 2 to 5 in a \u escape's digits
		n     int32
	}
	cls := newClasses(func(b byte) int {
		if b >= 0x80 && b <= 0xbf {
			return 1
		}
		return 10 + strings.IndexByte(`"\u`, b)
	})
	count := func(k key) (key, bool) {
		k.n++
		if hi < 0 {
			k.n = min(k.n, int32(lo))
		}
		return k, hi < 0 || int(k.n) <= hi
	}
	raw, err := explore(bud, cls, key{}, func(k key, b byte) (key, bool) {
		switch {
		case k.phase == 0:
			return key{phase: 1}, b == '"'
		case k.phase == 2:
			return k, false
		case k.esc == 1 && b == 'u':
			k.esc = 2
		case k.esc == 1 || k.esc == 5:
			k.esc = 0
		case k.esc > 1:
			k.esc++
		case b == '"':
			return key{phase: 2}, int(k.n) >= lo
		case b == '\\':
			k.esc = 1
			return count(k)
		case b < 0x80 || b > 0xbf:
			return count(k)
		}
		return k, true
	}, func(k key) bool { return k.phase == 2 })
	if err != nil {
		return nil, err
	}
	return finish(raw, 0)
}

// formatName checks a format keyword's value.
func formatName(v any, at *path) error {
	name, ok := v.(string)
	if !ok {
		return fmt.Errorf("constrain: %s/format: want a string", at)
	}
	if _, ok := formats[name]; !ok {
		return fmt.Errorf("%w: %s/format: %s (supported: date-time, date, time, duration, email, hostname, ipv4, ipv6, uuid)", ErrUnsupported, at, strconv.Quote(name))
	}
	return nil
}
