package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Calls is output made of function calls in a model family's text format,
// the grammar of forced tool calls: Begin, then one call (or, with
// Parallel, one or more separated by Sep), then End. A call is Open, the
// name of one of Functions, Mid, its arguments (compact JSON matching the
// function's parameters schema, as Compile's automaton writes it), then
// Close. Qwen's format, for example, is Open `<tool_call>\n{"name": "`, Mid
// `", "arguments": `, Close "}\n</tool_call>", Sep "\n".
//
// CompileCalls compiles it and returns its text, which Compile accepts in
// place of a JSON schema, so a call grammar travels wherever a request's
// schema does (route.Params.Schema) and every model the request visits
// masks its draws to it.
type Calls struct {
	// Begin and End surround all the calls; either may be empty.
	Begin string `json:"begin,omitempty"`
	End   string `json:"end,omitempty"`
	// Open, Mid and Close surround each call's name and arguments; none
	// may be empty.
	Open  string `json:"open"`
	Mid   string `json:"mid"`
	Close string `json:"close"`
	// Sep goes between two calls (may be empty).
	Sep string `json:"sep,omitempty"`
	// Parallel allows more than one call.
	Parallel bool `json:"parallel,omitempty"`
	// Functions are the functions the output may call: at least one, at
	// most MaxFunctions, with distinct names.
	Functions []Function `json:"functions"`
}

