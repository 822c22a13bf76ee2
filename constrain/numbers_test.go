package constrain

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestNumberExamples: canonical numbers (no negative zero, no leading
// zeros), numeric bounds exclusive or not, multipleOf, at the edges.
func TestNumberExamples(t *testing.T) {
	cases := []struct {
		schema string
		yes    []string
		no     []string
	}{
		{`{"type":"integer"}`, []string{"0", "7", "-7", "120", "-9223372036854775808"},
			[]string{"-0", "00", "01", "-01", "1.0", "1e2", "+1", "-", ""}},
		{`{"type":"number"}`, []string{"0", "0.0", "-0.5", "0.05", "1e5", "1E-5", "-1.5e+3", "0e1", "-0.001"},
			[]string{"-0", "-0.0", "-0.000", "-0e1", "-0.0E5", "00", "01.5", ".5", "1.", "1e", "1e+"}},
		{`{"type":"integer","minimum":3,"maximum":120}`, []string{"3", "4", "99", "100", "119", "120"},
			[]string{"2", "121", "0", "-3", "1000", "1200"}},
		{`{"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":120}`, []string{"4", "119"}, []string{"3", "120"}},
		{`{"type":"integer","minimum":-10,"maximum":-2}`, []string{"-10", "-2", "-5"}, []string{"-1", "0", "-11", "-100", "2"}},
		{`{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}`,
			[]string{"-9223372036854775808", "9223372036854775807", "0"}, []string{"-9223372036854775809", "9223372036854775808"}},
		{`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`, []string{"0.5", "0.0001", "0.999"},
			[]string{"0", "0.0", "1", "1.0", "-0.5", "1.0001"}},
		{`{"type":"number","minimum":-1.5,"maximum":2.25}`, []string{"-1.5", "-1.49", "0", "2.25", "2.250", "-1.50"},
			[]string{"-1.51", "2.251", "-2", "3"}},
		{`{"type":"number","minimum":1e2,"exclusiveMaximum":1.5e2}`, []string{"100", "149.99"}, []string{"99.99", "150", "1e2"}},
		{`{"type":"integer","minimum":1.5}`, []string{"2", "10"}, []string{"1", "0"}},
		{`{"type":"integer","multipleOf":7}`, []string{"0", "7", "-14", "700"}, []string{"1", "-8", "71"}},
		{`{"type":"integer","multipleOf":2.5}`, []string{"0", "5", "-10"}, []string{"2", "3", "7"}},
		{`{"type":"number","multipleOf":0.01}`, []string{"0", "1.5", "1.25", "-3.07", "100"}, []string{"1.255", "1.250", "0.001"}},
		{`{"type":"number","multipleOf":0.25,"minimum":0,"maximum":1}`, []string{"0", "0.25", "0.5", "0.75", "1"},
			[]string{"0.3", "1.25", "-0.25"}},
		{`{"type":"integer","minimum":5,"maximum":15,"multipleOf":10}`, []string{"10"}, []string{"0", "5", "15", "20"}},
		{`{"type":"integer","minimum":0,"exclusiveMinimum":0}`, []string{"1"}, []string{"0"}},
		{`{"type":"integer","maximum":5,"exclusiveMaximum":5}`, []string{"4"}, []string{"5"}},
		{`{"type":"integer","minimum":3,"exclusiveMinimum":true}`, []string{"4"}, []string{"3"}}, // draft-04 style
		{`{"minimum":0}`, []string{"0", "0.5"}, []string{"-1", `"a"`}},
	}
	for _, c := range cases {
		s := compileText(t, c.schema)
		for _, text := range c.yes {
			if !accepts(s, text) {
				t.Errorf("%s: %s refused", c.schema, text)
			}
		}
		for _, text := range c.no {
			if accepts(s, text) {
				t.Errorf("%s: %s accepted", c.schema, text)
			}
		}
	}
}

// numberRule is a number type's keywords, checked independently of the
// automaton: exact rationals (math/big) and the canonical forms the
// documentation states.
type numberRule struct {
	integer        bool
	lo, hi, mul    *big.Rat
	loExcl, hiExcl bool
	mulDigits      int // multipleOf's fraction digits
	schema         string
}

var (
	plainNumberRe     = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	decimalNumberRe   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)
	canonicalIntegerR = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// allows reports whether the rule allows text as written.
func (r *numberRule) allows(text string) bool {
	plain := r.lo == nil && r.hi == nil && r.mul == nil
	switch {
	case len(text) > maxNumber:
		return false
	case r.integer && !canonicalIntegerR.MatchString(text):
		return false
	case plain && !plainNumberRe.MatchString(text), !plain && !decimalNumberRe.MatchString(text):
		return false
	}
	mantissa, _, _ := strings.Cut(strings.ToLower(text), "e")
	if strings.HasPrefix(text, "-") && strings.Trim(mantissa, "-0.") == "" {
		return false // negative zero
	}
	if plain {
		return true
	}
	x, ok := new(big.Rat).SetString(text)
	if !ok {
		return false
	}
	if r.lo != nil && (x.Cmp(r.lo) < 0 || r.loExcl && x.Cmp(r.lo) == 0) || r.hi != nil && (x.Cmp(r.hi) > 0 || r.hiExcl && x.Cmp(r.hi) == 0) {
		return false
	}
	if r.mul != nil {
		_, frac, _ := strings.Cut(text, ".")
		return len(frac) <= r.mulDigits && new(big.Rat).Quo(x, r.mul).IsInt()
	}
	return true
}

// randomDecimal is a decimal text near zero with up to frac fraction
// digits.
func randomDecimal(rng *rand.Rand, frac int) string {
	s := fmt.Sprint(rng.IntN(2001) - 1000)
	if f := rng.IntN(frac + 1); f > 0 {
		s += "." + fmt.Sprintf("%0*d", f, rng.IntN(pow10(f)))
	}
	return s
}

func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}

