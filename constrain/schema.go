// Package constrain restricts generation to JSON that a schema accepts:
// a schema (or "any JSON object") compiles to a byte-level automaton, a
// Matcher follows one request's output through it, and at each step
// Matcher.Allowed marks the tokens of a vocabulary that may come next, so a
// sampler that masks the others produces valid output by construction,
// whichever model draws each token.
//
// The automaton emits compact JSON (no whitespace outside strings) and the
// properties of an object in the schema's order; both are valid for every
// schema it accepts. Keywords that would need more than that (pattern,
// minimum, oneOf, …) are refused by Compile with an error naming them, never
// ignored.
package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
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
	kLiteral               // one of a set of literal encodings (true, null, enum, const, keys)
	kUnion                 // one of alternatives, told apart by their first byte
)

// node is one compiled schema node. Nodes are immutable once compiled;
// $ref cycles make the graph cyclic.
type node struct {
	kind kind
	// kObject: the properties in schema order and the node matching their
	// quoted names.
	props []prop
	keys  *node
	// kArray: items, and the item count bounds (maxItems < 0: none).
	items              *node
	minItems, maxItems int
	// kString: length bounds in characters (maxLen < 0: none).
	minLen, maxLen int
	// kLiteral: the compact encodings (at most 64).
	lits [][]byte
	// kUnion and kAny: the alternatives, and which one a first byte picks
	// (-1: none). kAnyObject: the nodes of a key and of a value.
	alts []*node
	pick *[256]int8
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
		num:  &node{kind: kNumber},
		tru:  &node{kind: kLiteral, lits: [][]byte{[]byte("true")}},
		fls:  &node{kind: kLiteral, lits: [][]byte{[]byte("false")}},
		null: &node{kind: kLiteral, lits: [][]byte{[]byte("null")}},
	}
	s.any = &node{kind: kAny}
	s.object = &node{kind: kAnyObject, alts: []*node{s.str, s.any}} // a key, a value
	s.array = &node{kind: kArray, items: s.any, maxItems: -1}
	s.any.alts = []*node{s.str, s.object, s.array, s.num, s.tru, s.fls, s.null}
	s.any.pick = pickTable(s.any.alts)
	return s
}

// AnyObject returns the schema of OpenAI's json_object mode: any JSON
// object.
func AnyObject() *Schema {
	std := newStd()
	return &Schema{root: std.object, std: std}
}

// maxLits bounds an enum (and an object's properties): the live set is one
// 64-bit word.
const maxLits = 64

// annotations are keywords that do not restrict values.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true,
}

// ErrUnsupported wraps the errors of schemas that use a keyword or a form
// the automaton does not implement.
var ErrUnsupported = errors.New("constrain: unsupported schema")

// compiler holds one Compile's state.
type compiler struct {
	doc  *obj
	refs map[string]*node
	std  *stdNodes
}

// Compile compiles a JSON schema. It supports type (one or a list),
// properties, required, additionalProperties (false, true or absent:
// only the listed properties are produced), items, minItems, maxItems,
// minLength, maxLength, enum, const, anyOf whose alternatives start with
// different bytes, and local $ref into $defs or definitions; annotations
// (title, description, …) are allowed. Anything else is refused with an
// error wrapping ErrUnsupported that names it.
func Compile(schema []byte) (*Schema, error) {
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	doc, err := decodeOrdered(d)
	if err == nil {
		if _, terr := d.Token(); terr == nil {
			err = errors.New("data after the schema")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("constrain: schema is not JSON: %w", err)
	}
	c := &compiler{refs: map[string]*node{}, std: newStd()}
	c.doc, _ = doc.(*obj)
	root, err := c.compile(doc, "#")
	if err != nil {
		return nil, err
	}
	return &Schema{root: root, std: c.std}, nil
}

func (c *compiler) compile(v any, at string) (*node, error) {
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
	"anyOf": true, "$ref": true,
}

func (c *compiler) object(o *obj, at string) (*node, error) {
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
	if ref, ok := s["$ref"]; ok {
		if len(s) > 1+countAnnotations(s) {
			return nil, fmt.Errorf("%w: %s: $ref beside other keywords", ErrUnsupported, at)
		}
		return c.ref(ref, at)
	}
	if e, ok := s["const"]; ok {
		return literals([]any{e}, at+"/const")
	}
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("constrain: %s/enum: want a non-empty array", at)
		}
		return literals(list, at+"/enum")
	}
	if a, ok := s["anyOf"]; ok {
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("constrain: %s/anyOf: want a non-empty array", at)
		}
		var alts []*node
		for i, sub := range list {
			n, err := c.compile(sub, fmt.Sprintf("%s/anyOf/%d", at, i))
			if err != nil {
				return nil, err
			}
			alts = append(alts, n)
		}
		return union(alts, at+"/anyOf")
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
	return union(alts, at+"/type")
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
func typeList(t any, s map[string]any, at string) ([]string, error) {
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
		case s["minLength"] != nil || s["maxLength"] != nil:
			return []string{"string"}, nil
		}
		return []string{"any"}, nil
	}
	return nil, fmt.Errorf("constrain: %s/type: want a string or an array of strings", at)
}

