package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// A CallParser reads a model's output as it streams and tells its text
// from its tool calls, in the model's CallFormat:
//
//   - Tagged formats (Hermes, generic, Phi-4): a call is an object between
//     an opening and a closing tag, anywhere in the output; text around
//     the calls is content.
//   - Leading formats (Llama 3, Mistral): the calls are the output, from
//     its start (after a marker, <|python_tag|> or [TOOL_CALLS], which is
//     text or, being a control token, absent); an output that does not
//     start so is content.
//
// A call object is {"name": NAME, "arguments": VALUE} ("parameters" for
// "arguments" too). Written in that order, as the formats write it, its
// name is reported as soon as it is complete and its arguments piece by
// piece as they arrive; in another order, whole at the object's end. An
// object whose name is not a known function, or that is not a call, is
// content, tags and all. Content never loses a byte: an output without
// calls is its content, exactly. Whitespace next to calls is dropped.
//
// The result does not depend on how the output is cut into pieces.
type CallParser struct {
	syn   parseSyntax
	names map[string]bool // nil: any name
	buf   []byte          // received, not yet settled
	ws    []byte          // content whitespace held back (dropped next to a call)
	state parseState
	calls int
	plain bool      // a leading format's output turned out to be content
	scan  valueScan // stObj: the call object or its arguments
	head  headMatch // stObj: what the head matcher found
	out   []CallEvent
}

// CallEvent is one finding of a CallParser.
type CallEvent struct {
	// Kind says what the event holds.
	Kind CallEventKind
	// Text is the content text, the called function's name, or a piece
	// of the arguments' JSON.
	Text string
	// Index is the call's index among the output's calls (CallStart,
	// CallArgs).
	Index int
}

// CallEventKind is what a CallEvent holds.
type CallEventKind uint8

// Event kinds.
const (
	// Content is text of the answer.
	Content CallEventKind = iota
	// CallStart opens a call: Text is the function's name.
	CallStart
	// CallArgs is a piece of the current call's arguments.
	CallArgs
)

// parseSyntax is what a CallParser looks for in a format.
type parseSyntax struct {
	open, close string   // tagged formats: each call's tags
	markers     []string // leading formats: what may precede the calls
	array       bool     // the calls are a JSON array (Mistral)
}

func (f CallFormat) parseSyntax() parseSyntax {
	switch f {
	case CallsLlama3:
		return parseSyntax{markers: []string{"<|python_tag|>"}}
	case CallsMistral:
		return parseSyntax{markers: []string{"[TOOL_CALLS]"}, array: true}
	case CallsPhi4:
		return parseSyntax{open: "<|tool_call|>", close: "<|/tool_call|>"}
	}
	return parseSyntax{open: "<tool_call>", close: "</tool_call>"}
}

type parseState uint8

const (
	stText  parseState = iota // content, watching for an opening tag
	stLead                    // a leading format's start: a marker, [ or { may come
	stObj                     // in a call object (buf starts at its '{' or the whitespace before)
	stAfter                   // after a call object: its closing tag, a separator, the array's end
)

// NewCallParser returns a parser of output in format f that calls the
// functions named names (nil: any name).
func NewCallParser(f CallFormat, names []string) *CallParser {
	p := &CallParser{syn: f.parseSyntax()}
	if names != nil {
		p.names = make(map[string]bool, len(names))
		for _, n := range names {
			p.names[n] = true
		}
	}
	if p.syn.open == "" {
		p.state = stLead
	}
	return p
}

// Feed takes the next piece of output and returns what it settled. The
// slice is reused by the next call.
func (p *CallParser) Feed(text string) []CallEvent {
	p.out = p.out[:0]
	p.buf = append(p.buf, text...)
	for p.step(false) {
	}
	return p.out
}

// Finish ends the output and returns what was still unsettled: held-back
// text becomes content; a call cut short keeps the arguments it had.
func (p *CallParser) Finish() []CallEvent {
	p.out = p.out[:0]
	for p.step(true) {
	}
	switch {
	case p.state == stObj && p.head.ok:
		if p.scan.quoted { // string arguments never completed: what arrived
			p.args(string(p.buf))
		}
	case p.state != stAfter:
		p.content(p.buf)
	}
	if p.calls == 0 {
		p.flushWS()
	}
	p.buf = p.buf[:0]
	return p.out
}

