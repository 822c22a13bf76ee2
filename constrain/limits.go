package constrain

import "errors"

// The limits of Compile. Each bounds the work and memory a schema from a
// request can cost; a schema beyond one is refused with an error wrapping
// ErrLimit that names the limit and its value.
const (
	// MaxSchemaBytes bounds a schema's size. Real schemas, descriptions
	// included, are tens of KiB at most; compiling one this size of the
	// densest shapes (a quarter million small values) allocates about
	// 15 MiB and takes tens of milliseconds.
	MaxSchemaBytes = 256 << 10
	// MaxSchemaDepth bounds the nesting of a schema's JSON document
	// (objects and arrays, the outermost counting 1). A level of schema
	// takes one to three of the document's (items; properties/NAME;
	// anyOf/N), so 128 leaves room for schemas deeper than any output can
	// be (MaxDepth). It is checked while decoding: a deeper document
	// costs no more than its first 128 levels.
	MaxSchemaDepth = 128
	// MaxSchemaNodes bounds the compiled nodes, about one per schema
	// object (two per object with properties, each referenced schema
	// compiled once): room for thousands of properties, and a compiled
	// automaton of a few MiB at most.
	MaxSchemaNodes = 10000
	// MaxEnumValues bounds one enum (or const: one value): lists of codes
	// (countries, currencies, airports) fit, and matching a byte of one
	// is a binary search, 12 steps at this size.
	MaxEnumValues = 4096
	// MaxProperties bounds one object's properties: the matcher keeps the
	// properties that may come next as one 64-bit word.
	MaxProperties = 64
	// MaxAutomatonStates bounds the states the string and number automata
	// of one schema explore (pattern, format, length bounds beside them,
	// numeric bounds, multipleOf), each distinct automaton counted once:
	// a few MiB of tables at most. Real patterns and formats take tens to
	// hundreds; ipv6, the largest format, about 550.
	MaxAutomatonStates = 20000
	// MaxAutomatonWork bounds the steps of building those automata (NFA
	// states made and visited, transitions computed): tens of
	// milliseconds.
	MaxAutomatonWork = 1 << 20
	// MaxMultipleOf bounds multipleOf's significant digits read as an
	// integer (12.5: 125): the automaton tracks the remainder modulo it.
	MaxMultipleOf = 10000
	// MaxDecimalDigits bounds the digits after the point of a numeric
	// keyword's value written out in full (1e-70 has 70).
	MaxDecimalDigits = 64
)

// ErrLimit wraps the errors of schemas beyond one of Compile's limits
// (MaxSchemaBytes, MaxSchemaDepth, MaxSchemaNodes, MaxEnumValues,
// MaxProperties, MaxAutomatonStates, MaxAutomatonWork, MaxMultipleOf,
// MaxDecimalDigits) or whose every value nests deeper than MaxDepth.
var ErrLimit = errors.New("constrain: schema too large")

// JSONDepth is the deepest nesting of objects and arrays in a JSON text
// (brackets inside strings not counted); it reads malformed text too.
func JSONDepth(raw []byte) int {
	depth, deepest, in, esc := 0, 0, false, false
	for _, c := range raw {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
