package constrain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// formatNames are the formats the automata write.
var formatNames = []string{"date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}

// libFormat returns jsonschema's assertion of a format.
func libFormat(t testing.TB, format string) func(string) bool {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("f.json", map[string]any{"type": "string", "format": format}); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("f.json")
	if err != nil {
		t.Fatal(err)
	}
	return func(s string) bool { return v.Validate(s) == nil }
}

// formatCheckers are independent checks of each format as the automata
// write it: the standard library's parsers where they are exact (dates by
// time.Parse, addresses by net/netip), jsonschema's format assertions,
// and the restrictions the documentation states (upper-case T and Z, no
// leap second, no trailing dot, no empty or quoted local part or address
// literal in an email, ISO 8601 durations by their RFC 3339 grammar).
func formatCheckers(t testing.TB) map[string]func(string) bool {
	lib := map[string]func(string) bool{}
	for _, f := range formatNames {
		lib[f] = libFormat(t, f)
	}
	dateTime := func(s string) bool {
		_, err := time.Parse(time.RFC3339, s)
		return err == nil && lib["date-time"](s) && !strings.ContainsAny(s, "tz,")
	}
	return map[string]func(string) bool{
		"date":      func(s string) bool { _, err := time.Parse("2006-01-02", s); return err == nil && lib["date"](s) },
		"date-time": dateTime,
		"time":      func(s string) bool { return lib["time"](s) && dateTime("2000-01-01T"+s) },
		"duration":  func(s string) bool { return durationGrammar(s) && lib["duration"](s) },
		"email": func(s string) bool {
			return lib["email"](s) && !strings.HasPrefix(s, `"`) && !strings.HasPrefix(s, "@") && !strings.HasSuffix(s, "]") && !strings.HasSuffix(s, ".")
		},
		"hostname": func(s string) bool { return lib["hostname"](s) && !strings.HasSuffix(s, ".") },
		"ipv4":     func(s string) bool { a, err := netip.ParseAddr(s); return err == nil && a.Is4() && lib["ipv4"](s) },
		"ipv6": func(s string) bool {
			a, err := netip.ParseAddr(s)
			return err == nil && a.Is6() && a.Zone() == "" && lib["ipv6"](s)
		},
		"uuid": lib["uuid"],
	}
}

// durationGrammar checks RFC 3339's duration grammar (Appendix A).
func durationGrammar(s string) bool {
	rest, ok := strings.CutPrefix(s, "P")
	if !ok {
		return false
	}
	if n := leadingDigits(rest); n > 0 && rest[n:] == "W" {
		return true
	}
	date, tm, hasT := strings.Cut(rest, "T")
	return (date != "" || hasT) && (date == "" || unitRun(date, "YMD")) && (!hasT || unitRun(tm, "HMS"))
}

// unitRun checks digits-and-unit pairs whose units follow each other in
// order, from any of them.
func unitRun(s, order string) bool {
	last := -1
	for s != "" {
		n := leadingDigits(s)
		if n == 0 || n == len(s) {
			return false
		}
		u := strings.IndexByte(order, s[n])
		if u < 0 || last >= 0 && u != last+1 {
			return false
		}
		last, s = u, s[n+1:]
	}
	return last >= 0
}

func leadingDigits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// validFormat writes a random valid value of a format, by means other
// than the automaton's grammar.
func validFormat(rng *rand.Rand, format string) string {
	at := time.Date(1+rng.IntN(9998), time.January, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(366 * 24 * time.Hour))))
	at = at.Add(time.Duration(rng.IntN(1e9))).In(time.FixedZone("", (rng.IntN(48*60-1)-(24*60-1))*60))
	switch format {
	case "date-time":
		return at.Format([]string{time.RFC3339, time.RFC3339Nano}[rng.IntN(2)])
	case "date":
		return at.Format("2006-01-02")
	case "time":
		return at.Format("15:04:05.999999999Z07:00")
	case "duration":
		return validDuration(rng)
	case "hostname":
		return validHostname(rng, 1+rng.IntN(4))
	case "email":
		return validEmail(rng)
	case "ipv4":
		return netip.AddrFrom4([4]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))}).String()
	case "ipv6":
		return validIPv6(rng)
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	u := fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:])
	if rng.IntN(2) == 0 {
		u = strings.ToUpper(u)
	}
	return u
}

func validDuration(rng *rand.Rand) string {
	num := func() string { return fmt.Sprint(rng.IntN(1000)) }
	run := func(units string) string {
		from := rng.IntN(len(units))
		to := from + 1 + rng.IntN(len(units)-from)
		var b strings.Builder
		for _, u := range units[from:to] {
			b.WriteString(num() + string(u))
		}
		return b.String()
	}
	switch rng.IntN(4) {
	case 0:
		return "P" + num() + "W"
	case 1:
		return "P" + run("YMD")
	case 2:
		return "PT" + run("HMS")
	}
	return "P" + run("YMD") + "T" + run("HMS")
}

