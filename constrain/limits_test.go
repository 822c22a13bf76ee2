package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// deepest writes the value that goes as deep as the automaton lets it:
// it opens an object or array whenever it may, else closes whatever it
// may, else takes the smallest byte allowed. "" if it gets stuck or runs
// past limit bytes.
func deepest(s *Schema, limit int) string {
	m := s.Matcher()
	var out []byte
	for len(out) < limit {
		if m.done {
			return string(out)
		}
		pick := -1
		prefer := []string{"{[", `"]}`}
		switch innermost(out) {
		case '"':
			prefer = []string{`"`}
		case '{':
			prefer = []string{"{[", ",", `"]}`} // optional properties too
		}
		for _, want := range prefer {
			for i := range len(want) {
				if c := m; pick < 0 && c.Advance([]byte{want[i]}) {
					pick = int(want[i])
				}
			}
		}
		for b := 0; pick < 0 && b < 256; b++ {
			if c := m; c.Advance([]byte{byte(b)}) {
				pick = b
			}
		}
		if pick < 0 {
			if m.Complete() {
				return string(out)
			}
			return ""
		}
		m.Advance([]byte{byte(pick)})
		out = append(out, byte(pick))
	}
	return ""
}

// innermost returns what a JSON text ends inside: '"' (a string), '{'
// (an object), '[' (an array) or 0 (none).
func innermost(text []byte) byte {
	var open []byte
	in, esc := false, false
	for _, c := range text {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			open = append(open, c)
		case c == '}' || c == ']':
			open = open[:len(open)-1]
		}
	}
	switch {
	case in:
		return '"'
	case len(open) > 0:
		return open[len(open)-1]
	}
	return 0
}

// TestRecursionDepthBound: a recursive schema's deepest output stops at
// MaxDepth and is still complete and valid: at the bound only the
// alternatives that end are allowed (an empty array, null, no optional
// property).
func TestRecursionDepthBound(t *testing.T) {
	deepSchemas := map[string]struct {
		schema string
		depth  int // of the deepest output
	}{
		"tree":     {schemas["tree"], MaxDepth},
		"thread":   {schemas["thread"], MaxDepth},
		"list":     {schemas["list"], MaxDepth - 1}, // the innermost next is null
		"optional": {`{"type":"object","properties":{"next":{"$ref":"#"}}}`, MaxDepth},
		"arrays":   {`{"type":"array","items":{"$ref":"#"}}`, MaxDepth},
		"mutual": {`{"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/b"}},"b":{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"required":["a"]}},
			"$ref":"#/$defs/a"}`, MaxDepth - 1}, // an array at MaxDepth-1 has no room for an object and its array
	}
	for name, c := range deepSchemas {
		s, err := Compile([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := deepest(s, 100000)
		if text == "" {
			t.Fatalf("%s: the deepest walk got stuck", name)
		}
		if d := JSONDepth([]byte(text)); d != c.depth {
			t.Errorf("%s: deepest output nests %d, want %d: %s", name, d, c.depth, text)
		}
		v := testkit.JSONSchema(t, c.schema)
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %q is not JSON: %v", name, text, err)
		}
		if err := v.Validate(doc); err != nil {
			t.Fatalf("%s: %q does not validate: %v", name, text, err)
		}
	}
	s := compileText(t, `{"type":"object","properties":{"next":{"$ref":"#"}}}`)
	open := strings.Repeat(`{"next":`, MaxDepth-1)
	if !accepts(s, open+"{}"+strings.Repeat("}", MaxDepth-1)) {
		t.Error("a list MaxDepth deep refused")
	}
	if m := s.Matcher(); m.Advance([]byte(open + `{"next"`)) {
		t.Error("a list opened beyond MaxDepth")
	}
	m := AnyObject().Matcher()
	if !m.Advance([]byte(strings.Repeat(`{"a":`, MaxDepth-1)+"{")) || m.Advance([]byte(`"`)) || !m.Advance([]byte("}")) {
		t.Error("any JSON: the bound is not at MaxDepth objects")
	}
}

func compileText(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("%.200s: %v", schema, err)
	}
	return s
}