// randomNumberRule draws a rule and its schema.
func randomNumberRule(rng *rand.Rand) *numberRule {
	r := &numberRule{integer: rng.IntN(2) == 0}
	kw := map[string]string{}
	if rng.IntN(3) > 0 {
		v := randomDecimal(rng, 2)
		r.lo, _ = new(big.Rat).SetString(v)
		r.loExcl = rng.IntN(2) == 0
		kw[map[bool]string{false: "minimum", true: "exclusiveMinimum"}[r.loExcl]] = v
	}
	if rng.IntN(3) > 0 {
		v := randomDecimal(rng, 2)
		r.hi, _ = new(big.Rat).SetString(v)
		r.hiExcl = rng.IntN(2) == 0
		kw[map[bool]string{false: "maximum", true: "exclusiveMaximum"}[r.hiExcl]] = v
	}
	if rng.IntN(2) == 0 {
		m := []string{"1", "2", "3", "7", "10", "25", "0.5", "0.25", "0.1", "0.01", "0.05", "1.5", "2.5", "0.3", "0.125"}[rng.IntN(15)]
		r.mul, _ = new(big.Rat).SetString(m)
		_, frac, _ := strings.Cut(m, ".")
		r.mulDigits = len(frac)
		kw["multipleOf"] = m
	}
	var parts []string
	for k, v := range kw {
		parts = append(parts, fmt.Sprintf(`%q:%s`, k, v))
	}
	typ := map[bool]string{false: "number", true: "integer"}[r.integer]
	r.schema = fmt.Sprintf(`{"type":%q%s}`, typ, strings.Join(append([]string{""}, parts...), ","))
	return r
}

// candidates are texts near the rule's edges, canonical or not.
func (r *numberRule) candidates(rng *rand.Rand) []string {
	out := []string{"0", "-0", "-0.0", "00", "1.50", "1e2", "+1", "1.", ".5", "-", "0.0"}
	for _, b := range []*big.Rat{r.lo, r.hi, r.mul} {
		if b == nil {
			continue
		}
		for _, k := range []int64{-3, -2, -1, 0, 1, 2, 3, 4, 10} {
			step := new(big.Rat).SetFrac64(1, []int64{1, 10, 100, 1000}[rng.IntN(4)])
			x := new(big.Rat).Add(b, new(big.Rat).Mul(step, big.NewRat(k, 1)))
			out = append(out, ratText(x), ratText(new(big.Rat).Neg(x)))
		}
	}
	for range 40 {
		out = append(out, randomDecimal(rng, 4))
	}
	return out
}