// validHostname writes labels of 1 to 63 letters, digits and inner
// hyphens, within 253 characters.
func validHostname(rng *rand.Rand, labels int) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var parts []string
	for range labels {
		n := 1 + rng.IntN(63)
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(8)
		}
		b := []byte{alnum[rng.IntN(len(alnum))]}
		for i := 1; i < n; i++ {
			c := (alnum + "-")[rng.IntN(len(alnum)+1)]
			if i == n-1 {
				c = alnum[rng.IntN(len(alnum))]
			}
			b = append(b, c)
		}
		parts = append(parts, string(b))
	}
	h := strings.Join(parts, ".")
	for len(h) > 253 {
		h = h[strings.IndexByte(h, '.')+1:]
	}
	return h
}

func validEmail(rng *rand.Rand) string {
	const atext = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+/=?^_`{|}~-"
	var local []byte
	for n := 1 + rng.IntN(20); len(local) < n; {
		if len(local) > 0 && local[len(local)-1] != '.' && len(local) < n-1 && rng.IntN(5) == 0 {
			local = append(local, '.')
		}
		local = append(local, atext[rng.IntN(len(atext))])
	}
	return string(local) + "@" + validHostname(rng, 1+rng.IntN(3))
}

func validIPv6(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		if rng.IntN(3) > 0 {
			b[i] = byte(rng.IntN(256))
		}
	}
	if z := rng.IntN(16); rng.IntN(2) == 0 {
		clear(b[z:min(16, z+rng.IntN(12))]) // a run of zero groups: "::"
	}
	a := netip.AddrFrom16(b)
	switch rng.IntN(4) {
	case 0:
		return a.StringExpanded()
	case 1:
		v4 := netip.AddrFrom4([4]byte(b[12:])).String()
		return strings.Join(strings.Split(a.StringExpanded(), ":")[:6], ":") + ":" + v4
	case 2:
		return netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}).String()
	}
	return a.String()
}

// mutate changes s in one random place.
func mutate(rng *rand.Rand, s string) string {
	const alphabet = "0123456789abcdefABCDEF:.-+TZtzPYMDWHS@_ é\"\\[]%"
	if s == "" {
		return string(alphabet[rng.IntN(len(alphabet))])
	}
	i := rng.IntN(len(s))
	c := string(alphabet[rng.IntN(len(alphabet))])
	switch rng.IntN(4) {
	case 0:
		return s[:i] + c + s[i+1:]
	case 1:
		return s[:i] + s[i+1:]
	case 2:
		return s[:i] + c + s[i:]
	}
	j := i + rng.IntN(len(s)-i)
	return s[:j] + s[i:j] + s[j:]
}

// FuzzFormats: for each format, the automaton accepts every valid value
// written independently, and accepts a mutated value exactly when the
// independent check does; what it writes (random walks) passes the
// check.
func FuzzFormats(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	checks := formatCheckers(f)
	auto := map[string]*Schema{}
	for _, name := range formatNames {
		auto[name] = compileText(f, `{"type":"string","format":"`+name+`"}`)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0xf0f0))
		for _, name := range formatNames {
			s, ok := auto[name], checks[name]
			for range 8 {
				v := validFormat(rng, name)
				if !ok(v) || !acceptsString(s, v) {
					t.Fatalf("%s: valid %q: check %v, automaton %v", name, v, ok(v), acceptsString(s, v))
				}
				for m := v; len(m) < 300; {
					if m = mutate(rng, m); acceptsString(s, m) != ok(m) {
						t.Fatalf("%s: %q (from %q): automaton %v, check %v", name, m, v, !ok(m), ok(m))
					}
					if rng.IntN(3) == 0 {
						break
					}
				}
			}
			if text, done := walkChecked(t, rng, s, name); done {
				var v string
				if err := json.Unmarshal([]byte(text), &v); err != nil || !ok(v) {
					t.Fatalf("%s: wrote %s (%v)", name, text, err)
				}
			}
		}
	})
}

// TestFormatExamples: each format at its edges: calendar days and leap
// years, time ranges, RFC 3339 spellings, address forms, length limits.
func TestFormatExamples(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	host253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 61) // 4×64-1-2 = 253
	cases := map[string]struct{ yes, no []string }{
		"date": {[]string{"2024-02-29", "2000-02-29", "1900-02-28", "0000-02-29", "2023-12-31", "2023-04-30"},
			[]string{"2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01", "2023-00-10", "2023-1-01", "23-01-01", "2023-01-01T"}},
		"date-time": {[]string{"2024-02-29T23:59:59Z", "1970-01-01T00:00:00.000001+05:30", "2023-06-01T12:00:00-00:00"},
			[]string{"2024-02-29t23:59:59Z", "2024-02-29T23:59:59z", "2024-02-29T24:00:00Z", "2024-02-29T23:59:60Z",
				"2024-02-29T23:59:59", "2024-02-29 23:59:59Z", "2024-02-29T23:59:59+24:00", "2024-02-29T23:59:59.Z"}},
		"time": {[]string{"00:00:00Z", "23:59:59.999+23:59", "12:30:00-08:00"}, []string{"24:00:00Z", "12:60:00Z", "12:00Z", "12:00:00"}},
		"duration": {[]string{"P1W", "P1Y", "P1Y2M3D", "P2M3D", "PT1H", "PT1H30M", "PT0S", "P1DT2H3M4S", "P10Y10M"},
			[]string{"P", "PT", "P1W2D", "P1Y3D", "PT1H2S", "P1H", "1Y", "P-1Y", "P1.5Y", "P1YT"}},
		"email": {[]string{"a@b", "first.last+tag@mail.example.com", strings.Repeat("x", 64) + "@h.io", "a!#$%&'*+/=?^_`{|}~-@x.org"},
			[]string{"@b.com", "a@", "a.@b.com", ".a@b.com", "a..b@c.com", strings.Repeat("x", 65) + "@h.io", "a@-b.com",
				"a b@c.com", `"a"@b.com`, "a@[127.0.0.1]", "a@b.com.", "a@@b.com"}},
		"hostname": {[]string{"localhost", "a", "xn--bcher-kva.example", "1.2.3.4", label63 + ".com", host253},
			[]string{"", "-a.com", "a-.com", "a..com", "a.com.", label63 + "a.com", host253 + "b", "a_b.com", "é.com"}},
		"ipv4": {[]string{"0.0.0.0", "255.255.255.255", "192.168.1.10"}, []string{"256.1.1.1", "01.1.1.1", "1.1.1", "1.1.1.1.1", "1.1.1.-1", ""}},
		"ipv6": {[]string{"::", "::1", "1::", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "::ffff:192.0.2.1", "1:2:3:4:5:6:1.2.3.4",
			"1::2:3:4:5:6:7", "1:2:3:4:5:6:7::", "ABCD:ef01::"},
			[]string{":", ":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3", "fe80::1%eth0", "g::"}},
		"uuid": {[]string{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"},
			[]string{"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"}},
	}
	for name, c := range cases {
		s := compileText(t, `{"type":"string","format":"`+name+`"}`)
		for _, v := range c.yes {
			if !acceptsString(s, v) {
				t.Errorf("%s: %q refused", name, v)
			}
		}
		for _, v := range c.no {
			if acceptsString(s, v) {
				t.Errorf("%s: %q accepted", name, v)
			}
		}
	}
}