// Calls is the number of calls found so far.
func (p *CallParser) Calls() int { return p.calls }

// step settles what it can of buf; end: no more output comes. It
// reports whether to go on.
func (p *CallParser) step(end bool) bool {
	switch p.state {
	case stText:
		return p.text(end)
	case stLead:
		return p.lead(end)
	case stObj:
		return p.object(end)
	case stAfter:
		return p.after(end)
	}
	return false
}

// content settles text as content: its trailing whitespace is held back
// until more content follows.
func (p *CallParser) content(b []byte) {
	if len(b) == 0 {
		return
	}
	trim := bytes.TrimRight(b, " \t\r\n")
	if len(trim) == 0 {
		p.ws = append(p.ws, b...)
		return
	}
	p.emit(Content, string(p.ws)+string(trim), 0)
	p.ws = append(p.ws[:0], b[len(trim):]...)
}

// flushWS settles held-back whitespace as content.
func (p *CallParser) flushWS() {
	if len(p.ws) > 0 {
		p.emit(Content, string(p.ws), 0)
		p.ws = p.ws[:0]
	}
}

func (p *CallParser) emit(k CallEventKind, text string, index int) {
	if n := len(p.out); n > 0 && k != CallStart && p.out[n-1].Kind == k && p.out[n-1].Index == index {
		p.out[n-1].Text += text
		return
	}
	p.out = append(p.out, CallEvent{Kind: k, Text: text, Index: index})
}

func (p *CallParser) args(text string) {
	if text != "" {
		p.emit(CallArgs, text, p.calls-1)
	}
}

// text is stText: content up to an opening tag; the end of buf that may
// be the start of a tag is held back.
func (p *CallParser) text(end bool) bool {
	if p.plain || p.syn.open == "" {
		p.content(p.buf)
		p.buf = p.buf[:0]
		return false
	}
	i := bytes.Index(p.buf, []byte(p.syn.open))
	if i < 0 {
		keep := 0
		if !end {
			keep = partialSuffix(p.buf, p.syn.open)
		}
		p.content(p.buf[:len(p.buf)-keep])
		p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
		return false
	}
	p.content(p.buf[:i])
	p.buf = append(p.buf[:0], p.buf[i:]...) // the tag stays in buf until the call is settled
	p.state, p.head, p.scan = stObj, headMatch{}, valueScan{}
	return true
}

// partialSuffix is the length of the longest end of b that is a proper
// beginning of tag.
func partialSuffix(b []byte, tag string) int {
	for n := min(len(b), len(tag)-1); n > 0; n-- {
		if bytes.HasSuffix(b, []byte(tag[:n])) {
			return n
		}
	}
	return 0
}

// lead is stLead: at a leading format's start, whitespace, a marker,
// then '[' (an array format) and '{' open the calls; anything else makes
// the whole output content.
func (p *CallParser) lead(end bool) bool {
	rest := bytes.TrimLeft(p.buf, " \t\r\n")
	if len(p.buf)-len(rest) > maxHead { // a long run of whitespace first: text
		p.plain, p.state = true, stText
		return true
	}
	for _, m := range p.syn.markers {
		if r, ok := bytes.CutPrefix(rest, []byte(m)); ok {
			rest = bytes.TrimLeft(r, " \t\r\n")
			break
		}
		if !end && len(rest) < len(m) && strings.HasPrefix(m, string(rest)) {
			return false // may still be the marker
		}
	}
	if p.syn.array && len(rest) > 0 && rest[0] == '[' {
		rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	}
	switch {
	case len(rest) == 0 && !end:
		return false
	case len(rest) > 0 && rest[0] == '{':
		p.state, p.head, p.scan = stObj, headMatch{}, valueScan{}
		return true
	}
	p.plain, p.state = true, stText
	return true
}

