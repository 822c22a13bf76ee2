package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// callFunctions are the test functions: names that are prefixes of each
// other, an enum, a nested object, and no parameters at all.
func callFunctions() []Function {
	return []Function{
		{Name: "get", Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","maxLength":6}},"required":["key"]}`)},
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{
			"city":{"type":"string","minLength":1,"maxLength":10},"unit":{"enum":["c","f"]},
			"at":{"type":"object","properties":{"day":{"type":"integer"}},"required":["day"]}},
			"required":["city","unit"],"additionalProperties":false}`)},
		{Name: "now"},
	}
}

// callFormats are grammars shaped like the families' formats.
func callFormats() map[string]Calls {
	fs := callFunctions()
	return map[string]Calls{
		"hermes":  {Open: "<tool_call>\n{\"name\": \"", Mid: "\", \"arguments\": ", Close: "}\n</tool_call>", Sep: "\n", Parallel: true, Functions: fs},
		"single":  {Open: "{\"name\": \"", Mid: "\", \"parameters\": ", Close: "}", Functions: fs},
		"mistral": {Begin: "[TOOL_CALLS] [", End: "]", Open: "{\"name\": \"", Mid: "\", \"arguments\": ", Close: "}", Sep: ", ", Parallel: true, Functions: fs},
		"closed":  {Begin: "<calls>", End: "</calls>", Open: "<c>", Mid: ":", Close: "</c>", Functions: fs},
	}
}

func compileCallsT(t testing.TB, c Calls) *Schema {
	t.Helper()
	s, text, err := CompileCalls(c)
	if err != nil {
		t.Fatal(err)
	}
	if !IsCalls(text) {
		t.Fatalf("text %q is not recognised", text)
	}
	back, err := Compile(text)
	if err != nil {
		t.Fatalf("Compile(text): %v", err)
	}
	if back.root.kind != kCalls || len(back.root.calls.args) != len(c.Functions) {
		t.Fatal("Compile(text) is not the grammar")
	}
	return s
}

// parsedCall is a call read back by splitCalls.
type parsedCall struct {
	name string
	args string
}

// splitCalls reads output of grammar c back, independently of the
// matcher: Begin, calls (Open, name, Mid, one JSON value, Close) joined by
// Sep, End.
func splitCalls(c Calls, out string) ([]parsedCall, error) {
	rest, ok := strings.CutPrefix(out, c.Begin)
	if !ok {
		return nil, errors.New("no begin")
	}
	var calls []parsedCall
	for {
		if len(calls) > 0 {
			if rest == c.End {
				return calls, nil
			}
			if rest, ok = strings.CutPrefix(rest, c.Sep); !ok {
				return nil, errors.New("no separator")
			}
		}
		if rest, ok = strings.CutPrefix(rest, c.Open); !ok {
			return nil, errors.New("no open")
		}
		name, after, ok := strings.Cut(rest, c.Mid)
		if !ok {
			return nil, errors.New("no mid")
		}
		dec := json.NewDecoder(strings.NewReader(after))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		n := int(dec.InputOffset())
		calls = append(calls, parsedCall{name: name, args: after[:n]})
		if rest, ok = strings.CutPrefix(after[n:], c.Close); !ok {
			return nil, errors.New("no close")
		}
		if c.End == "" && rest == "" {
			return calls, nil
		}
	}
}

func TestCallsExamples(t *testing.T) {
	f := callFormats()
	for _, tc := range []struct {
		format, text string
		ok           bool
	}{
		{"hermes", "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"key\":\"ab\"}}\n</tool_call>", true},
		{"hermes", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>", true},
		{"hermes", "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>", false},               // required key
		{"hermes", "<tool_call>\n{\"name\": \"gets\", \"arguments\": {\"key\":\"a\"}}\n</tool_call>", false}, // unknown name
		{"hermes", "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\":1}}\n</tool_call>", false},        // no parameters
		{"hermes", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n", false},             // a separator must open a call
		{"hermes", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}", false},                             // unclosed
		{"hermes", "text<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>", false},
		{"single", "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Rome\",\"unit\":\"f\",\"at\":{\"day\":3}}}", true},
		{"single", "{\"name\": \"now\", \"parameters\": {}}{\"name\": \"now\", \"parameters\": {}}", false}, // one call only
		{"mistral", "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"get\", \"arguments\": {\"key\":\"k\"}}]", true},
		{"mistral", "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}", false}, // End missing
		{"mistral", "[TOOL_CALLS] []", false},
		{"closed", "<calls><c>get:{\"key\":\"\"}</c></calls>", true},
	} {
		s := compileCallsT(t, f[tc.format])
		m := s.Matcher()
		got := m.Advance([]byte(tc.text)) && m.Complete()
		if got != tc.ok {
			t.Errorf("%s %q: accepted %v, want %v", tc.format, tc.text, got, tc.ok)
		}
		if tc.ok {
			calls, err := splitCalls(f[tc.format], tc.text)
			if err != nil || len(calls) == 0 {
				t.Errorf("%s %q: read back %v, %v", tc.format, tc.text, calls, err)
			}
		}
	}
}

// TestCallsGeneratedValidate: every complete output of random walks
// through each grammar reads back as calls of known functions whose
// arguments validate against their schemas, and the walks reach every
// function and, where allowed, several calls.
func TestCallsGeneratedValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fs := callFunctions()
	validators := map[string]*jsonschema.Schema{}
	for _, f := range fs {
		p := string(f.Parameters)
		if p == "" {
			p = noParameters
		}
		validators[f.Name] = testkit.JSONSchema(t, p)
	}
	for name, c := range callFormats() {
		s := compileCallsT(t, c)
		names, most, done := map[string]bool{}, 0, 0
		for range 100 {
			out := randomValue(rng, s)
			if out == "" {
				continue
			}
			done++
			calls, err := splitCalls(c, out)
			if err != nil {
				t.Fatalf("%s: %q does not read back: %v", name, out, err)
			}
			most = max(most, len(calls))
			for _, call := range calls {
				v, ok := validators[call.name]
				if !ok {
					t.Fatalf("%s: %q calls %q", name, out, call.name)
				}
				doc, err := jsonschema.UnmarshalJSON(strings.NewReader(call.args))
				if err != nil {
					t.Fatalf("%s: arguments %q: %v", name, call.args, err)
				}
				if err := v.Validate(doc); err != nil {
					t.Fatalf("%s: arguments %q of %s do not validate: %v", name, call.args, call.name, err)
				}
				names[call.name] = true
			}
		}
		if done < 80 || len(names) != len(fs) || (c.Parallel && most < 2) || (!c.Parallel && most != 1) {
			t.Fatalf("%s: %d of 100 walks finished, functions %v, most calls %d", name, done, names, most)
		}
	}
}

// TestCallsAllowedMatchesReference: the trie walk's masks are the plain
// per-token masks along random paths through each grammar.
func TestCallsAllowedMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vocab := randomVocab(rng, 3000)
	for _, w := range []string{"<tool_call>", "\n{\"name\": \"", "get", "_weather", "\", \"arguments\": ", "}\n</tool_call>", "[TOOL_CALLS]", " [", ", "} {
		vocab = append(vocab, []byte(w))
	}
	v := NewVocab(len(vocab), func(id int) []byte { return vocab[id] })
	for name, c := range callFormats() {
		s := compileCallsT(t, c)
		for range 6 {
			t.Run(name, func(t *testing.T) { checkAllowed(t, rng, s, vocab, v) })
		}
	}
}

// TestCallsRefused: malformed grammars are refused with errors that say
// why, a function's error names its index, and the text's limits hold.
func TestCallsRefused(t *testing.T) {
	fs := callFunctions()
	base := callFormats()["hermes"]
	with := func(edit func(*Calls)) Calls {
		c := base
		c.Functions = append([]Function(nil), fs...)
		edit(&c)
		return c
	}
	for what, tc := range map[string]struct {
		c     Calls
		word  string
		index int // the function named, -1: none
		limit bool
	}{
		"no functions":   {with(func(c *Calls) { c.Functions = nil }), "without functions", -1, false},
		"empty open":     {with(func(c *Calls) { c.Open = "" }), "must not be empty", -1, false},
		"duplicate":      {with(func(c *Calls) { c.Functions = append(c.Functions, Function{Name: "now"}) }), "twice", 3, false},
		"quote in name":  {with(func(c *Calls) { c.Functions[1].Name = `a"b` }), "quote", 1, false},
		"empty name":     {with(func(c *Calls) { c.Functions[0].Name = "" }), "non-empty", 0, false},
		"array params":   {with(func(c *Calls) { c.Functions[2].Parameters = json.RawMessage(`{"type":"array"}`) }), "object schema", 2, false},
		"bad keyword":    {with(func(c *Calls) { c.Functions[2].Parameters = json.RawMessage(`{"type":"object","oneOf":[]}`) }), "oneOf", 2, false},
		"end is sep":     {with(func(c *Calls) { c.End = "\n" }), "prefix", -1, false},
		"too many":       {with(func(c *Calls) { c.Functions = manyFunctions(MaxFunctions + 1) }), "129 functions", -1, true},
		"too large":      {with(func(c *Calls) { c.Functions[0].Parameters = bigParameters(MaxCallsBytes) }), "exceeds the limit", -1, true},
		"schema too big": {with(func(c *Calls) { c.Functions[2].Parameters = nestedParameters(MaxDepth - 1) }), "deeper", 2, true},
	} {
		_, _, err := CompileCalls(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.word) {
			t.Errorf("%s: err %v, want one saying %q", what, err, tc.word)
			continue
		}
		var fe *FunctionError
		switch {
		case tc.index >= 0 && (!errors.As(err, &fe) || fe.Index != tc.index):
			t.Errorf("%s: %v names no function %d", what, err, tc.index)
		case tc.index < 0 && errors.As(err, &fe):
			t.Errorf("%s: %v names a function", what, err)
		}
		if errors.Is(err, ErrLimit) != tc.limit {
			t.Errorf("%s: %v wraps ErrLimit: %v, want %v", what, err, errors.Is(err, ErrLimit), tc.limit)
		}
	}
	if _, err := Compile([]byte(callsPrefix + `{"open":"a","mid":"b","close":"c","functions":[{"name":"f"}],"extra":1}`)); err == nil {
		t.Error("a grammar text with an unknown field compiled")
	}
	if _, err := Compile([]byte(callsPrefix + strings.Repeat(" ", MaxCallsBytes))); !errors.Is(err, ErrLimit) {
		t.Errorf("an oversized grammar text: %v", err)
	}
}

