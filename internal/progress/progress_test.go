package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// screen is a stand-in terminal: it records what a bar writes.
type screen struct{ bytes.Buffer }

func (*screen) IsTerminal() bool { return true }

// frames splits what was written into the frames drawn (each begins with
// carriage return and erase-line); a newline ends the last.
func (s *screen) frames() []string {
	return strings.Split(s.String(), "\r\033[K")[1:]
}

// clock is a clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func noEnv(string) string                { return "" }
func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// TestFramesThrottled: the first amount draws, amounts within Every of the
// last frame do not, the one that reaches the total does at once, and Done
// draws the final frame and ends the line.
func TestFramesThrottled(t *testing.T) {
	var s screen
	c := newClock()
	b := New(&s, "work", 40, Options{Width: 10, Every: 100 * time.Millisecond, Now: c.now, Getenv: noEnv})
	b.Add(4) // first frame
	c.advance(50 * time.Millisecond)
	b.Add(4) // throttled
	c.advance(50 * time.Millisecond)
	b.Add(4) // 100 ms after the first: drawn
	c.advance(10 * time.Millisecond)
	b.Add(8) // throttled
	c.advance(10 * time.Millisecond)
	b.Set(40) // the total: drawn at once
	c.advance(10 * time.Millisecond)
	b.Set(40) // the same again: not drawn
	b.Done()
	b.Add(1) // after Done: nothing
	want := []string{
		"work [#---------]  10%  4/40",
		"work [###-------]  30%  12/40",
		"work [##########] 100%  40/40",
		"work [##########] 100%  40/40\n",
	}
	if got := s.frames(); !equal(got, want) {
		t.Fatalf("frames\n%q\nwant\n%q", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBytesRateAndTimeLeft: a byte bar shows its amounts in the total's
// multiple, the rate and the time left, and its note.
func TestBytesRateAndTimeLeft(t *testing.T) {
	var s screen
	c := newClock()
	b := New(&s, "gen", 32<<20, Options{Unit: Bytes, Now: c.now, Getenv: noEnv})
	c.advance(3 * time.Second)
	b.Update(12<<20, 32<<20, "tensor 7")
	want := "gen [###########-------------------]  37%  12.0/32.0 MiB  4.0 MiB/s  5s left  tensor 7"
	if got := s.frames(); len(got) != 1 || got[0] != want {
		t.Fatalf("frames %q, want %q", got, want)
	}
	s.Reset()
	c.advance(time.Second)
	b.Update(1536, 0, "") // unknown total: the amount alone
	if got := s.frames(); len(got) != 1 || got[0] != "gen 1.5 KiB  384.0 B/s" {
		t.Fatalf("unknown total: %q", got)
	}
}

// TestDuration: a Duration bar counts seconds; the time left is the
// amount left, whenever the bar started.
func TestDuration(t *testing.T) {
	var s screen
	c := newClock()
	b := New(&s, "run", int64(17*time.Second), Options{Unit: Duration, Width: 17, Now: c.now, Getenv: noEnv})
	c.advance(100 * time.Millisecond)
	b.Update(int64(4*time.Second), int64(17*time.Second), "warm-up")
	want := "run [####-------------]  23%  4s/17s  13s left  warm-up"
	if got := s.frames(); len(got) != 1 || got[0] != want {
		t.Fatalf("frames %q, want %q", got, want)
	}
}

// TestQuietOffTerminal: a buffer, a file, and a terminal in CI or with
// TERM=dumb get no frame at all; what is written through the bar still
// gets through, as is.
func TestQuietOffTerminal(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var buf bytes.Buffer
	var ci, dumb screen
	for name, c := range map[string]struct {
		w interface {
			Write([]byte) (int, error)
		}
		env func(string) string
	}{
		"buffer": {&buf, noEnv}, "file": {file, noEnv},
		"CI=true": {&ci, env("CI", "true")}, "TERM=dumb": {&dumb, env("TERM", "dumb")},
	} {
		b := New(c.w, "x", 10, Options{Getenv: c.env})
		if b.Enabled() {
			t.Errorf("%s: enabled", name)
		}
		b.Add(3)
		b.Set(10)
		b.Write([]byte("a line\n"))
		b.Done()
	}
	st, _ := file.Stat()
	for name, got := range map[string]string{"buffer": buf.String(), "CI": ci.String(), "dumb": dumb.String()} {
		if got != "a line\n" {
			t.Errorf("%s: wrote %q, want only the line", name, got)
		}
	}
	if st.Size() != int64(len("a line\n")) {
		t.Errorf("file: %d bytes written", st.Size())
	}
	if !Enabled(&screen{}, env("CI", "false")) || !Enabled(&screen{}, env("CI", "0")) {
		t.Error("CI=false or CI=0 turned the bars off")
	}
}

// TestPseudoTerminal: a pseudo-terminal's file is a terminal, its
// controlling side's is not.
func TestPseudoTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if !Enabled(tty, noEnv) {
		t.Error("a pty is not a terminal")
	}
	if Enabled(tty, env("CI", "true")) {
		t.Error("a pty in CI draws bars")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if Enabled(w, noEnv) {
		t.Error("a pipe is a terminal")
	}
}

// TestWriteAbove: a line written through the bar goes above it: the
// bar's line is erased, the line written, the bar drawn again.
func TestWriteAbove(t *testing.T) {
	var s screen
	c := newClock()
	b := New(&s, "epoch 1/2", 4, Options{Width: 4, Now: c.now, Getenv: noEnv})
	b.Update(1, 4, "loss 0.5")
	s.Reset()
	b.Write([]byte("saved\n"))
	if got, want := s.String(), "\r\033[Ksaved\n\r\033[Kepoch 1/2 [#---]  25%  1/4  loss 0.5"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	s.Reset()
	b.Clear()
	b.Done()
	if s.String() != "\r\033[K" {
		t.Fatalf("Clear then Done wrote %q", s.String())
	}
}

// TestDelay: work that ends within Delay draws nothing; longer work
// draws once Delay has passed.
func TestDelay(t *testing.T) {
	var s screen
	c := newClock()
	o := Options{Delay: 500 * time.Millisecond, Width: 2, Now: c.now, Getenv: noEnv}
	b := New(&s, "load", 2, o)
	b.Set(1)
	c.advance(100 * time.Millisecond)
	b.Set(2)
	b.Done()
	if s.Len() != 0 {
		t.Fatalf("a quick bar drew %q", s.String())
	}
	b = New(&s, "load", 2, o)
	b.Set(1)
	c.advance(600 * time.Millisecond)
	b.Set(2)
	b.Done()
	if got := s.frames(); !equal(got, []string{"load [##] 100%  2/2", "load [##] 100%  2/2\n"}) {
		t.Fatalf("frames %q", got)
	}
}

// TestCut: a frame is cut to the terminal's width less one column.
func TestCut(t *testing.T) {
	var s screen
	b := New(&s, "a-long-label", 10, Options{Columns: 12, Getenv: noEnv})
	b.Add(1)
	if got := s.frames(); len(got) != 1 || got[0] != "a-long-labe" {
		t.Fatalf("frames %q", got)
	}
}

// TestCountWriter: bytes written through CountWriter reach both the
// writer and the bar.
func TestCountWriter(t *testing.T) {
	var s screen
	var out bytes.Buffer
	c := newClock()
	b := New(&s, "w", 10, Options{Width: 10, Now: c.now, Getenv: noEnv})
	w := b.CountWriter(&out)
	w.Write([]byte("hello"))
	c.advance(time.Second)
	w.Write([]byte("world"))
	if out.String() != "helloworld" {
		t.Fatalf("writer got %q", out.String())
	}
	if got := s.frames(); !equal(got, []string{"w [#####-----]  50%  5/10", "w [##########] 100%  10/10"}) {
		t.Fatalf("frames %q", got)
	}
}