// TestRefsRefused: references that name nothing, reach outside the
// schema, or make a schema no finite value satisfies are refused with an
// error that says so.
func TestRefsRefused(t *testing.T) {
	for _, c := range []struct {
		schema string
		want   error
		word   string
	}{
		{`{"$ref":"#"}`, ErrUnsupported, "cycle of references"},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, ErrUnsupported, "cycle of references"},
		{`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`, ErrUnsupported, "no finite value"},
		{`{"$defs":{"a":{"type":"array","minItems":1,"items":{"$ref":"#/$defs/b"}},"b":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}},
			"$ref":"#/$defs/b"}`, ErrUnsupported, "no finite value"},
		{`{"anyOf":[{"$ref":"#"}]}`, ErrUnsupported, "leads back through $ref"},
		{`{"anyOf":[{"type":"string"},{"$ref":"#"}]}`, ErrUnsupported, "leads back through $ref"},
		{`{"$defs":{"a":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, ErrUnsupported, "leads back through $ref"},
		{`{"$defs":{"a":{"type":"string"}},"$ref":"#/$defs/b"}`, ErrUnsupported, `no $defs named "b"`},
		{`{"definitions":{"a":{"type":"string"}},"$ref":"#/$defs/a"}`, ErrUnsupported, "no $defs"},
		{`{"$ref":"http://example.com/schema.json"}`, ErrUnsupported, "only references within the schema"},
		{`{"$ref":"other.json#/$defs/a"}`, ErrUnsupported, "only references within the schema"},
		{`{"properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`, ErrUnsupported, "only #, #/$defs/NAME"},
		{`{"$defs":{"a":{"$defs":{"b":{}}}},"$ref":"#/$defs/a/$defs/b"}`, ErrUnsupported, "only #, #/$defs/NAME"},
		{`{"$defs":{"a~b":{}},"$ref":"#/$defs/a~2b"}`, ErrUnsupported, "~ not followed"},
		{`{"$defs":{"a":{}},"$ref":"#/$defs/%zz"}`, ErrUnsupported, "not a valid URI fragment"},
		{`{"$defs":{"a":{"$id":"http://x.org/a","type":"array","items":{"$ref":"#"}}},"$ref":"#/$defs/a"}`, ErrUnsupported, "$id below the root"},
		{`{"$ref":3}`, nil, "want a string"},
		{`{"$defs":{"a":3},"$ref":"#/$defs/a"}`, nil, "must be an object or a boolean"},
		{`{"$defs":{"a":false},"$ref":"#/$defs/a"}`, ErrUnsupported, "accepts nothing"},
		{`{"type":[]}`, nil, "at least one type"},
		{nestedRequired(MaxDepth), ErrLimit, "output nesting limit of 32"},
	} {
		_, err := Compile([]byte(c.schema))
		if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.word) {
			t.Errorf("%.120s: %v, want %v naming %q", c.schema, err, c.want, c.word)
		}
	}
	if _, err := Compile([]byte(nestedRequired(MaxDepth - 1))); err != nil {
		t.Errorf("required nesting of MaxDepth: %v", err)
	}
}

// nestedRequired is a schema whose every value is n arrays deep around a
// number (n+1 levels).
func nestedRequired(n int) string {
	return strings.Repeat(`{"type":"array","minItems":1,"items":`, n) + `{"type":"number"}` + strings.Repeat("}", n)
}

// TestRefSharesNodes: references to one schema share its node, so a
// schema that would double at each level if expanded compiles to a graph
// of its own size.
func TestRefSharesNodes(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"$defs":{`)
	for i := range 40 {
		fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{"l":{"$ref":"#/$defs/d%d"},"r":{"$ref":"#/$defs/d%d"}}},`, i, i+1, i+1)
	}
	b.WriteString(`"d40":{"type":"integer"}},"$ref":"#/$defs/d0"}`)
	s, err := Compile([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if nodes[n] {
			return
		}
		nodes[n] = true
		for _, p := range n.props {
			walk(p.node)
		}
		for _, a := range n.alts {
			walk(a)
		}
		if n.items != nil {
			walk(n.items)
		}
	}
	walk(s.root)
	if len(nodes) > 3*41 {
		t.Fatalf("%d nodes reachable for 41 definitions", len(nodes))
	}
	if !accepts(s, `{"l":{"r":{}},"r":{}}`) {
		t.Fatal("shared definitions refused a value")
	}
}

