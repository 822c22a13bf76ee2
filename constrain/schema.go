// Package constrain restricts generation to JSON that a schema accepts:
// a schema (or "any JSON object") compiles to a byte-level automaton, a
// Matcher follows one request's output through it, and at each step
// Matcher.Allowed marks the tokens of a vocabulary that may come next, so a
// sampler that masks the others produces valid output by construction,
// whichever model draws each token.
//
// The automaton emits compact JSON (no whitespace outside strings) and the
// properties of an object in the schema's order; both are valid for every
// schema it accepts. Keywords that would need more than that (oneOf, allOf,
// not, uniqueItems, …) are refused by Compile with an error naming them,
// never ignored.
//
// Structure (objects, arrays, unions) is followed by a hand-written
// matcher; a scalar with constraints beyond its type (a string's pattern,
// format, and length bounds beside them; a number's bounds and
// multipleOf; every integer and number) by a deterministic automaton over
// the bytes of its JSON text, built when the schema is compiled: a pattern
// through regexp/syntax and a Thompson NFA whose character classes spell
// the JSON encodings of their characters, a format as a fixed regular
// expression, numbers by exploring the states of a reader that compares
// the digits with each bound and keeps their remainder modulo
// multipleOf. Each is exact: the automaton accepts precisely the texts
// that satisfy the keywords, written in the one spelling it uses (see
// appendQuoted for strings; numbers in canonical form: no leading zeros,
// no negative zero, no exponent when bounded). States from which no
// accepted text can be reached are pruned, so no output dead-ends.
//
// A local $ref makes the compiled schema a graph rather than a tree: each
// referenced schema is compiled once and shared, and a recursive schema
// (a tree, a thread of comments) is a cycle in it. The output's nesting is
// bounded by MaxDepth; every node knows the least nesting any complete value
// of it takes, and the Matcher allows only what can still finish within
// the bound, so no output dead-ends however deep it goes. Compile refuses
// a schema no finite value satisfies (a $ref cycle with nothing between,
// a required self-reference without a base case), and bounds its own work
// and memory by limits (MaxSchemaBytes, MaxSchemaDepth, MaxSchemaNodes,
// MaxEnumValues, MaxProperties; see ErrLimit).
package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// kind is what a schema node accepts.
type kind uint8

const (
	kAny       kind = iota // any JSON value
	kObject                // an object with the node's properties
	kAnyObject             // any object
	kArray                 // an array of items
	kString                // a string
	kNumber                // a number
	kInteger               // an integer
	kLiteral               // one of at most 64 literal encodings (true, null, booleans, an object's keys)
	kEnum                  // one of a sorted list of literal encodings (enum, const)
	kUnion                 // one of alternatives, told apart by their first byte
	kRef                   // a $ref: only while compiling, replaced by its target once linked
)

// unbounded is the minDepth of a node no finite value satisfies.
const unbounded = math.MaxInt32

// node is one compiled schema node. Nodes are immutable once compiled;
// $ref cycles make the graph cyclic.
type node struct {
	kind kind
	// minDepth is the least nesting (frames of a Matcher, this node's
	// included) that a complete value of the node takes: 1 for a value
	// that needs no child, unbounded when no value is finite.
	minDepth int32
	// kObject: the properties in schema order and the node matching their
	// quoted names.
	props []prop
	keys  *node
	// kArray: items, and the item count bounds (maxItems < 0: none).
	items              *node
	minItems, maxItems int
	// kString: length bounds in characters (maxLen < 0: none).
	minLen, maxLen int
	// kString with pattern or format (its length bounds included), and
	// kNumber and kInteger: the automaton of the value's text.
	auto *automaton
	// kLiteral: the compact encodings (at most 64). kEnum: the compact
	// encodings, sorted and distinct.
	lits [][]byte
	// kUnion and kAny: the alternatives, and which one a first byte picks
	// (-1: none). kAnyObject: the nodes of a key and of a value.
	alts []*node
	pick *[256]int8
	// kRef: the referenced schema's node, set once it is compiled.
	target *node
	// kCalls: a call grammar (calls.go).
	calls *calls
}

