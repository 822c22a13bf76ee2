package constrain

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// literalFilter returns the test an enum or const value of schema s
// passes: its JSON type among those of the type keyword (when there is
// one), a string the string keywords allow, a number the numeric ones
// allow. Keywords of other types do not apply to a value.
func (c *compiler) literalFilter(s map[string]any, at *path) (func(any) (bool, error), error) {
	var types []string
	if t, ok := s["type"]; ok {
		var err error
		if types, err = typeList(t, s, at); err != nil {
			return nil, err
		}
	}
	allows := func(t string) bool { return types == nil || slices.Contains(types, t) || slices.Contains(types, "any") }
	return func(v any) (bool, error) {
		switch v := v.(type) {
		case string:
			if !allows("string") {
				return false, nil
			}
			return c.stringFits(v, s, at)
		case json.Number:
			return c.numberFits(v, types, s, at)
		case bool:
			return allows("boolean"), nil
		case nil:
			return allows("null"), nil
		case *obj:
			return allows("object"), nil
		case []any:
			return allows("array"), nil
		}
		return false, nil
	}, nil
}

// stringFits reports whether the string keywords of s allow str.
func (c *compiler) stringFits(str string, s map[string]any, at *path) (bool, error) {
	lo, hi, err := bounds(s, "minLength", "maxLength", at)
	if err != nil {
		return false, err
	}
	a, err := c.stringAuto(s, lo, hi, at)
	if err != nil {
		return false, err
	}
	if a == nil {
		n := utf8.RuneCountInString(str)
		return n >= lo && (hi < 0 || n <= hi), nil
	}
	return a.matches(appendQuoted(nil, str), true), nil
}

// numberFits reports whether a number is of one of types (nil: any) and
// the numeric keywords of s allow it.
func (c *compiler) numberFits(num json.Number, types []string, s map[string]any, at *path) (bool, error) {
	integer := false
	if types != nil && !slices.Contains(types, "number") && !slices.Contains(types, "any") {
		if !slices.Contains(types, "integer") {
			return false, nil
		}
		integer = true
	}
	x, err := parseDecimal(string(num))
	switch {
	case err != nil:
		return false, nil // more digits than an automaton compares: left out
	case !hasNumeric(s):
		return !integer || x.huge || x.d.frac == "", nil
	case x.huge:
		return false, nil
	}
	a, err := c.numberAutoFor(integer, s, at)
	if err != nil {
		return false, err
	}
	return a.matches([]byte(x.canonical()), false), nil
}
