package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// schemas are the test schemas: each kind, nesting, unions, enums, $ref.
var schemas = map[string]string{
	"person": `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},
		"age":{"type":"integer"},"email":{"type":["string","null"],"maxLength":20},
		"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":3},
		"ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false}`,
	"enum":   `{"enum":["red","green",1,12,null,{"a":[1,2]}]}`,
	"nested": `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":4}},"required":["b"]}},"required":["a"]}`,
	"union":  `{"anyOf":[{"type":"string","maxLength":5},{"type":"integer"},{"type":"array","items":{"const":"x"},"maxItems":2}]}`,
	"ref": `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
		"$ref":"#/$defs/node"}`,
	"number": `{"type":"number"}`,
	"any":    `{"type":"object"}`,
	"array":  `{"type":"array","minItems":2,"maxItems":3}`,
	// Recursion: through # (a tree), through $defs both ways (a thread of
	// replies), through definitions with escaped and percent-encoded
	// names, and a required self-reference ended by an alternative.
	"tree": `{"type":"object","properties":{"name":{"type":"string","maxLength":4},
		"children":{"type":"array","items":{"$ref":"#"},"maxItems":2}},"required":["name","children"],"additionalProperties":false}`,
	"thread": `{"$defs":{"post":{"type":"object","properties":{"text":{"type":"string","maxLength":5},"replies":{"$ref":"#/$defs/replies"}},"required":["text"]},
		"replies":{"type":"array","items":{"$ref":"#/$defs/post"},"maxItems":2}},"$ref":"#/$defs/post"}`,
	"definitions": `{"definitions":{"a/b":{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#/definitions/a~1b"},"maxItems":3}]},
		"t~x":{"type":"object","properties":{"v":{"$ref":"#/definitions/a%7E1b"}},"required":["v"]}},"$ref":"#/definitions/t~0x"}`,
	"list":    `{"anyOf":[{"type":"null"},{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#"}},"required":["v","next"]}]}`,
	"bigenum": bigEnum(300),
	// Patterns, formats and numeric keywords: automaton nodes.
	"keywords": `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},
		"when":{"type":"string","format":"date-time"},"ip":{"type":"string","format":"ipv6"},
		"n":{"type":"integer","minimum":-20,"maximum":300,"multipleOf":3},
		"x":{"type":"number","exclusiveMinimum":-1.5,"maximum":2.25,"multipleOf":0.25},
		"tag":{"type":["string","null"],"pattern":"é|\\n|\"","maxLength":5},"z":{"type":"number"}},"required":["code","n"]}`,
}

// bigEnum is an enum of n values: strings sharing prefixes, numbers that
// are prefixes of each other, and a few other values.
func bigEnum(n int) string {
	vals := []string{`null`, `true`, `[1,2]`, `{"k":"v"}`}
	for i := range n {
		vals = append(vals, fmt.Sprintf(`"v%d"`, i), fmt.Sprint(i*7))
	}
	return `{"enum":[` + strings.Join(vals, ",") + `]}`
}

func compile(t testing.TB, name string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schemas[name]))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func accepts(s *Schema, text string) bool {
	m := s.Matcher()
	return m.Advance([]byte(text)) && m.Complete()
}