func manyFunctions(n int) []Function {
	out := make([]Function, n)
	for i := range out {
		out[i] = Function{Name: "f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))}
	}
	return out
}

// bigParameters is an object schema of about n bytes of descriptions.
func bigParameters(n int) json.RawMessage {
	return json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", n) + `"}`)
}

// nestedParameters is an object schema whose values must nest depth
// levels of objects.
func nestedParameters(depth int) json.RawMessage {
	var b bytes.Buffer
	for range depth {
		b.WriteString(`{"type":"object","properties":{"a":`)
	}
	b.WriteString(`{"type":"integer"}`)
	for range depth {
		b.WriteString(`},"required":["a"]}`)
	}
	return json.RawMessage(b.String())
}

// FuzzCallsText: whatever follows the prefix, Compile returns a grammar
// or an error, and a grammar's random walks finish or stop cleanly.
func FuzzCallsText(f *testing.F) {
	for _, c := range callFormats() {
		_, text, err := CompileCalls(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(text))
	}
	f.Add(callsPrefix + `{"open":"x","mid":"y","close":"z","functions":[{"name":"a"},{"name":"ab"}],"end":"q","parallel":true}`)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Compile([]byte(text))
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(text))))
		for range 3 {
			randomValue(rng, s)
		}
	})
}