// object is stObj: buf holds the opening tag (tagged formats) or what
// came before the object, then the object so far. The head, if it
// matches, opens the call; its arguments then stream; otherwise the
// object is read whole.
func (p *CallParser) object(end bool) bool {
	if p.head.ok {
		return p.streamArgs()
	}
	start := p.objectStart()
	if start < 0 {
		if end || start == tooFar || p.pastObjectStart() {
			return p.notACall(len(p.buf))
		}
		return false
	}
	if !p.head.failed {
		p.head = matchHead(p.buf[start:min(len(p.buf), start+maxHead)], len(p.buf)-start >= maxHead)
		switch {
		case p.head.ok && !p.known(p.head.name):
			return p.notACall(start + p.head.argsAt)
		case p.head.ok:
			p.openCall(p.head.name)
			p.buf = append(p.buf[:0], p.buf[start+p.head.argsAt:]...)
			p.scan = valueScan{}
			return p.streamArgs()
		case !p.head.failed:
			if end {
				return p.notACall(len(p.buf))
			}
			return false
		}
	}
	return p.wholeObject(start, end)
}

// maxHead bounds the bytes between a tag and its object's '{', and the
// head of a call object ({"name": …, "arguments": ), so that text that
// never settles costs a bounded scan per piece.
const maxHead = 1024

// tooFar is objectStart's answer when no '{' came within maxHead bytes.
const tooFar = -2

// objectStart is the index of the object's '{' in buf, -1 if it has not
// come (past the tag or marker and whitespace), tooFar if it came too far.
func (p *CallParser) objectStart() int {
	i := 0
	if p.syn.open != "" && bytes.HasPrefix(p.buf, []byte(p.syn.open)) {
		i = len(p.syn.open)
	} else if p.syn.open == "" {
		rest := bytes.TrimLeft(p.buf, " \t\r\n")
		for _, m := range p.syn.markers {
			if r, ok := bytes.CutPrefix(rest, []byte(m)); ok {
				rest = r
				break
			}
		}
		rest = bytes.TrimLeft(rest, " \t\r\n")
		if p.syn.array && len(rest) > 0 && rest[0] == '[' && p.calls == 0 {
			rest = rest[1:]
		}
		i = len(p.buf) - len(rest)
	}
	for limit := i + maxHead; i < len(p.buf); i++ {
		switch {
		case i >= limit:
			return tooFar
		case p.buf[i] == '{':
			return i
		case p.buf[i] != ' ' && p.buf[i] != '\t' && p.buf[i] != '\r' && p.buf[i] != '\n':
			return -1
		}
	}
	return -1
}

// pastObjectStart reports whether buf shows that no object follows.
func (p *CallParser) pastObjectStart() bool {
	rest := p.buf
	if p.syn.open != "" {
		rest = rest[len(p.syn.open):]
	}
	return len(bytes.TrimLeft(rest, " \t\r\n")) > 0
}

// known reports whether name is a function the output may call.
func (p *CallParser) known(name string) bool { return p.names == nil || p.names[name] }

// openCall starts a call: held whitespace before it is dropped.
func (p *CallParser) openCall(name string) {
	p.ws = p.ws[:0]
	p.calls++
	p.emit(CallStart, name, p.calls-1)
}

// notACall settles buf[:n] as content: the tag or marker and what
// followed were no call. A leading format's output is then content.
func (p *CallParser) notACall(n int) bool {
	if p.syn.open == "" {
		p.plain, p.state = true, stText
		return true
	}
	p.content(p.buf[:n])
	p.buf = append(p.buf[:0], p.buf[n:]...)
	p.state = stText
	return true
}