func TestExamples(t *testing.T) {
	cases := []struct {
		schema, text string
		want         bool
	}{
		{"person", `{"name":"Ann","age":30,"ok":true}`, true},
		{"person", `{"name":"Ann","age":30,"email":null,"tags":["a","b"],"ok":false}`, true},
		{"person", `{"age":30,"name":"Ann","ok":true}`, false},                          // schema order
		{"person", `{"name":"Ann","age":30}`, false},                                    // ok required
		{"person", `{"name":"","age":30,"ok":true}`, false},                             // minLength
		{"person", `{"name":"Ann","age":3.5,"ok":true}`, false},                         // integer
		{"person", `{"name":"Ann","age":30,"ok":true,}`, false},                         // trailing comma
		{"person", `{"name": "Ann","age":30,"ok":true}`, false},                         // no whitespace
		{"person", `{"name":"Ann","age":30,"tags":["a","b","c","d"],"ok":true}`, false}, // maxItems
		{"person", `{"name":"A\u00e9\n","age":0,"ok":true}`, true},
		{"person", `{"name":"A","age":-0,"ok":true}`, false},      // no negative zero
		{"person", `{"name":"A\ud800","age":1,"ok":true}`, false}, // lone surrogate escape
		{"person", "{\"name\":\"\xc3\xa9t\xc3\",\"age\":1,\"ok\":true}", false},
		{"person", "{\"name\":\"\xe2\x82\xac\",\"age\":1,\"ok\":true}", true},
		{"enum", `"green"`, true},
		{"enum", `12`, true},
		{"enum", `1`, true},
		{"enum", `13`, false},
		{"enum", `{"a":[1,2]}`, true},
		{"number", `-12.5e+3`, true},
		{"number", `012`, false},
		{"number", `1.`, false},
		{"union", `"abcde"`, true},
		{"union", `"abcdef"`, false},
		{"union", `["x","x"]`, true},
		{"union", `-7`, true},
		{"ref", `{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}`, true},
		{"ref", `{"v":1,"kids":[{}]}`, false},
		{"any", `{"x":[1,{"y":null}],"z":"w"}`, true},
		{"any", `[1]`, false},
		{"array", `[1,"a",{}]`, true},
		{"array", `[1]`, false},
		{"tree", `{"name":"a","children":[{"name":"b","children":[]},{"name":"c","children":[{"name":"","children":[]}]}]}`, true},
		{"tree", `{"name":"a","children":[{"name":"b"}]}`, false}, // children required
		{"thread", `{"text":"hi","replies":[{"text":"a"},{"text":"b","replies":[]}]}`, true},
		{"thread", `{"text":"hi","replies":[{"text":"a"},{"text":"b"},{"text":"c"}]}`, false}, // maxItems
		{"definitions", `{"v":[1,[2,[]],3]}`, true},
		{"definitions", `{"v":"x"}`, false},
		{"list", `{"v":1,"next":{"v":2,"next":null}}`, true},
		{"list", `null`, true},
		{"list", `{"v":1}`, false},
		{"bigenum", `"v299"`, true},
		{"bigenum", `"v300"`, false},
		{"bigenum", `7`, true},
		{"bigenum", `70`, true},
		{"bigenum", `71`, false},
		{"bigenum", `{"k":"v"}`, true},
		{"keywords", `{"code":"AB-123","when":"2024-02-29T12:00:00Z","ip":"::1","n":-18,"x":-1.25,"tag":"\"é","z":-0.5e3}`, true},
		{"keywords", `{"code":"AB-123","n":300,"tag":null}`, true},
		{"keywords", `{"code":"AB-1234","n":3}`, false},
		{"keywords", `{"code":"AB-123","n":301}`, false},
		{"keywords", `{"code":"AB-123","n":3,"x":-1.5}`, false},
		{"keywords", `{"code":"AB-123","n":3,"when":"2023-02-29T12:00:00Z"}`, false},
		{"keywords", `{"code":"AB-123","n":3,"tag":"abc"}`, false},
		{"keywords", `{"code":"AB-123","n":-0}`, false},
	}
	for _, c := range cases {
		if got := accepts(compile(t, c.schema), c.text); got != c.want {
			t.Errorf("%s %s: accepted %v, want %v", c.schema, c.text, got, c.want)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	for schema, word := range map[string]string{
		`{"type":"string","pattern":"(?=a)"}`:                        "pattern",
		`{"type":"string","format":"uri"}`:                           "format",
		`{"oneOf":[{"type":"string"}]}`:                              "oneOf",
		`{"type":"object","additionalProperties":{"type":"string"}}`: "additionalProperties",
		`{"anyOf":[{"type":"string"},{"enum":["a"]}]}`:               "same character",
		`{"$ref":"http://example.com/s.json"}`:                       "$ref",
		`{"type":"object","properties":{"a":{}},"required":["b"]}`:   "not among",
		`false`: "accepts nothing",
	} {
		_, err := Compile([]byte(schema))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), word) {
			t.Errorf("%s: %v, want ErrUnsupported naming %q", schema, err, word)
		}
	}
	if _, err := Compile([]byte(`{"type":`)); err == nil {
		t.Error("truncated schema compiled")
	}
}