// TestLimits: each limit refuses a schema just beyond it with an error
// wrapping ErrLimit that names it and its value, and accepts one at it.
func TestLimits(t *testing.T) {
	enum := func(n int) string {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprint(i)
		}
		return `{"enum":[` + strings.Join(vals, ",") + `]}`
	}
	props := func(n int) string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
		}
		return `{"type":"object","properties":{` + strings.Join(names, ",") + `}}`
	}
	long := `{"type":"string","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	for _, c := range []struct {
		name, over, at, word string
	}{
		{"bytes", long, `{"type":"string","description":"` + strings.Repeat("x", MaxSchemaBytes-40) + `"}`, "limit of 262144 bytes"},
		{"depth", arrays(MaxSchemaDepth + 1), arrays(MaxSchemaDepth), "nesting depth exceeds the limit of 128"},
		{"enum", enum(MaxEnumValues + 1), enum(MaxEnumValues), "4097 values exceed the limit of 4096"},
		{"properties", props(MaxProperties + 1), props(MaxProperties), "65 properties exceed the limit of 64"},
		{"nodes", manyNodes(MaxSchemaNodes + 1), manyNodes(MaxSchemaNodes), "node count exceeds the limit of 10000"},
		{"output", nestedRequired(MaxDepth), nestedRequired(MaxDepth - 1), "output nesting limit of 32"},
	} {
		if len(c.over) > MaxSchemaBytes && c.name != "bytes" {
			t.Fatalf("%s: the test schema is %d bytes", c.name, len(c.over))
		}
		if _, err := Compile([]byte(c.over)); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), c.word) {
			t.Errorf("%s: %.200v, want ErrLimit naming %q", c.name, err, c.word)
		}
		if _, err := Compile([]byte(c.at)); err != nil {
			t.Errorf("%s: at the limit: %.200v", c.name, err)
		}
	}
}

// arrays is a schema document depth levels deep: arrays in each other's
// items.
func arrays(depth int) string {
	return strings.Repeat(`{"items":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// manyNodes is a schema of about n nodes: objects of objects of objects
// of enums, each object (two nodes: itself and its keys) as wide as it
// may be.
func manyNodes(n int) string {
	var b strings.Builder
	made := 1 // the root's reference
	var object func(level int)
	object = func(level int) {
		b.WriteString(`{"properties":{`)
		made += 2
		for i := 0; i < MaxProperties && made < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%d":`, i)
			if level == 0 {
				b.WriteString(`{"enum":[1]}`)
				made++
			} else {
				object(level - 1)
			}
		}
		b.WriteString(`}}`)
	}
	object(2)
	return b.String()
}

// TestDeepSchemaIsCheap: a schema document 10,000 levels deep (arrays
// and objects) is refused naming the depth limit, at a cost of well
// under 5 MiB (the bytes allocated are deterministic, not a timing).
func TestDeepSchemaIsCheap(t *testing.T) {
	for name, schema := range deepDocs(10000) {
		var err error
		alloc := allocated(func() { _, err = Compile(schema) })
		if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "nesting depth exceeds the limit of 128") {
			t.Fatalf("%s: %v, want the depth limit", name, err)
		}
		if alloc >= 5<<20 {
			t.Fatalf("%s: refusing a %d-byte schema allocated %d bytes", name, len(schema), alloc)
		}
		t.Logf("%s (%d bytes): %d bytes allocated", name, len(schema), alloc)
	}
}

// deepDocs are schema documents depth levels deep: in items, in
// properties, and in an annotation (JSON that is not a schema).
func deepDocs(depth int) map[string][]byte {
	return map[string][]byte{
		"items":      []byte(arrays(depth)),
		"properties": []byte(strings.Repeat(`{"properties":{"a":`, depth/2) + `{}` + strings.Repeat(`}}`, depth/2)),
		"annotation": []byte(`{"description":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`),
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// BenchmarkCompileMemory records the bytes a compilation allocates (B/op)
// for a schema 10,000 levels deep (refused by the depth limit), a
// recursive tree, and a document at the depth limit: each well under
// 5 MiB.
func BenchmarkCompileMemory(b *testing.B) {
	for _, c := range []struct {
		name    string
		schema  []byte
		refused bool
	}{
		{"depth-10000", deepDocs(10000)["items"], true},
		{"tree", []byte(schemas["tree"]), false},
		{"thread", []byte(schemas["thread"]), false},
		{"depth-128", []byte(arrays(MaxSchemaDepth)), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(c.schema); (err != nil) != c.refused {
					b.Fatalf("refused: %v, want %v", err, c.refused)
				}
			}
		})
	}
}