// TestFormatKeywords: a format with length bounds and a pattern, a
// format on a type it does not apply to, and formats refused.
func TestFormatKeywords(t *testing.T) {
	s := compileText(t, `{"type":"string","format":"email","pattern":"\\.org$","maxLength":12}`)
	for v, want := range map[string]bool{"ab@cd.org": true, "abcd@efg.org": true, "abcde@efg.org": false, "ab@cd.com": false} {
		if acceptsString(s, v) != want {
			t.Errorf("email ≤ 12 ending .org: %q accepted %v", v, !want)
		}
	}
	s = compileText(t, `{"type":["integer","null"],"format":"date"}`)
	if !accepts(s, "12") || !accepts(s, "null") {
		t.Error("a string format restricted an integer")
	}
	for schema, word := range map[string]string{
		`{"type":"object","properties":{"u":{"type":"string","format":"uri"}}}`: `#/properties/u/format: "uri"`,
		`{"type":"integer","format":"int32"}`:                                   `#/format: "int32"`,
		`{"type":"string","format":7}`:                                          "#/format: want a string",
		`{"type":"string","format":"date","maxLength":9}`:                       "no value satisfies",
		`{"anyOf":[{"type":"string"},{"type":"null"}],"format":"date"}`:         "format beside anyOf",
	} {
		if _, err := Compile([]byte(schema)); err == nil || !strings.Contains(err.Error(), word) {
			t.Errorf("%s: %v, want an error naming %q", schema, err, word)
		}
	}
}

// TestEnumKeywords: enum and const values the schema's other keywords
// refuse are left out; none left is refused.
func TestEnumKeywords(t *testing.T) {
	s := compileText(t, `{"enum":[1,5,7.5,"a","abc","2024-02-30",null],"minimum":3,"maxLength":2}`)
	for text, want := range map[string]bool{"5": true, "7.5": true, `"a"`: true, "null": true, "1": false, `"abc"`: false} {
		if accepts(s, text) != want {
			t.Errorf("%s: accepted %v", text, !want)
		}
	}
	s = compileText(t, `{"type":"integer","enum":[1.5,2,"2",-0]}`)
	for text, want := range map[string]bool{"2": true, "-0": true, "1.5": false, `"2"`: false} {
		if accepts(s, text) != want {
			t.Errorf("integer enum: %s accepted %v", text, !want)
		}
	}
	s = compileText(t, `{"type":"string","format":"date","enum":["2024-02-29","2023-02-29"]}`)
	if !accepts(s, `"2024-02-29"`) || accepts(s, `"2023-02-29"`) {
		t.Error("a date enum was not filtered by its format")
	}
	if _, err := Compile([]byte(`{"const":4,"multipleOf":3}`)); err == nil || !strings.Contains(err.Error(), "no value satisfies") {
		t.Errorf("a const its multipleOf refuses: %v", err)
	}
}
