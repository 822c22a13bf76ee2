package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Every request field an endpoint knows is in one of these tables, with
// what the server does with it: honour it, accept it as a no-op, or refuse
// it (with a 400 naming it) unless its value asks for the default
// behaviour. A field in no table is refused as unknown. The tables are
// also the documentation: docs/api-fields.md is rendered from them (a test
// keeps the two equal).

// use says what the server does with a request field.
type use uint8

const (
	// honoured: the field changes the output as the API documents.
	honoured use = iota
	// noOp: the field is accepted and has no effect (documented).
	noOp
	// refused: a value other than the default is refused with a 400.
	refused
)

func (u use) String() string {
	switch u {
	case honoured:
		return "honoured"
	case noOp:
		return "accepted, no effect"
	}
	return "refused"
}

// field is one request field of an endpoint.
type field struct {
	name string
	use  use
	// idle lists the JSON values of a refused field that ask for the
	// default behaviour, accepted (null always is).
	idle []string
	// sub, when set, checks the fields of an object value (of each
	// element when list is set).
	sub  []field
	list bool
	// note says what the server does with it, for the documentation.
	note string
}

// fieldTable is the fields of one endpoint's body (or one nested object).
type fieldTable struct {
	what   string // "chat", "completions", "generate": for the docs
	fields []field
}

// isNull reports a missing or null value.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// idles reports whether raw is null or one of f's idle values.
func (f field) idles(raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	got, _ := json.Marshal(v) // canonical: no spaces, sorted keys
	for _, s := range f.idle {
		var w any
		if json.Unmarshal([]byte(s), &w) != nil {
			continue
		}
		if want, _ := json.Marshal(w); bytes.Equal(got, want) {
			return true
		}
	}
	return false
}

// check refuses unknown fields and refused fields set to something other
// than their default, in raw (a JSON object; anything else is left to the
// typed decoding). prefix names a nested object in messages
// ("sampling_params.").
func (t fieldTable) check(raw json.RawMessage, prefix string) *apiError {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first offending field, in a stable order
	for _, k := range keys {
		v := obj[k]
		i := slices.IndexFunc(t.fields, func(f field) bool { return f.name == k })
		if i < 0 {
			return badRequest(prefix+k, "unknown_parameter", "Unrecognized request parameter: %s (see docs/api-fields.md for the fields this server knows)", clip(prefix+k))
		}
		f := t.fields[i]
		if f.use == refused && !f.idles(v) {
			return badRequest(prefix+k, "unsupported_parameter", "%s is not supported by this server%s", prefix+k, notePrefix(f.note))
		}
		if aerr := f.checkSub(v, prefix+k); aerr != nil {
			return aerr
		}
	}
	return nil
}

func notePrefix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

// checkSub checks the fields of v, the value of f named name.
func (f field) checkSub(v json.RawMessage, name string) *apiError {
	t := fieldTable{fields: f.sub}
	if f.sub == nil || isNull(v) {
		return nil
	}
	if !f.list {
		return t.check(v, name+".")
	}
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil {
		return nil
	}
	for i, e := range elems {
		if aerr := t.check(e, fmt.Sprintf("%s[%d].", name, i)); aerr != nil {
			return aerr
		}
	}
	return nil
}

// docNote is f's note with the values a refused field accepts.
func (f field) docNote() string {
	if f.use != refused {
		return f.note
	}
	ok := []string{"`null`"}
	for _, v := range f.idle {
		ok = append(ok, "`"+v+"`")
	}
	n := "accepted: " + strings.Join(ok, ", ")
	if f.note != "" {
		n = f.note + "; " + n
	}
	return n
}

// markdown renders the tables as the documentation's tables.
func markdown(tables ...fieldTable) string {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "\n### %s\n\n| field | use | notes |\n|---|---|---|\n", t.what)
		var rows func(fs []field, prefix string)
		rows = func(fs []field, prefix string) {
			for _, f := range fs {
				fmt.Fprintf(&b, "| `%s%s` | %s | %s |\n", prefix, f.name, f.use, f.docNote())
				switch {
				case f.sub != nil && f.list:
					rows(f.sub, prefix+f.name+"[].")
				case f.sub != nil:
					rows(f.sub, prefix+f.name+".")
				}
			}
		}
		rows(t.fields, "")
	}
	return b.String()
}