// TestEnumAtLimit: an enum of MaxEnumValues strings sharing long prefixes
// accepts each value and nothing else.
func TestEnumAtLimit(t *testing.T) {
	vals := make([]string, MaxEnumValues)
	for i := range vals {
		vals[i] = fmt.Sprintf(`"item-%04d"`, i*3)
	}
	s := compileText(t, `{"enum":[`+strings.Join(vals, ",")+`]}`)
	rng := rand.New(rand.NewPCG(9, 9))
	for range 500 {
		i := rng.IntN(MaxEnumValues * 3)
		text := fmt.Sprintf(`"item-%04d"`, i)
		if got := accepts(s, text); got != (i%3 == 0) {
			t.Fatalf("%s: accepted %v", text, got)
		}
	}
	if accepts(s, `"item-"`) || accepts(s, `"item-00000"`) {
		t.Fatal("a prefix or an extension of a value accepted")
	}
}

// TestLongNumber: a number at its length bound can always end: the last
// byte it allows is never one after which a digit must come.
func TestLongNumber(t *testing.T) {
	s := compileText(t, `{"type":"number"}`)
	for _, prefix := range []string{"1234567890123456789012", "-123456789012345678901", "1.234567890123456789012", "1e", "1.5E+"} {
		for n := len(prefix); n <= maxNumber; n++ {
			text := prefix + strings.Repeat("1", n-len(prefix))
			m := s.Matcher()
			if !m.Advance([]byte(text)) {
				break
			}
			if !m.Complete() && !anyByte(m) {
				t.Fatalf("nothing may follow %q", text)
			}
			for _, b := range []byte("-.e+") {
				if c := m; c.Advance([]byte{b}) && !c.Complete() && !anyByte(c) {
					t.Fatalf("nothing may follow %q", text+string(b))
				}
			}
		}
	}
	if accepts(s, "12345678901234567890123.") || !accepts(s, "123456789012345678901234") {
		t.Fatal("the length bound is not where it was")
	}
}

// TestZeroMatcher: a Matcher not made by a Schema refuses everything
// rather than panicking.
func TestZeroMatcher(t *testing.T) {
	var m Matcher
	v := NewVocab(300, func(id int) []byte { return []byte{byte(id)} })
	dst := make([]uint64, 5)
	m.Allowed(v, dst)
	if m.Advance([]byte("{")) || m.Complete() || dst[0]|dst[1]|dst[2]|dst[3]|dst[4] != 0 {
		t.Fatal("the zero Matcher accepted something")
	}
}

// hostileSchemas are schemas built to hurt: cycles, deep nesting, huge
// enums and objects, exponential expansion by reference, and malformed
// documents.
func hostileSchemas() []string {
	manyRefs := `{"$defs":{"s":{"type":"string","maxLength":3}},"type":"object","properties":{`
	for i := range MaxProperties {
		if i > 0 {
			manyRefs += ","
		}
		manyRefs += fmt.Sprintf(`"p%d":{"$ref":"#/$defs/s"}`, i)
	}
	manyRefs += `}}`
	var laughs strings.Builder
	laughs.WriteString(`{"$defs":{`)
	for i := range 60 {
		fmt.Fprintf(&laughs, `"d%d":{"type":"array","minItems":1,"maxItems":1,"items":{"anyOf":[{"$ref":"#/$defs/d%d"},{"type":"string"}]}},`, i, i+1)
	}
	laughs.WriteString(`"d60":{"type":"integer"}},"$ref":"#/$defs/d0"}`)
	docs := deepDocs(5000)
	return []string{
		`{"$ref":"#"}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/b"}},"b":{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"required":["a"]}},"$ref":"#/$defs/a"}`,
		schemas["tree"], schemas["thread"], schemas["list"], schemas["definitions"],
		`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`,
		`{"anyOf":[{"$ref":"#"}]}`,
		`{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#"},"minItems":1}]}`,
		`{"type":["object","array"],"properties":{"x":{"$ref":"#"}},"items":{"$ref":"#"},"required":["x"]}`,
		string(docs["items"]), string(docs["properties"]), string(docs["annotation"]),
		arrays(MaxSchemaDepth), nestedRequired(MaxDepth - 1), nestedRequired(MaxDepth),
		bigEnum(MaxEnumValues / 2), bigEnum(MaxEnumValues),
		`{"enum":[` + strings.Repeat(`"a",`, 5000) + `"a"]}`,
		manyRefs, laughs.String(),
		`{"type":"string","minLength":1073741824}`,
		`{"type":"array","minItems":1,"items":false}`,
		`{"type":"object","properties":{},"required":[]}`,
		`{"const":{"a":[1,{"b":null}]}}`,
		`{"$defs":{"a/b~":{"type":"integer"}},"$ref":"#/$defs/a~1b~0"}`,
		`{"$ref":"#/$defs/%"}`, `{"$ref":"#/$defs/"}`, `{"$ref":"#/$defs"}`, `{"$ref":"#/"}`,
		`{"type":"object","properties":{"a":{}},"required":["a","a"]}`,
		`{"type":`, `{"a":1}x`, `[1,]`, `{"a" 1}`, "{\"enum\":[\"\xff\"]}", `{"enum":["\ud800"]}`, `01`, ``,
		patternSchema(`(a|b)*a(a|b){20}`), patternSchema(`[\s\S]{1000}`), patternSchema(`(?i)\p{L}{1000}`),
		patternSchema(`^(?:"|\\|\x00)+$`), patternSchema(`^$`), patternSchema(`[^\x00-\x{10FFFF}]`),
		`{"type":"string","pattern":"a","maxLength":100000}`, `{"type":"string","format":"hostname","minLength":250}`,
		`{"type":"integer","minimum":-1e20,"maximum":1e20,"multipleOf":9999}`, `{"type":"number","minimum":1e-64,"maximum":1e-63}`,
		`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1e-22}`, `{"type":"number","minimum":1e999999999}`,
		`{"type":"integer","maximum":-1e999999999}`, `{"type":"number","multipleOf":1e-64}`, manyPatterns(),
	}
}