// randomValue walks the automaton byte by byte, choosing among the bytes
// it accepts, leaning towards closing after a while, until the value is
// complete; "" if it did not finish within a bound.
func randomValue(rng *rand.Rand, s *Schema) string {
	m := s.Matcher()
	var out []byte
	for len(out) < 4000 {
		if m.Complete() && (m.done || rng.IntN(4) == 0) {
			return string(out)
		}
		var ok []byte
		for b := range 256 {
			c := m
			if c.Advance([]byte{byte(b)}) {
				ok = append(ok, byte(b))
			}
		}
		if len(ok) == 0 {
			return ""
		}
		b := ok[rng.IntN(len(ok))]
		if len(out) > 60 {
			for _, c := range []byte(`"]}`) {
				if bytes.IndexByte(ok, c) >= 0 && rng.IntN(2) == 0 {
					b = c
				}
			}
		}
		m.Advance([]byte{b})
		out = append(out, b)
	}
	return ""
}

// TestGeneratedValidates: whatever the automaton accepts as complete is
// JSON that an independent validator accepts against the schema.
func TestGeneratedValidates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for name, schema := range schemas {
		v := testkit.JSONSchema(t, schema)
		s := compile(t, name)
		done := 0
		for range 200 {
			text := randomValue(rng, s)
			if text == "" {
				continue
			}
			done++
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s: %q is not JSON: %v", name, text, err)
			}
			if err := v.Validate(doc); err != nil {
				t.Fatalf("%s: %q does not validate: %v", name, text, err)
			}
		}
		if done < 150 {
			t.Fatalf("%s: only %d of 200 walks finished", name, done)
		}
	}
}