// ratText writes x in decimal with its fraction digits trimmed.
func ratText(x *big.Rat) string {
	s := strings.TrimRight(x.FloatString(6), "0")
	return strings.TrimSuffix(s, ".")
}

// FuzzNumberKeywords: for random bounds (inclusive, exclusive) and
// multipleOf on integers and numbers, the automaton accepts a text
// exactly when an independent exact-rational check does, and what it
// writes (random walks) that check accepts; a schema refused as empty
// has no value among many candidates.
func FuzzNumberKeywords(f *testing.F) {
	for seed := range uint64(40) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0xbead))
		r := randomNumberRule(rng)
		s, err := Compile([]byte(r.schema))
		cands := r.candidates(rng)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no number") {
				t.Fatalf("%s: %v", r.schema, err)
			}
			for _, c := range cands {
				if r.allows(c) {
					t.Fatalf("%s refused as empty, but %s satisfies it", r.schema, c)
				}
			}
			return
		}
		for _, c := range cands {
			if got, want := accepts(s, c), r.allows(c); got != want {
				t.Fatalf("%s: %q accepted %v, want %v", r.schema, c, got, want)
			}
		}
		for range 20 {
			if v := randomValue(rng, s); v != "" && !r.allows(v) {
				t.Fatalf("%s: wrote %q", r.schema, v)
			}
		}
	})
}

// TestNumberRefusals: values the keywords cannot take, and what the
// automaton cannot track, are refused naming the keyword.
func TestNumberRefusals(t *testing.T) {
	for schema, want := range map[string]struct {
		err  error
		word string
	}{
		`{"type":"integer","minimum":5,"maximum":4}`:                   {ErrUnsupported, "no number"},
		`{"type":"integer","exclusiveMinimum":1,"maximum":1}`:          {ErrUnsupported, "no number"},
		`{"type":"number","minimum":1e30}`:                             {ErrUnsupported, "no number of at most 24"},
		`{"type":"integer","multipleOf":10,"minimum":1,"maximum":9}`:   {ErrUnsupported, "no number"},
		`{"type":"integer","multipleOf":123457}`:                       {ErrLimit, "multipleOf"},
		`{"type":"number","multipleOf":1e-70}`:                         {ErrLimit, "multipleOf"},
		`{"type":"number","minimum":1e-70}`:                            {ErrLimit, "minimum"},
		`{"type":"integer","multipleOf":0}`:                            {nil, "multipleOf"},
		`{"type":"integer","multipleOf":-2}`:                           {nil, "multipleOf"},
		`{"type":"integer","minimum":"3"}`:                             {nil, "minimum"},
		`{"type":"integer","exclusiveMinimum":true}`:                   {nil, "exclusiveMinimum"},
		`{"anyOf":[{"type":"integer"},{"type":"string"}],"minimum":0}`: {ErrUnsupported, "minimum beside anyOf"},
	} {
		_, err := Compile([]byte(schema))
		if err == nil || want.err != nil && !errors.Is(err, want.err) || !strings.Contains(err.Error(), want.word) {
			t.Errorf("%s: %v, want an error (%v) naming %q", schema, err, want.err, want.word)
		}
	}
	// Huge bounds that every written number meets are no constraint.
	s := compileText(t, `{"type":"number","maximum":1.7976931348623157e308,"minimum":-1.7976931348623157e308}`)
	for _, text := range []string{"0", "-123.5", "99999999999999999999"} {
		if !accepts(s, text) {
			t.Errorf("huge bounds: %s refused", text)
		}
	}
}

// TestNumberUnions: bounds make integer alternatives that start with
// different bytes, so a union of them compiles.
func TestNumberUnions(t *testing.T) {
	s := compileText(t, `{"anyOf":[{"type":"integer","maximum":-1},{"type":"integer","minimum":0,"maximum":9}]}`)
	for text, want := range map[string]bool{"-5": true, "7": true, "10": false, "-0": false, "0": true} {
		if accepts(s, text) != want {
			t.Errorf("%s: accepted %v", text, !want)
		}
	}
}