func (c *compiler) typed(t string, s map[string]any, at string) (*node, error) {
	switch t {
	case "any":
		return c.std.any, nil
	case "null":
		return c.std.null, nil
	case "boolean":
		return &node{kind: kLiteral, lits: [][]byte{[]byte("true"), []byte("false")}}, nil
	case "number":
		return c.std.num, nil
	case "integer":
		return &node{kind: kInteger}, nil
	case "string":
		lo, hi, err := bounds(s, "minLength", "maxLength", at)
		if err != nil {
			return nil, err
		}
		return &node{kind: kString, minLen: lo, maxLen: hi}, nil
	case "array":
		lo, hi, err := bounds(s, "minItems", "maxItems", at)
		if err != nil {
			return nil, err
		}
		items := c.std.any
		if it, ok := s["items"]; ok {
			if items, err = c.compile(it, at+"/items"); err != nil {
				return nil, err
			}
		}
		return &node{kind: kArray, items: items, minItems: lo, maxItems: hi}, nil
	case "object":
		return c.objectType(s, at)
	}
	return nil, fmt.Errorf("%w: %s/type: %q", ErrUnsupported, at, t)
}

func (c *compiler) objectType(s map[string]any, at string) (*node, error) {
	if ap, ok := s["additionalProperties"]; ok {
		if _, isBool := ap.(bool); !isBool {
			return nil, fmt.Errorf("%w: %s/additionalProperties: a schema (only true or false)", ErrUnsupported, at)
		}
	}
	propsObj, _ := s["properties"].(*obj)
	if s["properties"] != nil && propsObj == nil {
		return nil, fmt.Errorf("constrain: %s/properties: want an object", at)
	}
	var props map[string]any
	if propsObj != nil {
		props = propsObj.m
	} else {
		propsObj = &obj{}
	}
	if props == nil && s["required"] == nil {
		return c.std.object, nil
	}
	required := map[string]bool{}
	if r, ok := s["required"]; ok {
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
	}
	n := &node{kind: kObject}
	for _, name := range propsObj.keys {
		sub, err := c.compile(props[name], at+"/properties/"+name)
		if err != nil {
			return nil, err
		}
		n.props = append(n.props, prop{name: name, node: sub, required: required[name]})
	}
	if len(n.props) > maxLits {
		return nil, fmt.Errorf("%w: %s: more than %d properties", ErrUnsupported, at, maxLits)
	}
	keys := &node{kind: kLiteral}
	for _, p := range n.props {
		enc, _ := json.Marshal(p.name)
		keys.lits = append(keys.lits, enc)
	}
	n.keys = keys
	return n, nil
}

