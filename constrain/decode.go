package constrain

import (
	"encoding/json"
	"fmt"
)

// obj is a decoded JSON object that keeps its keys' order.
type obj struct {
	keys []string
	m    map[string]any
}

// decode reads a schema document: one JSON value, with objects as *obj,
// arrays as []any, numbers as json.Number, strings, booleans and nil. It
// refuses a document over MaxSchemaBytes before reading it, and an
// object or array nested deeper than MaxSchemaDepth on reaching it.
// Apart from the values it builds it allocates nothing, so its time and
// memory are a small multiple of the document's size.
func decode(schema []byte) (any, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: size of %d bytes exceeds the limit of %d bytes", ErrLimit, len(schema), MaxSchemaBytes)
	}
	d := &decoder{data: schema}
	v, err := d.value(0)
	if err == nil {
		if d.space(); d.pos < len(d.data) {
			err = d.fail("data after the schema")
		}
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// decoder is a JSON parser over one document.
type decoder struct {
	data []byte
	pos  int
}

// fail returns a syntax error at the current offset.
func (d *decoder) fail(format string, a ...any) error {
	return fmt.Errorf("constrain: schema is not JSON: offset %d: %s", d.pos, fmt.Sprintf(format, a...))
}

// space skips white space.
func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek returns the next byte, 0 at the end.
func (d *decoder) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// value reads one value inside depth objects and arrays.
func (d *decoder) value(depth int) (any, error) {
	d.space()
	switch c := d.peek(); {
	case c == '{' || c == '[':
		if depth == MaxSchemaDepth {
			return nil, fmt.Errorf("%w: nesting depth exceeds the limit of %d", ErrLimit, MaxSchemaDepth)
		}
		d.pos++
		if c == '{' {
			return d.object(depth + 1)
		}
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 0 && d.pos == len(d.data):
		return nil, d.fail("unexpected end")
	}
	for _, lit := range [...]struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if len(d.data)-d.pos >= len(lit.text) && string(d.data[d.pos:d.pos+len(lit.text)]) == lit.text {
			d.pos += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, d.fail("invalid character %q", d.peek())
}

// object reads an object's members after its '{'.
func (d *decoder) object(depth int) (any, error) {
	o := &obj{} // m made at the first member: many objects have none
	if d.space(); d.peek() == '}' {
		d.pos++
		return o, nil
	}
	for {
		if d.space(); d.peek() != '"' {
			return nil, d.fail("want a member name")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if d.space(); d.peek() != ':' {
			return nil, d.fail("want ':'")
		}
		d.pos++
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		if o.m == nil {
			o.m = map[string]any{}
		}
		if _, dup := o.m[k]; !dup {
			o.keys = append(o.keys, k)
		}
		o.m[k] = v
		d.space()
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return o, nil
		default:
			return nil, d.fail("want ',' or '}'")
		}
	}
}

// array reads an array's items after its '['.
func (d *decoder) array(depth int) (any, error) {
	list := []any{}
	if d.space(); d.peek() == ']' {
		d.pos++
		return list, nil
	}
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		d.space()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return list, nil
		default:
			return nil, d.fail("want ',' or ']'")
		}
	}
}

// str reads a string. One with escapes, control characters or non-ASCII
// bytes is left to encoding/json, which checks and decodes it (invalid
// UTF-8 becoming U+FFFD).
func (d *decoder) str() (string, error) {
	start, plainASCII := d.pos, true
	for i := start + 1; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			d.pos = i + 1
			raw := d.data[start:d.pos]
			if plainASCII {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				d.pos = start
				return "", d.fail("%v", err)
			}
			return s, nil
		case c == '\\':
			plainASCII = false
			i++
		case c < 0x20 || c >= 0x80:
			plainASCII = false
		}
	}
	return "", d.fail("unterminated string")
}

// number reads a number, kept as its text.
func (d *decoder) number() (any, error) {
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' && (c < '0' || c > '9') {
			break
		}
		d.pos++
	}
	raw := d.data[start:d.pos]
	if !json.Valid(raw) {
		d.pos = start
		return nil, d.fail("invalid number %q", raw)
	}
	return json.Number(raw), nil
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