// randomVocab makes tokens of JSON-ish pieces: punctuation runs, letters,
// digits, escapes, multi-byte and partial UTF-8.
func randomVocab(rng *rand.Rand, n int) [][]byte {
	parts := []string{`"`, `{`, `}`, `[`, `]`, `,`, `:`, `\`, `\n`, `\u00`, `e9`, `d8`, `ab`, `a`, `b`,
		`true`, `null`, `fal`, `se`, `-`, `0`, `1`, `2`, `.`, `e`, `+`, ` `, "\n", "é", "\xe2\x82", "\xac", "€",
		"name", "age", "ok", "tags", "v", "kids", "x", "red", "green"}
	vocab := make([][]byte, n)
	for i := range vocab {
		if i < 256 {
			vocab[i] = []byte{byte(i)}
			continue
		}
		var p []byte
		for range 1 + rng.IntN(4) {
			p = append(p, parts[rng.IntN(len(parts))]...)
		}
		vocab[i] = p
	}
	vocab[n-1] = nil // a control token
	return vocab
}

// referenceAllowed is the plain mask: every token tried on a copy.
func referenceAllowed(m Matcher, vocab [][]byte) []uint64 {
	dst := make([]uint64, (len(vocab)+63)/64)
	for id, p := range vocab {
		c := m
		if len(p) > 0 && c.Advance(p) {
			dst[id/64] |= 1 << (id % 64)
		}
	}
	return dst
}

// checkAllowed compares Allowed with the reference along a random path.
func checkAllowed(t *testing.T, rng *rand.Rand, s *Schema, vocab [][]byte, v *Vocab) {
	m := s.Matcher()
	dst := make([]uint64, (len(vocab)+63)/64)
	for step := 0; step < 40 && !m.done; step++ {
		before := m
		m.Allowed(v, dst)
		if m.depth != before.depth || m.done != before.done || !slices.Equal(m.stack[:m.depth], before.stack[:before.depth]) {
			t.Fatal("Allowed changed the matcher")
		}
		want := referenceAllowed(m, vocab)
		for w := range want {
			if dst[w] != want[w] {
				diff := dst[w] ^ want[w]
				id := w*64 + firstBit(diff)
				t.Fatalf("step %d: token %d %q: Allowed says %v, reference %v", step, id, vocab[id], dst[w]&diff != 0, want[w]&diff != 0)
			}
		}
		var ids []int
		for id := range vocab {
			if want[id/64]&(1<<(id%64)) != 0 {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return
		}
		m.Advance(vocab[ids[rng.IntN(len(ids))]])
	}
}

func firstBit(x uint64) int {
	for i := range 64 {
		if x&(1<<i) != 0 {
			return i
		}
	}
	return -1
}

func TestAllowedMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := randomVocab(rng, 3000)
	v := NewVocab(len(vocab), func(id int) []byte { return vocab[id] })
	for name := range schemas {
		for range 3 {
			t.Run(name, func(t *testing.T) { checkAllowed(t, rng, compile(t, name), vocab, v) })
		}
	}
	t.Run("json_object", func(t *testing.T) { checkAllowed(t, rng, AnyObject(), vocab, v) })
}

// FuzzAllowed compares the trie walk with the reference on fuzzed
// vocabularies and paths.
func FuzzAllowed(f *testing.F) {
	f.Add(uint64(1), uint8(0))
	f.Add(uint64(99), uint8(3))
	names := []string{"person", "enum", "nested", "union", "ref", "number", "any", "array", "tree", "thread", "definitions", "list", "bigenum", "keywords"}
	f.Fuzz(func(t *testing.T, seed uint64, which uint8) {
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		vocab := randomVocab(rng, 400)
		v := NewVocab(len(vocab), func(id int) []byte { return vocab[id] })
		checkAllowed(t, rng, compile(t, names[int(which)%len(names)]), vocab, v)
	})
}

func TestAllowedDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vocab := randomVocab(rng, 3000)
	v := NewVocab(len(vocab), func(id int) []byte { return vocab[id] })
	dst := make([]uint64, (len(vocab)+63)/64)
	for _, at := range [][2]string{{"person", `{"name":"A`}, {"keywords", `{"code":"A`}, {"keywords", `{"code":"AB-123","n":1`}} {
		m := compile(t, at[0]).Matcher()
		if !m.Advance([]byte(at[1])) {
			t.Fatalf("%s refused", at[1])
		}
		if n := testing.AllocsPerRun(20, func() { m.Allowed(v, dst) }); n != 0 {
			t.Fatalf("Allowed after %s: %v allocations per call", at[1], n)
		}
	}
}

// syntheticVocab makes n tokens shaped like a byte-level BPE vocabulary:
// the 256 bytes, then words with and without a leading space, digit runs
// and punctuation runs.
func syntheticVocab(rng *rand.Rand, n int) [][]byte {
	vocab := make([][]byte, n)
	punct := []string{`"`, `",`, `":`, `{"`, `"}`, `},`, `[`, `]`, `],`, `":"`, `","`, `\n`, `.`, `,`, ` (`, `)`, `-`}
	for i := range vocab {
		switch {
		case i < 256:
			vocab[i] = []byte{byte(i)}
		case i%50 == 0:
			vocab[i] = []byte(punct[rng.IntN(len(punct))] + punct[rng.IntN(len(punct))])
		case i%13 == 0:
			vocab[i] = []byte(fmt.Sprint(rng.IntN(1000)))
		default:
			w := make([]byte, 0, 12)
			if rng.IntN(2) == 0 {
				w = append(w, ' ')
			}
			for range 2 + rng.IntN(8) {
				w = append(w, byte('a'+rng.IntN(26)))
			}
			vocab[i] = w
		}
	}
	return vocab
}

// BenchmarkAllowed is the mask's cost per step at Qwen2.5's vocabulary
// size (151,936 tokens of a synthetic BPE-shaped vocabulary), at the
// points of an output where it differs: the start of an object, inside a
// string, after a key, inside a number.
func BenchmarkAllowed(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	vocab := syntheticVocab(rng, 151936)
	v := NewVocab(len(vocab), func(id int) []byte { return vocab[id] })
	dst := make([]uint64, (len(vocab)+63)/64)
	for _, at := range []struct{ name, schema, prefix string }{
		{"object-start", "person", ``},
		{"in-string", "person", `{"name":"Ann`},
		{"in-string-free", "any", `{"k":"some text`},
		{"after-key", "person", `{"name":"Ann","age"`},
		{"in-number", "person", `{"name":"Ann","age":3`},
		{"in-pattern", "keywords", `{"code":"A`},
		{"in-format", "keywords", `{"code":"AB-123","when":"2024-`},
		{"in-bounded-number", "keywords", `{"code":"AB-123","n":1`},
	} {
		m := compile(b, at.schema).Matcher()
		if !m.Advance([]byte(at.prefix)) {
			b.Fatalf("%s: prefix refused", at.name)
		}
		b.Run(at.name, func(b *testing.B) {
			for b.Loop() {
				m.Allowed(v, dst)
			}
		})
	}
}

func TestSchemaOrderKept(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"integer"}},"required":["z","a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !accepts(s, `{"z":1,"a":2}`) || accepts(s, `{"a":2,"z":1}`) {
		t.Fatal("properties not in the schema's order")
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(`{"z":1,"a":2}`), &doc); err != nil {
		t.Fatal(err)
	}
}
