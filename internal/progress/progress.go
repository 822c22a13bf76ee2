// Package progress draws the command line's progress bars: one line on a
// terminal, redrawn in place (carriage return, erase line) at most every
// Options.Every, and nothing at all anywhere else (a pipe, a file, a CI
// log), so that output meant for programs stays clean.
//
// A Bar is told amounts (Add, Set, Update, or CountWriter around the
// writer whose bytes it counts) and draws
//
//	label [###########-------------------]  37%  12.0/32.0 MiB  4.1 MiB/s  5s left  note
//
// Libraries do not draw bars: they report through callbacks or writers
// that a command connects to a Bar.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// Unit says how a Bar formats its amounts.
type Unit int

const (
	// Count amounts are plain numbers: 12/40.
	Count Unit = iota
	// Bytes amounts are formatted in KiB, MiB or GiB, with a rate.
	Bytes
	// Duration amounts are nanoseconds (time.Duration), shown in seconds.
	Duration
)

// Options tune a Bar. The zero value draws on a terminal only, redraws at
// most every 100 ms, and reads the clock and the environment.
type Options struct {
	// Unit formats the amounts.
	Unit Unit
	// Width is the number of cells of the bar (default 30).
	Width int
	// Every is the shortest time between two redraws (default 100 ms);
	// the first frame, the frame that reaches the total and Done always
	// draw.
	Every time.Duration
	// Delay keeps the bar hidden for this long after New: work that ends
	// sooner draws nothing.
	Delay time.Duration
	// Columns is the width lines are cut to (0: the terminal's, if known).
	Columns int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Getenv reads the environment (default os.Getenv; see Enabled).
	Getenv func(string) string
}

// Terminal is a writer that says itself whether it is a terminal (a
// wrapper of one, a test's stand-in); Enabled asks it before looking for
// a file descriptor.
type Terminal interface {
	io.Writer
	IsTerminal() bool
}

// Enabled reports whether bars are drawn on w: w is a terminal (a
// Terminal that says so, or a file whose descriptor is a terminal) and the
// environment (getenv; nil means os.Getenv) is not a CI run (CI set to
// anything but "", "0" or "false") nor a dumb terminal (TERM=dumb).
func Enabled(w io.Writer, getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if ci := strings.ToLower(getenv("CI")); ci != "" && ci != "0" && ci != "false" {
		return false
	}
	if getenv("TERM") == "dumb" {
		return false
	}
	switch t := w.(type) {
	case Terminal:
		return t.IsTerminal()
	case interface{ Fd() uintptr }:
		return term.IsTerminal(int(t.Fd()))
	}
	return false
}

// columns returns the width of the terminal behind w, 0 if unknown.
func columns(w io.Writer) int {
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		if c, _, err := term.GetSize(int(f.Fd())); err == nil && c > 0 {
			return c
		}
	}
	return 0
}

// Bar is one progress bar on a writer. Its methods may be called from
// several goroutines. Off a terminal (Enabled false) it draws nothing;
// Write still prints.
type Bar struct {
	mu          sync.Mutex
	w           io.Writer
	on          bool
	o           Options
	label, note string
	done, total int64
	start, last time.Time
	drawn       bool // the line shows a frame
	full        bool // the last frame drawn showed the total reached
	ended       bool
}