func (c *compiler) ref(r any, at string) (*node, error) {
	ref, ok := r.(string)
	if !ok {
		return nil, fmt.Errorf("constrain: %s/$ref: want a string", at)
	}
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	var section string
	switch {
	case strings.HasPrefix(ref, "#/$defs/"):
		section = "$defs"
	case strings.HasPrefix(ref, "#/definitions/"):
		section = "definitions"
	case ref == "#":
		// the whole document
	default:
		return nil, fmt.Errorf("%w: %s/$ref: %q (only #, #/$defs/… and #/definitions/…)", ErrUnsupported, at, ref)
	}
	var target any = c.doc
	if section != "" {
		target = nil
		if c.doc != nil {
			if defs, ok := c.doc.m[section].(*obj); ok {
				target = defs.m[strings.TrimPrefix(ref, "#/"+section+"/")]
			}
		}
	}
	if target == nil || target == (*obj)(nil) {
		return nil, fmt.Errorf("constrain: %s/$ref: %q not found", at, ref)
	}
	// A placeholder first, so that a cycle back to ref finds it; filled
	// in with the compiled node's contents once compiled.
	ph := &node{}
	c.refs[ref] = ph
	n, err := c.compile(target, ref)
	if err != nil {
		return nil, err
	}
	*ph = *n
	return ph, nil
}

// bounds reads a pair of non-negative integer keywords (hi < 0: absent).
func bounds(s map[string]any, loKey, hiKey, at string) (lo, hi int, err error) {
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

// literals compiles enum or const values to their compact encodings.
func literals(values []any, at string) (*node, error) {
	if len(values) > maxLits {
		return nil, fmt.Errorf("%w: %s: more than %d values", ErrUnsupported, at, maxLits)
	}
	n := &node{kind: kLiteral}
	for _, v := range values {
		enc, err := json.Marshal(plain(v))
		if err != nil {
			return nil, fmt.Errorf("constrain: %s: %w", at, err)
		}
		if !slices.ContainsFunc(n.lits, func(l []byte) bool { return bytes.Equal(l, enc) }) {
			n.lits = append(n.lits, enc)
		}
	}
	return n, nil
}

// firstBytes is the set of bytes a node's values can start with.
func firstBytes(n *node) (set [4]uint64) {
	add := func(s string) {
		for i := range len(s) {
			set[s[i]/64] |= 1 << (s[i] % 64)
		}
	}
	switch n.kind {
	case kAny:
		add(`"{[tfn-0123456789`)
	case kObject, kAnyObject:
		add("{")
	case kArray:
		add("[")
	case kString:
		add(`"`)
	case kNumber, kInteger:
		add("-0123456789")
	case kLiteral:
		for _, l := range n.lits {
			add(string(l[:1]))
		}
	case kUnion:
		for _, a := range n.alts {
			f := firstBytes(a)
			for i := range set {
				set[i] |= f[i]
			}
		}
	}
	return set
}

// union builds a node for alternatives that start with different bytes.
func union(alts []*node, at string) (*node, error) {
	var seen [4]uint64
	for _, a := range alts {
		f := firstBytes(a)
		for i := range seen {
			if seen[i]&f[i] != 0 {
				return nil, fmt.Errorf("%w: %s: alternatives that can start with the same character (%d)", ErrUnsupported, at, i*64+bits.TrailingZeros64(seen[i]&f[i]))
			}
			seen[i] |= f[i]
		}
	}
	return &node{kind: kUnion, alts: alts, pick: pickTable(alts)}, nil
}

// pickTable maps each byte to the alternative whose values start with it.
func pickTable(alts []*node) *[256]int8 {
	var t [256]int8
	for b := range t {
		t[b] = -1
	}
	for i, a := range alts {
		f := firstBytes(a)
		for b := range 256 {
			if f[b/64]&(1<<(b%64)) != 0 {
				t[b] = int8(i)
			}
		}
	}
	return &t
}

// obj is a decoded JSON object that keeps its keys' order.
type obj struct {
	keys []string
	m    map[string]any
}

// decodeOrdered decodes one JSON value, objects as *obj.
func decodeOrdered(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &obj{m: map[string]any{}}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			v, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			if _, dup := o.m[key]; !dup {
				o.keys = append(o.keys, key)
			}
			o.m[key] = v
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for d.More() {
			v, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := d.Token()
		return list, err
	}
	return t, nil
}

// plain converts decoded values back to encoding/json's shapes (for
// marshalling enum and const values).
func plain(v any) any {
	switch v := v.(type) {
	case *obj:
		m := make(map[string]any, len(v.m))
		for k, x := range v.m {
			m[k] = plain(x)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = plain(x)
		}
		return out
	}
	return v
}