// prop is one object property.
type prop struct {
	name     string
	node     *node
	required bool
}

// Schema is a compiled schema: what one request's output must match.
type Schema struct {
	root *node
	std  *stdNodes
}

// stdNodes are the nodes of unconstrained JSON, shared by one Schema's
// "any" positions.
type stdNodes struct {
	any, object, array, str, num, tru, fls, null *node
}

func newStd() *stdNodes {
	s := &stdNodes{
		str:  &node{kind: kString, maxLen: -1},
		num:  &node{kind: kNumber, auto: plainNumbers()},
		tru:  &node{kind: kLiteral, lits: [][]byte{[]byte("true")}},
		fls:  &node{kind: kLiteral, lits: [][]byte{[]byte("false")}},
		null: &node{kind: kLiteral, lits: [][]byte{[]byte("null")}},
	}
	s.any = &node{kind: kAny}
	s.object = &node{kind: kAnyObject, alts: []*node{s.str, s.any}} // a key, a value
	s.array = &node{kind: kArray, items: s.any, maxItems: -1}
	s.any.alts = []*node{s.str, s.object, s.array, s.num, s.tru, s.fls, s.null}
	for _, n := range s.all() {
		n.minDepth = 1 // each can be a scalar, {} or []
	}
	first := make([][4]uint64, len(s.any.alts))
	for i, a := range s.any.alts {
		first[i] = firstBytes(a)
	}
	s.any.pick = pickTable(first)
	return s
}

// all returns the standard nodes.
func (s *stdNodes) all() []*node {
	return []*node{s.any, s.object, s.array, s.str, s.num, s.tru, s.fls, s.null}
}

// AnyObject returns the schema of OpenAI's json_object mode: any JSON
// object.
func AnyObject() *Schema {
	std := newStd()
	return &Schema{root: std.object, std: std}
}

// annotations are keywords that do not restrict values ($id is checked
// apart: below the root it would change what a $ref means).
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true,
}

// ErrUnsupported wraps the errors of schemas that use a keyword or a form
// the automaton does not implement, or that no finite value satisfies.
var ErrUnsupported = errors.New("constrain: unsupported schema")

// compiler holds one Compile's state.
type compiler struct {
	doc    any
	std    *stdNodes
	refs   map[string]*node // the kRef node of each referenced schema, by target
	refAt  map[*node]string // each kRef node's $ref, for errors
	nodes  []*node          // every node of the schema, the standard ones included
	made   int              // the nodes compiled (the standard ones not counted)
	unions []pending        // the unions, checked once the references are linked
	idAt   *path            // where an $id below the root is (nil: none)
	hasRef bool             // the schema has a $ref
	bud    budget           // what the string and number automata cost
	autos  map[string]*automaton
}

// path is a place in the schema document, for errors: built as the
// compiler descends, spelled out only when an error names it (so that
// deep schemas with long names cost no more than their size).
type path struct {
	up  *path
	seg string
}

// to returns the place of seg inside p.
func (p *path) to(seg string) *path { return &path{up: p, seg: seg} }

// String returns the place as a JSON pointer, # first.
func (p *path) String() string {
	var segs []string
	for ; p != nil; p = p.up {
		segs = append(segs, p.seg)
	}
	slices.Reverse(segs)
	return strings.Join(segs, "/")
}

// pending is a union and where it is in the schema.
type pending struct {
	n  *node
	at *path
}

