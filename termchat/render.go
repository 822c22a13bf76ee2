package termchat

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
)

// palette is the ANSI foreground colour of model i of a preset (routing
// order: the small model first); more models cycle.
func palette(i int) string {
	colors := [...]string{"36", "33", "35", "32", "34", "31"} // cyan, yellow, magenta, green, blue, red
	return colors[i%len(colors)]
}

// SGR sequences of the chat's own text.
const (
	sgrReset = "\x1b[0m"
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
)

// painter writes answers and the chat's own lines, in colour or plain.
type painter struct {
	w      io.Writer
	color  bool
	models []string // the preset's models, in routing order
	cur    string   // the colour in force within an answer ("" none)
	last   string   // the model of the last token written
	atBOL  bool     // the last byte written ended a line
}

// colorOf is the SGR colour of model name ("" for a model the preset
// does not list).
func (p *painter) colorOf(name string) string {
	if i := slices.Index(p.models, name); i >= 0 {
		return palette(i)
	}
	return ""
}

// paint returns name in its model's colour (plain without colours).
func (p *painter) paint(name string) string {
	c := p.colorOf(name)
	if !p.color || c == "" {
		return name
	}
	return "\x1b[" + c + "m" + name + sgrReset
}

// legend names the preset's models, each in its colour.
func (p *painter) legend() string {
	names := make([]string, len(p.models))
	for i, m := range p.models {
		names[i] = p.paint(m)
	}
	return strings.Join(names, ", ")
}

// piece writes streamed text in the colour of the model that wrote it
// (text with no token of its own keeps the last model's colour).
func (p *painter) piece(pc piece) {
	if n := len(pc.models); n > 0 {
		p.last = clean(pc.models[n-1])
	}
	text := clean(pc.text)
	if text == "" {
		return
	}
	if p.color {
		if c := p.colorOf(p.last); c != p.cur {
			seq := sgrReset
			if c != "" {
				seq = "\x1b[" + c + "m"
			}
			io.WriteString(p.w, seq)
			p.cur = c
		}
	}
	io.WriteString(p.w, text)
	p.atBOL = strings.HasSuffix(text, "\n")
}

// endAnswer resets the colour and ends the answer's last line.
func (p *painter) endAnswer() {
	if p.cur != "" {
		io.WriteString(p.w, sgrReset)
		p.cur = ""
	}
	if !p.atBOL {
		io.WriteString(p.w, "\n")
	}
	p.atBOL, p.last = true, ""
}

// info writes one of the chat's own lines, dimmed.
func (p *painter) info(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if p.color {
		line = sgrDim + line + sgrReset
	}
	io.WriteString(p.w, line+"\n")
}

// errorf writes an error line, in red.
func (p *painter) errorf(format string, args ...any) {
	line := "error: " + clean(fmt.Sprintf(format, args...))
	if p.color {
		line = sgrRed + line + sgrReset
	}
	io.WriteString(p.w, line+"\n")
}

// clean drops the control characters of text but newlines and tabs, so
// that what a server sends cannot move the cursor or change colours.
func clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, s)
}

func isControl(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) }

// tally counts output tokens by model.
type tally struct {
	tokens  int
	byModel map[string]int
	elapsed time.Duration
}

// add counts one piece's tokens.
func (t *tally) add(pc piece) {
	if t.byModel == nil {
		t.byModel = map[string]int{}
	}
	for _, m := range pc.models {
		t.tokens++
		t.byModel[m]++
	}
}

// settle replaces the counts with the server's own, when it sent them.
func (t *tally) settle(r result) {
	if r.tokensByModel != nil {
		t.byModel = maps.Clone(r.tokensByModel)
		t.tokens = 0
		for _, n := range r.tokensByModel {
			t.tokens += n
		}
	}
	if r.outputTokens > 0 {
		t.tokens = r.outputTokens
	}
}

// merge adds u to t.
func (t *tally) merge(u tally) {
	if t.byModel == nil {
		t.byModel = map[string]int{}
	}
	t.tokens += u.tokens
	t.elapsed += u.elapsed
	for m, n := range u.byModel {
		t.byModel[m] += n
	}
}

// statsLine is the line after an answer: tokens, tokens per second over
// the time from the request to the answer's end, and each model's share
// of the tokens (the preset's models in routing order, then any other).
func (p *painter) statsLine(prefix string, t tally) string {
	var b strings.Builder
	b.WriteString("[")
	if prefix != "" {
		b.WriteString(prefix + " · ")
	}
	fmt.Fprintf(&b, "%d tokens", t.tokens)
	if s := t.elapsed.Seconds(); s > 0 {
		fmt.Fprintf(&b, " · %.1f tok/s · %.2f s", float64(t.tokens)/s, s)
	}
	names := slices.Clone(p.models)
	for _, m := range slices.Sorted(maps.Keys(t.byModel)) {
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	total := 0
	for _, n := range t.byModel {
		total += n
	}
	for _, m := range names {
		if total > 0 {
			fmt.Fprintf(&b, " · %s %.0f%%", p.paint(clean(m)), 100*float64(t.byModel[m])/float64(total))
		}
	}
	b.WriteString("]")
	return b.String()
}

// stats writes the stats line.
func (p *painter) stats(prefix string, t tally) {
	line := p.statsLine(prefix, t)
	if p.color {
		line = sgrDim + strings.ReplaceAll(line, sgrReset, sgrReset+sgrDim) + sgrReset
	}
	io.WriteString(p.w, line+"\n")
}