// New returns a bar on w for label and total (0 or less: unknown; the bar
// then shows the amount alone).
func New(w io.Writer, label string, total int64, o Options) *Bar {
	if o.Width <= 0 {
		o.Width = 30
	}
	if o.Every <= 0 {
		o.Every = 100 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Bar{w: w, on: Enabled(w, o.Getenv), o: o, label: label, total: total}
	if b.on && b.o.Columns <= 0 {
		b.o.Columns = columns(w)
	}
	b.start = o.Now()
	return b
}

// Enabled reports whether the bar draws (see the package function).
func (b *Bar) Enabled() bool { return b.on }

// Add adds n to the amount done.
func (b *Bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	b.redraw(false)
}

// Set sets the amount done.
func (b *Bar) Set(done int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = done
	b.redraw(false)
}

// Update sets the amount done, the total and the note shown after the
// figures.
func (b *Bar) Update(done, total int64, note string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.total, b.note = done, total, note
	b.redraw(false)
}

// SetLabel changes the label; it shows at the next frame.
func (b *Bar) SetLabel(label string) {
	b.mu.Lock()
	b.label = label
	b.mu.Unlock()
}

// Write prints p above the bar: on a terminal the bar's line is erased,
// p written, and the bar drawn again below it; off a terminal p is
// written as is. p should end with a newline.
func (b *Bar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on || !b.drawn {
		return b.w.Write(p)
	}
	if _, err := io.WriteString(b.w, "\r\033[K"); err != nil {
		return 0, err
	}
	n, err := b.w.Write(p)
	b.drawn = false
	if err == nil && len(p) > 0 && p[len(p)-1] == '\n' {
		b.redraw(true)
	}
	return n, err
}

// Done draws the final frame and ends its line; later calls draw
// nothing. A bar still hidden by Delay stays hidden.
func (b *Bar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.redraw(true)
	if b.drawn {
		_, _ = io.WriteString(b.w, "\n")
	}
	b.ended, b.drawn = true, false
}

// Clear erases the bar's line and ends the bar, leaving nothing of it.
func (b *Bar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.on && b.drawn {
		_, _ = io.WriteString(b.w, "\r\033[K")
	}
	b.ended, b.drawn = true, false
}

// redraw draws a frame if one is due (or final). It holds b.mu.
func (b *Bar) redraw(final bool) {
	if !b.on || b.ended {
		return
	}
	now := b.o.Now()
	if now.Sub(b.start) < b.o.Delay {
		return
	}
	complete := b.total > 0 && b.done >= b.total
	due := !b.drawn || now.Sub(b.last) >= b.o.Every || complete && !b.full
	if !final && !due {
		return
	}
	b.last, b.drawn, b.full = now, true, complete
	_, _ = io.WriteString(b.w, "\r\033[K"+b.cut(b.frame(now)))
}

// cut shortens line to the terminal's width (one column spare, so that
// the cursor does not wrap).
func (b *Bar) cut(line string) string {
	if b.o.Columns <= 1 || utf8.RuneCountInString(line) < b.o.Columns {
		return line
	}
	r := []rune(line)
	return string(r[:b.o.Columns-1])
}

// frame is the bar's line at now.
func (b *Bar) frame(now time.Time) string {
	var s strings.Builder
	if b.label != "" {
		s.WriteString(b.label + " ")
	}
	done, total := b.done, b.total
	if total > 0 {
		n := int(min(max(done, 0)*int64(b.o.Width)/total, int64(b.o.Width)))
		pct := min(max(done, 0)*100/total, 100)
		fmt.Fprintf(&s, "[%s%s] %3d%%  %s", strings.Repeat("#", n), strings.Repeat("-", b.o.Width-n), pct, b.pair(done, total))
	} else {
		s.WriteString(b.amount(done))
	}
	elapsed := now.Sub(b.start)
	if b.o.Unit == Bytes && elapsed >= time.Second {
		fmt.Fprintf(&s, "  %s/s", b.amount(int64(float64(done)/elapsed.Seconds())))
	}
	if left := b.left(done, total, elapsed); left >= time.Second {
		s.WriteString("  " + remaining(left) + " left")
	}
	if b.note != "" {
		s.WriteString("  " + b.note)
	}
	return s.String()
}

// left is the time the work has left: the amount left of a Duration
// bar, else the time so far scaled by the share left (once a second has
// passed); 0 when unknown.
func (b *Bar) left(done, total int64, elapsed time.Duration) time.Duration {
	switch {
	case total <= 0 || done <= 0 || done >= total:
		return 0
	case b.o.Unit == Duration:
		return time.Duration(total - done)
	case elapsed < time.Second:
		return 0
	}
	return time.Duration(float64(elapsed) * float64(total-done) / float64(done))
}

// amount formats n in the bar's unit.
func (b *Bar) amount(n int64) string {
	switch b.o.Unit {
	case Bytes:
		div, unit := byteUnit(n)
		return fmt.Sprintf("%.1f %s", float64(n)/div, unit)
	case Duration:
		return fmt.Sprintf("%.0fs", time.Duration(n).Seconds())
	}
	return fmt.Sprint(n)
}

// pair formats done/total in the bar's unit, both in the total's
// multiple of bytes.
func (b *Bar) pair(done, total int64) string {
	switch b.o.Unit {
	case Bytes:
		div, unit := byteUnit(total)
		return fmt.Sprintf("%.1f/%.1f %s", float64(done)/div, float64(total)/div, unit)
	case Duration:
		return fmt.Sprintf("%.0fs/%.0fs", time.Duration(done).Seconds(), time.Duration(total).Seconds())
	}
	return fmt.Sprintf("%d/%d", done, total)
}

// byteUnit returns the binary multiple n is best shown in.
func byteUnit(n int64) (float64, string) {
	div, unit := 1.0, "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if float64(n)/div < 1024 {
			break
		}
		div, unit = div*1024, u
	}
	return div, unit
}

// remaining formats a duration as 42s, 3m05s or 1h02m.
func remaining(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// CountWriter returns a writer that writes to w and adds the bytes
// written to the bar.
func (b *Bar) CountWriter(w io.Writer) io.Writer { return &countWriter{w: w, b: b} }

type countWriter struct {
	w io.Writer
	b *Bar
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.b.Add(int64(n))
	return n, err
}