// Compile compiles a JSON schema. It supports type (one or a list),
// properties, required, additionalProperties (false, true or absent:
// only the listed properties are produced), items, minItems, maxItems,
// minLength, maxLength, pattern, format (date-time, date, time, duration,
// email, hostname, ipv4, ipv6, uuid), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf, enum, const (values the other keywords
// refuse left out), anyOf whose alternatives start with different bytes,
// and local $ref (#, #/$defs/… and #/definitions/…, recursion included);
// annotations (title, description, …) are allowed. Anything else, a
// pattern regexp/syntax cannot parse or that uses lookaround,
// backreferences, line anchors or word boundaries, and an empty set of
// values, are refused with an error wrapping ErrUnsupported that names
// the keyword's place; a schema beyond one of the limits (MaxSchemaBytes,
// MaxSchemaDepth, MaxSchemaNodes, MaxEnumValues, MaxProperties,
// MaxAutomatonStates, MaxAutomatonWork, MaxMultipleOf, MaxDecimalDigits,
// MaxDepth) with an error wrapping ErrLimit that names the limit. Time and
// memory are linear in the schema's size, and bounded by the limits. The text of a call grammar (CompileCalls) compiles
// to that grammar.
func Compile(schema []byte) (*Schema, error) {
	if IsCalls(schema) {
		return compileCallsText(schema) // a call grammar's text (calls.go)
	}
	doc, err := decode(schema)
	if err != nil {
		return nil, err
	}
	c := &compiler{doc: doc, std: newStd(), refs: map[string]*node{}, refAt: map[*node]string{}, autos: map[string]*automaton{}}
	c.nodes = append(c.nodes, c.std.all()...)
	ref, err := c.refTo("#", doc, "#")
	if err != nil {
		return nil, err
	}
	if c.idAt != nil && c.hasRef {
		return nil, fmt.Errorf("%w: %s/$id: an $id below the root in a schema with $ref (references would resolve against it)", ErrUnsupported, c.idAt)
	}
	root, err := c.link(ref)
	if err != nil {
		return nil, err
	}
	return &Schema{root: root, std: c.std}, nil
}

// add counts a new node against the limit and keeps it for linking.
func (c *compiler) add(n *node) (*node, error) {
	if c.made++; c.made > MaxSchemaNodes {
		return nil, fmt.Errorf("%w: node count exceeds the limit of %d", ErrLimit, MaxSchemaNodes)
	}
	c.nodes = append(c.nodes, n)
	return n, nil
}

func (c *compiler) compile(v any, at *path) (*node, error) {
	switch s := v.(type) {
	case bool:
		if !s {
			return nil, fmt.Errorf("%w: %s: the schema false accepts nothing", ErrUnsupported, at)
		}
		return c.std.any, nil
	case *obj:
		return c.object(s, at)
	}
	return nil, fmt.Errorf("constrain: %s: a schema must be an object or a boolean", at)
}

// known are the keywords object() handles.
var known = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "enum": true, "const": true,
	"anyOf": true, "$ref": true, "pattern": true, "format": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
}

func (c *compiler) object(o *obj, at *path) (*node, error) {
	s := o.m
	var unknown []string
	for k := range s {
		if !known[k] && !annotations[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: %s: keyword %s", ErrUnsupported, at, strings.Join(unknown, ", "))
	}
	if _, ok := s["$id"]; ok && o != c.doc && c.idAt == nil {
		c.idAt = at
	}
	if ref, ok := s["$ref"]; ok {
		if len(s) > 1+countAnnotations(s) {
			return nil, fmt.Errorf("%w: %s: $ref beside other keywords", ErrUnsupported, at)
		}
		return c.ref(ref, at)
	}
	if f, ok := s["format"]; ok {
		if err := formatName(f, at); err != nil {
			return nil, err
		}
	}
	if p, ok := s["pattern"]; ok {
		if _, isString := p.(string); !isString {
			return nil, fmt.Errorf("constrain: %s/pattern: want a string", at)
		}
	}
	if e, ok := s["const"]; ok {
		return c.literals([]any{e}, s, at.to("const"))
	}
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("constrain: %s/enum: want a non-empty array", at)
		}
		return c.literals(list, s, at.to("enum"))
	}
	if a, ok := s["anyOf"]; ok {
		for _, kw := range append([]string{"pattern", "format"}, numericKeywords...) {
			if _, ok := s[kw]; ok {
				return nil, fmt.Errorf("%w: %s: %s beside anyOf (put it in the alternatives)", ErrUnsupported, at, kw)
			}
		}
		return c.anyOf(a, at)
	}
	types, err := typeList(s["type"], s, at)
	if err != nil {
		return nil, err
	}
	var alts []*node
	for _, t := range types {
		n, err := c.typed(t, s, at)
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.union(alts, at.to("type"))
}