// Function is one function a call grammar may call.
type Function struct {
	// Name is the function's name: UTF-8 text without quotes, backslashes
	// or control characters, so that it stands in a JSON string as it is.
	Name string `json:"name"`
	// Parameters is the JSON schema of the arguments, an object schema;
	// empty for a function without parameters (its arguments are {}).
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// FunctionError is a call grammar's error that concerns one function.
type FunctionError struct {
	// Index is the function's index in Calls.Functions.
	Index int
	// Err says what is wrong with it.
	Err error
}

// Error says which function and what is wrong with it.
func (e *FunctionError) Error() string { return fmt.Sprintf("function %d: %v", e.Index, e.Err) }

// Unwrap returns the cause.
func (e *FunctionError) Unwrap() error { return e.Err }

// The limits of a call grammar beyond those of each function's schema.
const (
	// MaxFunctions bounds the functions of one grammar (OpenAI's limit
	// of tools per request).
	MaxFunctions = 128
	// MaxCallsBytes bounds a grammar's text, every function's schema
	// included: together they cost no more to compile than one schema
	// of the largest size.
	MaxCallsBytes = MaxSchemaBytes
)

// kCalls is the kind of a call grammar's root node (calls field set),
// beyond the schema kinds.
const kCalls kind = 64

// callsPrefix starts a call grammar's text: no JSON document starts so.
const callsPrefix = "calls:"

// noParameters is the schema of a function without parameters.
const noParameters = `{"type":"object","properties":{},"additionalProperties":false}`

// IsCalls reports whether text is a call grammar's text (CompileCalls)
// rather than a JSON schema.
func IsCalls(text []byte) bool { return bytes.HasPrefix(text, []byte(callsPrefix)) }

// calls is a compiled call grammar, the data of its root node.
type calls struct {
	begin, close []byte
	head         choice  // Open+name+Mid of each function
	next         choice  // after a call: Sep+Open+name+Mid of each function (Parallel), End (if any)
	args         []*node // each function's arguments
	more         bool    // next applies after a call
	mayEnd       bool    // the output may end after any call (Parallel, no End)
}

// choice is a set of literals no one of which is a prefix of another,
// sorted, with the function each one opens (-1: End).
type choice struct {
	lits [][]byte
	fn   []int32
}

// all is the frame aux of a choice with every literal live.
func (c *choice) all() uint64 { return uint64(len(c.lits)) << 32 }

// add appends a literal; sort orders them once all are in.
func (c *choice) add(lit string, fn int) {
	c.lits = append(c.lits, []byte(lit))
	c.fn = append(c.fn, int32(fn))
}

// sort orders the literals and checks that none is a prefix of another
// (then a byte never leaves two complete candidates): after sorting, a
// literal that is a prefix of another is a prefix of the one after it.
func (c *choice) sort() error {
	idx := make([]int, len(c.lits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return bytes.Compare(c.lits[a], c.lits[b]) })
	lits, fn := make([][]byte, len(idx)), make([]int32, len(idx))
	for k, i := range idx {
		lits[k], fn[k] = c.lits[i], c.fn[i]
	}
	c.lits, c.fn = lits, fn
	for k := 1; k < len(lits); k++ {
		if bytes.HasPrefix(lits[k], lits[k-1]) {
			return fmt.Errorf("%w: call grammar: %q is a prefix of %q", ErrUnsupported, lits[k-1], lits[k])
		}
	}
	return nil
}

// CompileCalls checks and compiles a call grammar, and returns it with
// its text (what Compile accepts back). A function's error is a
// *FunctionError; errors wrap ErrLimit or ErrUnsupported as Compile's do.
func CompileCalls(c Calls) (*Schema, []byte, error) {
	if len(c.Functions) > MaxFunctions {
		return nil, nil, fmt.Errorf("%w: %d functions exceed the limit of %d", ErrLimit, len(c.Functions), MaxFunctions)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, nil, fmt.Errorf("constrain: call grammar: %w", err)
	}
	text := append([]byte(callsPrefix), body...)
	if len(text) > MaxCallsBytes {
		return nil, nil, fmt.Errorf("%w: call grammar of %d bytes exceeds the limit of %d bytes", ErrLimit, len(text), MaxCallsBytes)
	}
	s, err := compileCalls(c)
	if err != nil {
		return nil, nil, err
	}
	return s, text, nil
}

// compileCallsText compiles a call grammar's text (IsCalls).
func compileCallsText(text []byte) (*Schema, error) {
	if len(text) > MaxCallsBytes {
		return nil, fmt.Errorf("%w: call grammar of %d bytes exceeds the limit of %d bytes", ErrLimit, len(text), MaxCallsBytes)
	}
	var c Calls
	dec := json.NewDecoder(bytes.NewReader(text[len(callsPrefix):]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: call grammar: %w", ErrUnsupported, err)
	}
	if len(c.Functions) > MaxFunctions {
		return nil, fmt.Errorf("%w: %d functions exceed the limit of %d", ErrLimit, len(c.Functions), MaxFunctions)
	}
	return compileCalls(c)
}

// compileCalls builds the grammar's root node.
func compileCalls(c Calls) (*Schema, error) {
	if len(c.Functions) == 0 {
		return nil, fmt.Errorf("%w: call grammar without functions", ErrUnsupported)
	}
	if c.Open == "" || c.Mid == "" || c.Close == "" {
		return nil, fmt.Errorf("%w: call grammar: open, mid and close must not be empty", ErrUnsupported)
	}
	g := &calls{begin: []byte(c.Begin), close: []byte(c.Close), more: c.Parallel || c.End != "", mayEnd: c.Parallel && c.End == ""}
	root := &node{kind: kCalls, calls: g, minDepth: 1}
	seen := map[string]bool{}
	for i, f := range c.Functions {
		args, err := compileFunction(f, seen)
		if err != nil {
			return nil, &FunctionError{Index: i, Err: err}
		}
		g.args = append(g.args, args)
		root.minDepth = max(root.minDepth, args.minDepth+1)
		g.head.add(c.Open+f.Name+c.Mid, i)
		if c.Parallel {
			g.next.add(c.Sep+c.Open+f.Name+c.Mid, i)
		}
	}
	if c.End != "" {
		g.next.add(c.End, -1)
	}
	if err := errors.Join(g.head.sort(), g.next.sort()); err != nil {
		return nil, err
	}
	return &Schema{root: root}, nil
}

// compileFunction compiles one function's arguments schema; seen holds
// the names so far.
func compileFunction(f Function, seen map[string]bool) (*node, error) {
	if f.Name == "" || !utf8.ValidString(f.Name) {
		return nil, fmt.Errorf("%w: a function name must be non-empty UTF-8", ErrUnsupported)
	}
	for _, r := range f.Name {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return nil, fmt.Errorf("%w: function name %q holds a quote, a backslash or a control character", ErrUnsupported, f.Name)
		}
	}
	if seen[f.Name] {
		return nil, fmt.Errorf("%w: function name %q appears twice", ErrUnsupported, f.Name)
	}
	seen[f.Name] = true
	params := bytes.TrimSpace(f.Parameters)
	if len(params) == 0 {
		params = []byte(noParameters)
	}
	s, err := Compile(params)
	if err != nil {
		return nil, err
	}
	if k := s.root.kind; k != kObject && k != kAnyObject {
		return nil, fmt.Errorf("%w: the parameters of %q must be an object schema", ErrUnsupported, f.Name)
	}
	if s.root.minDepth > MaxDepth-1 {
		return nil, fmt.Errorf("%w: the arguments of %q nest deeper than %d levels", ErrLimit, f.Name, MaxDepth-1)
	}
	return s.root, nil
}

// The states of a call grammar's frame (frame.st). idx counts the bytes
// of the literal being matched; in csHead and csNext aux is the range of
// live candidates, as enumStep keeps it.
const (
	csBegin uint8 = iota // matching Begin
	csHead               // choosing a call: Open, a name, Mid
	csArgs               // in the arguments (a child frame): a byte reaching this frame ends them
	csClose              // matching Close
	csNext               // after a call: another (Sep, Open, a name, Mid) or End
)

// callsStep feeds b to a call grammar's frame f (the top).
func (m *Matcher) callsStep(f *frame, b byte) result {
	g := f.n.calls
	switch f.st {
	case csBegin:
		if int(f.idx) == len(g.begin) { // nothing (left) to match
			f.st, f.idx, f.aux = csHead, 0, g.head.all()
			return rAgain
		}
		if g.begin[f.idx] != b {
			return rReject
		}
		f.idx++
		if int(f.idx) == len(g.begin) {
			f.st, f.idx, f.aux = csHead, 0, g.head.all()
		}
		return rOK
	case csHead:
		return m.choose(f, &g.head, b)
	case csNext:
		return m.choose(f, &g.next, b)
	case csArgs:
		f.st, f.idx = csClose, 0
		return rAgain
	case csClose:
		if g.close[f.idx] != b {
			return rReject
		}
		f.idx++
		switch {
		case int(f.idx) < len(g.close):
			return rOK
		case !g.more:
			return rDone
		}
		f.st, f.idx, f.aux = csNext, 0, g.next.all()
		return rOK
	}
	return rReject
}

// choose matches b against the live literals of ch; a literal matched in
// full opens its function's arguments, or ends the output (End).
func (m *Matcher) choose(f *frame, ch *choice, b byte) result {
	lo, hi, k := int(uint32(f.aux)), int(f.aux>>32), int(f.idx)
	i := byteBound(ch.lits, lo, hi, k, int(b))
	j := byteBound(ch.lits, i, hi, k, int(b)+1)
	if i == j {
		return rReject
	}
	f.aux, f.idx = uint64(i)|uint64(j)<<32, f.idx+1
	if j-i > 1 || len(ch.lits[i]) > k+1 {
		return rOK
	}
	fn := ch.fn[i]
	if fn < 0 {
		return rDone
	}
	f.st = csArgs
	if !m.push(frame{n: f.n.calls.args[fn]}) {
		return rReject
	}
	return rOK
}

// callsComplete reports whether a call grammar's frame may end here:
// after a call, when any number of calls may come and nothing closes them.
func callsComplete(f *frame) bool {
	return f.st == csNext && f.idx == 0 && f.n.calls.mayEnd
}