// streamArgs settles the arguments that arrived; at their end, the rest
// of the object (other members) is skipped to its '}'.
func (p *CallParser) streamArgs() bool {
	if !p.scan.started {
		p.buf = bytes.TrimLeft(p.buf, " \t\r\n")
		if len(p.buf) == 0 {
			return false
		}
		p.scan.start(p.buf[0])
	}
	n, done := p.scan.feed(p.buf[p.scan.pos:])
	p.scan.pos += n
	end := p.scan.pos
	switch {
	case !p.scan.quoted:
		p.args(string(p.buf[:end]))
	case !done:
		return false // string-encoded arguments: settled at their end
	default:
		var s string
		if json.Unmarshal(p.buf[:end], &s) == nil {
			p.args(s)
		} else {
			p.args(string(p.buf[:end]))
		}
	}
	p.buf = append(p.buf[:0], p.buf[end:]...)
	p.scan.pos = 0
	if !done {
		return false
	}
	p.scan = valueScan{depth: 1, started: true} // inside the object, after its arguments
	p.head = headMatch{skip: true}
	p.state = stAfter
	return true
}

// wholeObject waits for the object's end and reads it as a call.
func (p *CallParser) wholeObject(start int, end bool) bool {
	if !p.scan.started {
		p.scan = valueScan{started: true, depth: 1, pos: start + 1} // past the '{'
	}
	n, done := p.scan.feed(p.buf[p.scan.pos:])
	p.scan.pos += n
	if !done {
		if end {
			return p.notACall(len(p.buf))
		}
		return false
	}
	obj := p.buf[start:p.scan.pos]
	name, args, ok := readCall(obj)
	if !ok || !p.known(name) {
		return p.notACall(p.scan.pos)
	}
	p.openCall(name)
	p.args(args)
	p.buf = append(p.buf[:0], p.buf[p.scan.pos:]...)
	p.state, p.head = stAfter, headMatch{}
	return true
}

// readCall reads a whole call object: its name and its arguments' JSON.
func readCall(obj []byte) (name, args string, ok bool) {
	var c map[string]json.RawMessage
	if json.Unmarshal(obj, &c) != nil {
		return "", "", false
	}
	if json.Unmarshal(c["name"], &name) != nil || name == "" {
		return "", "", false
	}
	raw, ok := c["arguments"]
	if !ok {
		raw, ok = c["parameters"]
	}
	if !ok {
		return "", "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return name, s, true
	}
	return name, string(raw), true
}

// after is stAfter: first the rest of a streamed call object up to its
// '}', then the closing tag (tagged), a ';' or ',' and the next object,
// or the array's ']' (leading).
func (p *CallParser) after(end bool) bool {
	if p.head.skip {
		n, done := p.scan.feed(p.buf)
		p.buf = append(p.buf[:0], p.buf[n:]...)
		if !done {
			return false
		}
		p.head.skip = false
	}
	p.buf = bytes.TrimLeft(p.buf, " \t\r\n")
	if len(p.buf) == 0 {
		return false
	}
	if p.syn.open != "" {
		if bytes.HasPrefix(p.buf, []byte(p.syn.close)) {
			p.buf = append(p.buf[:0], p.buf[len(p.syn.close):]...)
			p.state = stText
			return true
		}
		if !end && len(p.buf) < len(p.syn.close) && strings.HasPrefix(p.syn.close, string(p.buf)) {
			return false
		}
		p.state = stText // no closing tag: what follows is read as any text
		return true
	}
	next := bytes.TrimLeft(p.buf[1:], " \t\r\n")
	switch {
	case p.buf[0] == ',' || p.buf[0] == ';':
		if len(next) == 0 && !end {
			return false
		}
		if len(next) > 0 && next[0] == '{' {
			p.buf = append(p.buf[:0], next...)
			p.state, p.head, p.scan = stObj, headMatch{}, valueScan{}
			return true
		}
	case p.buf[0] == ']' && p.syn.array:
		p.buf = append(p.buf[:0], p.buf[1:]...)
		p.state, p.plain = stText, true
		return true
	case p.buf[0] == '{' && !p.syn.array:
		p.state, p.head, p.scan = stObj, headMatch{}, valueScan{}
		return true
	}
	p.state, p.plain = stText, true // what follows the calls is content
	return true
}

// headMatch is what matchHead found at the start of a call object.
type headMatch struct {
	ok, failed bool
	name       string
	argsAt     int  // the index of the arguments' first byte
	skip       bool // stAfter: the object's remaining members are being skipped
}