func (c *compiler) anyOf(a any, at *path) (*node, error) {
	list, ok := a.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("constrain: %s/anyOf: want a non-empty array", at)
	}
	var alts []*node
	for i, sub := range list {
		n, err := c.compile(sub, at.to("anyOf").to(strconv.Itoa(i)))
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	return c.union(alts, at.to("anyOf"))
}

// union makes a node of alternatives; that they start with different
// bytes is checked once the references are linked.
func (c *compiler) union(alts []*node, at *path) (*node, error) {
	n, err := c.add(&node{kind: kUnion, alts: alts})
	if err != nil {
		return nil, err
	}
	c.unions = append(c.unions, pending{n, at})
	return n, nil
}

func countAnnotations(s map[string]any) int {
	n := 0
	for k := range s {
		if annotations[k] {
			n++
		}
	}
	return n
}

// typeList returns the types a schema allows: its type keyword, or the
// one its other keywords imply, or every type.
func typeList(t any, s map[string]any, at *path) ([]string, error) {
	switch t := t.(type) {
	case string:
		return []string{t}, nil
	case []any:
		var out []string
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("constrain: %s/type: want strings", at)
			}
			out = append(out, name)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("constrain: %s/type: want at least one type", at)
		}
		if slices.Contains(out, "number") {
			out = slices.DeleteFunc(out, func(x string) bool { return x == "integer" })
		}
		return out, nil
	case nil:
		switch {
		case s["properties"] != nil || s["required"] != nil || s["additionalProperties"] != nil:
			return []string{"object"}, nil
		case s["items"] != nil || s["minItems"] != nil || s["maxItems"] != nil:
			return []string{"array"}, nil
		case s["minLength"] != nil || s["maxLength"] != nil || s["pattern"] != nil || s["format"] != nil:
			return []string{"string"}, nil
		case s["minimum"] != nil || s["maximum"] != nil || s["exclusiveMinimum"] != nil || s["exclusiveMaximum"] != nil || s["multipleOf"] != nil:
			return []string{"number"}, nil
		}
		return []string{"any"}, nil
	}
	return nil, fmt.Errorf("constrain: %s/type: want a string or an array of strings", at)
}

func (c *compiler) typed(t string, s map[string]any, at *path) (*node, error) {
	switch t {
	case "any":
		return c.std.any, nil
	case "null":
		return c.std.null, nil
	case "boolean":
		return c.add(&node{kind: kLiteral, lits: [][]byte{[]byte("true"), []byte("false")}})
	case "number", "integer":
		return c.numberNode(t == "integer", s, at)
	case "string":
		lo, hi, err := bounds(s, "minLength", "maxLength", at)
		if err != nil {
			return nil, err
		}
		a, err := c.stringAuto(s, lo, hi, at)
		if err != nil {
			return nil, err
		}
		return c.add(&node{kind: kString, minLen: lo, maxLen: hi, auto: a})
	case "array":
		lo, hi, err := bounds(s, "minItems", "maxItems", at)
		if err != nil {
			return nil, err
		}
		items := c.std.any
		if it, ok := s["items"]; ok {
			if items, err = c.compile(it, at.to("items")); err != nil {
				return nil, err
			}
		}
		return c.add(&node{kind: kArray, items: items, minItems: lo, maxItems: hi})
	case "object":
		return c.objectType(s, at)
	}
	return nil, fmt.Errorf("%w: %s/type: %q", ErrUnsupported, at, t)
}