// manyPatterns is an object of many distinct patterns, each costly:
// together beyond the automata's budget.
func manyPatterns() string {
	var props []string
	for i := range 60 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string","pattern":"(a|b)*a(a|b){9}x%d"}`, i, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

// checkSchema compiles a schema and feeds out to its matcher: neither
// panics, and the matcher never stands where nothing may follow (at every
// step it is complete or some byte is allowed), and Allowed agrees with
// the reference there.
func checkSchema(t *testing.T, schema string, out []byte, vocab [][]byte, v *Vocab) {
	s, err := Compile([]byte(schema))
	if err != nil {
		if s != nil || err.Error() == "" {
			t.Fatalf("%.100q: schema %v with error %q", schema, s, err)
		}
		return
	}
	m := s.Matcher()
	out = out[:min(len(out), 48)]
	for i := 0; ; i++ {
		if !m.Complete() && !anyByte(m) {
			t.Fatalf("%.200q: nothing may follow %q", schema, out[:i])
		}
		if i == len(out) {
			break
		}
		m.Advance(out[i : i+1]) // a refused byte is skipped
	}
	dst := make([]uint64, (len(vocab)+63)/64)
	m.Allowed(v, dst)
	if want := referenceAllowed(m, vocab); !reflect.DeepEqual(dst, want) {
		t.Fatalf("%.200q after %q: Allowed differs from the reference", schema, out)
	}
}

// anyByte reports whether some byte may follow.
func anyByte(m Matcher) bool {
	for b := range 256 {
		if c := m; c.Advance([]byte{byte(b)}) {
			return true
		}
	}
	return false
}

// FuzzCompile: any schema text and any output bytes. The seeds are the
// hostile schemas with outputs that go deep.
func FuzzCompile(f *testing.F) {
	outs := [][]byte{[]byte(`{"name":"a","children":[{"name":"b","children":[{`), []byte(strings.Repeat("[", 40)),
		[]byte(strings.Repeat(`{"next":`, 40)), []byte(`"v1`), []byte(`{"p0":"abc","p1":"`)}
	for i, s := range hostileSchemas() {
		f.Add(s, outs[i%len(outs)])
	}
	rng := rand.New(rand.NewPCG(11, 12))
	vocab := randomVocab(rng, 300)
	v := NewVocab(len(vocab), func(id int) []byte { return vocab[id] })
	f.Fuzz(func(t *testing.T, schema string, out []byte) {
		checkSchema(t, schema, out, vocab, v)
	})
}

// FuzzDecode: the schema decoder reads what encoding/json reads, the same
// way, and refuses what it refuses (documents within the depth limit).
func FuzzDecode(f *testing.F) {
	for _, s := range hostileSchemas() {
		f.Add(s)
	}
	for _, s := range []string{` {"a" : [1, -2.5e3, "x\n\u00e9", true, false, null] , "b":{}} `, `"\ud83d\ude00"`, `1e`, `-`, `tru`, `[1 2]`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		got, err := decode([]byte(doc))
		if errors.Is(err, ErrLimit) {
			return
		}
		var want any
		d := json.NewDecoder(strings.NewReader(doc))
		d.UseNumber()
		werr := d.Decode(&want)
		if werr == nil && d.InputOffset() < int64(len(strings.TrimRight(doc, " \t\r\n"))) {
			werr = errors.New("data after the value")
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decode says %v, encoding/json %v", doc, err, werr)
		}
		if err == nil && !reflect.DeepEqual(plain(got), want) {
			t.Fatalf("%q: decode read %#v, encoding/json %#v", doc, plain(got), want)
		}
	})
}