// matchHead matches `{ "name" : STRING , "arguments"|"parameters" :` and
// the whitespace after it, at the start of b. ok and failed both false:
// b may still become a head; full says b is all the head may take.
func matchHead(b []byte, full bool) headMatch {
	i := 0
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
			i++
		}
	}
	// lit matches s at i: 1 matched, 0 b ends inside it, -1 mismatch.
	lit := func(s string) int {
		for k := 0; k < len(s); k++ {
			if i+k == len(b) {
				return 0
			}
			if b[i+k] != s[k] {
				return -1
			}
		}
		i += len(s)
		return 1
	}
	var h headMatch
	steps := []func() int{
		func() int { return lit("{") },
		func() int { ws(); return lit(`"name"`) },
		func() int { ws(); return lit(":") },
		func() int {
			ws()
			s, n := jsonString(b[i:])
			if n > 0 {
				h.name, i = s, i+n
			}
			return n
		},
		func() int { ws(); return lit(",") },
		func() int {
			ws()
			if r := lit(`"arguments"`); r != -1 {
				return r
			}
			return lit(`"parameters"`)
		},
		func() int { ws(); return lit(":") },
		func() int {
			ws()
			if i == len(b) {
				return 0
			}
			return 1
		},
	}
	for _, s := range steps {
		switch s() {
		case 0:
			return headMatch{failed: full}
		case -1:
			return headMatch{failed: true}
		}
	}
	h.ok, h.argsAt = true, i
	return h
}

// jsonString reads a JSON string at the start of b: its value and length
// (n > 0), 0 if b ends inside it, -1 if b does not start with one.
func jsonString(b []byte) (string, int) {
	if len(b) == 0 {
		return "", 0
	}
	if b[0] != '"' {
		return "", -1
	}
	for k := 1; k < len(b); k++ {
		switch b[k] {
		case '\\':
			k++
		case '"':
			var s string
			if json.Unmarshal(b[:k+1], &s) != nil {
				return "", -1
			}
			return s, k + 1
		}
	}
	return "", 0
}

// valueScan finds the end of one JSON value as it streams, without
// checking it: strings with their escapes, the nesting of objects and
// arrays, a scalar's end at a delimiter.
type valueScan struct {
	started, quoted bool // quoted: the value is a string
	depth           int
	inStr, esc      bool
	scalar          bool
	pos             int // wholeObject: bytes of buf scanned
}

// start sets the scan for a value whose first byte is c.
func (v *valueScan) start(c byte) {
	v.started = true
	switch c {
	case '{', '[':
	case '"':
		v.quoted = true
	default:
		v.scalar = true
	}
}

// feed scans b and returns the bytes that belong to the value and
// whether it ended with them.
func (v *valueScan) feed(b []byte) (int, bool) {
	for i, c := range b {
		switch {
		case v.scalar:
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				return i, true
			}
		case v.esc:
			v.esc = false
		case v.inStr:
			switch c {
			case '\\':
				v.esc = true
			case '"':
				v.inStr = false
				if v.depth == 0 {
					return i + 1, true
				}
			}
		case c == '"':
			v.inStr = true
		case c == '{' || c == '[':
			v.depth++
		case c == '}' || c == ']':
			v.depth--
			if v.depth <= 0 {
				return i + 1, true
			}
		}
	}
	return len(b), false
}

// ParsedCall is one call of a parsed output.
type ParsedCall struct {
	// Name is the called function.
	Name string
	// Arguments is the JSON text of its arguments.
	Arguments string
}

// ParseCalls reads a whole output in format f: its content and its
// calls of the functions named names (nil: any).
func ParseCalls(f CallFormat, names []string, text string) (content string, calls []ParsedCall) {
	p := NewCallParser(f, names)
	var b strings.Builder
	collect := func(evs []CallEvent) {
		for _, e := range evs {
			switch e.Kind {
			case Content:
				b.WriteString(e.Text)
			case CallStart:
				calls = append(calls, ParsedCall{Name: e.Text})
			case CallArgs:
				calls[e.Index].Arguments += e.Text
			}
		}
	}
	collect(p.Feed(text))
	collect(p.Finish())
	return b.String(), calls
}