func (c *compiler) objectType(s map[string]any, at *path) (*node, error) {
	if ap, ok := s["additionalProperties"]; ok {
		if _, isBool := ap.(bool); !isBool {
			return nil, fmt.Errorf("%w: %s/additionalProperties: a schema (only true or false)", ErrUnsupported, at)
		}
	}
	propsObj, _ := s["properties"].(*obj)
	if s["properties"] != nil && propsObj == nil {
		return nil, fmt.Errorf("constrain: %s/properties: want an object", at)
	}
	if propsObj == nil {
		if s["required"] == nil {
			return c.std.object, nil
		}
		propsObj = &obj{}
	}
	if len(propsObj.keys) > MaxProperties {
		return nil, fmt.Errorf("%w: %s/properties: %d properties exceed the limit of %d", ErrLimit, at, len(propsObj.keys), MaxProperties)
	}
	required, err := requiredSet(s, propsObj.m, at)
	if err != nil {
		return nil, err
	}
	n, err := c.add(&node{kind: kObject})
	if err != nil {
		return nil, err
	}
	keys, err := c.add(&node{kind: kLiteral})
	if err != nil {
		return nil, err
	}
	for _, name := range propsObj.keys {
		sub, err := c.compile(propsObj.m[name], at.to("properties").to(name))
		if err != nil {
			return nil, err
		}
		n.props = append(n.props, prop{name: name, node: sub, required: required[name]})
		enc, _ := json.Marshal(name)
		keys.lits = append(keys.lits, enc)
	}
	n.keys = keys
	return n, nil
}

// requiredSet reads the required keyword: names among the properties.
func requiredSet(s, props map[string]any, at *path) (map[string]bool, error) {
	required := map[string]bool{}
	r, ok := s["required"]
	if !ok {
		return required, nil
	}
	list, ok := r.([]any)
	if !ok {
		return nil, fmt.Errorf("constrain: %s/required: want an array of names", at)
	}
	for _, x := range list {
		name, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("constrain: %s/required: want an array of names", at)
		}
		if _, ok := props[name]; !ok {
			return nil, fmt.Errorf("%w: %s/required: %q is not among the properties", ErrUnsupported, at, name)
		}
		required[name] = true
	}
	return required, nil
}

// bounds reads a pair of non-negative integer keywords (hi < 0: absent).
func bounds(s map[string]any, loKey, hiKey string, at *path) (lo, hi int, err error) {
	get := func(k string, def int) (int, error) {
		v, ok := s[k]
		if !ok {
			return def, nil
		}
		num, ok := v.(json.Number)
		if !ok {
			return 0, fmt.Errorf("constrain: %s/%s: want a non-negative integer", at, k)
		}
		i, err := num.Int64()
		if err != nil || i < 0 || i > 1<<30 {
			return 0, fmt.Errorf("constrain: %s/%s: want a non-negative integer", at, k)
		}
		return int(i), nil
	}
	if lo, err = get(loKey, 0); err != nil {
		return 0, 0, err
	}
	if hi, err = get(hiKey, -1); err != nil {
		return 0, 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, 0, fmt.Errorf("constrain: %s: %s %d above %s %d", at, loKey, lo, hiKey, hi)
	}
	return lo, hi, nil
}

// literals compiles enum or const values to their compact encodings,
// sorted and without repeats. Of the values, it keeps those the schema's
// other keywords (s: type, and those of strings and numbers) allow.
func (c *compiler) literals(values []any, s map[string]any, at *path) (*node, error) {
	if len(values) > MaxEnumValues {
		return nil, fmt.Errorf("%w: %s: %d values exceed the limit of %d", ErrLimit, at, len(values), MaxEnumValues)
	}
	fits, err := c.literalFilter(s, at.up)
	if err != nil {
		return nil, err
	}
	lits := make([][]byte, 0, len(values))
	for _, v := range values {
		if ok, err := fits(v); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		enc, err := json.Marshal(plain(v))
		if err != nil {
			return nil, fmt.Errorf("constrain: %s: %w", at, err)
		}
		lits = append(lits, enc)
	}
	if len(lits) == 0 {
		return nil, fmt.Errorf("%w: %s: no value satisfies the schema's other keywords", ErrUnsupported, at)
	}
	slices.SortFunc(lits, bytes.Compare)
	lits = slices.CompactFunc(lits, bytes.Equal)
	return c.add(&node{kind: kEnum, lits: lits})
}