// randomSchema builds a schema of a few $defs that refer to each other
// and to the root at random, through arrays, objects (required
// properties or not), unions and plain references: recursion of every
// shape, some of it without a base case.
func randomSchema(rng *rand.Rand) string {
	defs := 1 + rng.IntN(4)
	var sub func(depth int) string
	sub = func(depth int) string {
		pick := rng.IntN(10)
		if depth > 3 {
			pick = 2 + rng.IntN(3)
		}
		switch pick {
		case 0:
			return fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, rng.IntN(defs))
		case 1:
			return `{"$ref":"#"}`
		case 2:
			return fmt.Sprintf(`{"type":"string","maxLength":%d}`, rng.IntN(4))
		case 3:
			return `{"type":"integer"}`
		case 4:
			return []string{`{"enum":["a","ab",1,12,null]}`, `{"type":"string","pattern":"^[ab]{1,3}$"}`,
				`{"type":"integer","minimum":-5,"exclusiveMaximum":40,"multipleOf":3}`, `{"type":"string","format":"ipv4"}`,
				`{"type":"number","minimum":-2.5,"maximum":2.5,"multipleOf":0.5}`}[rng.IntN(5)]
		case 5, 6:
			return fmt.Sprintf(`{"type":"array","items":%s,"minItems":%d,"maxItems":%d}`, sub(depth+1), rng.IntN(2), 1+rng.IntN(2))
		case 7, 8:
			var props, req []string
			for i := range 1 + rng.IntN(3) {
				props = append(props, fmt.Sprintf(`"p%d":%s`, i, sub(depth+1)))
				if rng.IntN(2) == 0 {
					req = append(req, fmt.Sprintf(`"p%d"`, i))
				}
			}
			return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s]}`, strings.Join(props, ","), strings.Join(req, ","))
		}
		return fmt.Sprintf(`{"anyOf":[{"type":"null"},%s]}`, sub(depth+1))
	}
	var parts []string
	for i := range defs {
		parts = append(parts, fmt.Sprintf(`"d%d":%s`, i, sub(0)))
	}
	return fmt.Sprintf(`{"$defs":{%s},"$ref":"#/$defs/d0"}`, strings.Join(parts, ","))
}

// FuzzRandomSchema: random recursive schemas either are refused or give
// a matcher that never stands where nothing may follow, whose complete
// outputs an independent validator accepts.
func FuzzRandomSchema(f *testing.F) {
	for seed := range uint64(24) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
		schema := randomSchema(rng)
		s, err := Compile([]byte(schema))
		if err != nil {
			return
		}
		var v *jsonschema.Schema
		for range 3 {
			text, ok := walkChecked(t, rng, s, schema)
			if !ok {
				continue
			}
			if v == nil {
				v = testkit.JSONSchema(t, schema)
			}
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s: %q is not JSON: %v", schema, text, err)
			}
			if err := v.Validate(doc); err != nil {
				t.Fatalf("%s: %q does not validate: %v", schema, text, err)
			}
		}
	})
}

// walkChecked writes a random value of up to 300 bytes, leaning towards
// closing, and fails the test wherever nothing may follow. It reports
// whether the value was finished.
func walkChecked(t *testing.T, rng *rand.Rand, s *Schema, schema string) (string, bool) {
	m := s.Matcher()
	var out []byte
	for len(out) < 300 {
		if m.Complete() && (m.done || rng.IntN(3) == 0) {
			return string(out), true
		}
		var ok []byte
		for b := range 256 {
			if c := m; c.Advance([]byte{byte(b)}) {
				ok = append(ok, byte(b))
			}
		}
		if len(ok) == 0 {
			if m.Complete() {
				return string(out), true
			}
			t.Fatalf("%s: nothing may follow %q", schema, out)
		}
		b := ok[rng.IntN(len(ok))]
		for _, c := range []byte(`"]}`) {
			if bytes.IndexByte(ok, c) >= 0 && rng.IntN(3) == 0 {
				b = c
			}
		}
		m.Advance([]byte{b})
		out = append(out, b)
	}
	return "", false
}
