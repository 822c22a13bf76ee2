package termchat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Input limits and keys.
const (
	maxLineBytes = 1 << 20 // one line of piped input
	maxHistory   = 1000    // lines the line editor recalls
	keyCtrlC     = 3
	keyCtrlE     = 5 // the line editor's end-of-line key
)

var (
	// errInterrupt is Ctrl-C (or SIGINT) at the prompt.
	errInterrupt = errors.New("interrupted")
	// errStopped ends a read the session woke at its end.
	errStopped = errors.New("input closed")
)

// source reads the input on a goroutine of its own and hands over what it
// reads on chunks, which it closes at the end of the input (err then says
// why). stop ends the goroutine.
type source struct {
	chunks  chan []byte
	err     error
	quit    chan struct{}
	done    chan struct{}
	wake    func()
	release func()
}

// newSource starts reading f.
func newSource(f *os.File) (*source, error) {
	r, wake, release, err := cancelable(f)
	if err != nil {
		return nil, err
	}
	s := &source{chunks: make(chan []byte), quit: make(chan struct{}), done: make(chan struct{}), wake: wake, release: release}
	go s.run(r)
	return s, nil
}

func (s *source) run(r io.Reader) {
	defer close(s.done)
	defer close(s.chunks)
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			select {
			case s.chunks <- bytes.Clone(buf[:n]):
			case <-s.quit:
				s.err = errStopped
				return
			}
		}
		if err != nil {
			s.err = err
			return
		}
	}
}

// stop ends the reading goroutine and waits for it, where a blocked read
// can be woken (see cancelable).
func (s *source) stop() {
	close(s.quit)
	if s.wake != nil {
		s.wake()
		<-s.done
		s.release()
	}
}

// endErr is the error that ended the input: io.EOF for its normal end.
func (s *source) endErr() error {
	if s.err == nil || errors.Is(s.err, errStopped) {
		return io.EOF
	}
	return s.err
}

// lineReader reads the user's lines and watches for interrupts while an
// answer streams.
type lineReader interface {
	// readLine returns the next line (pasted says it came in a bracketed
	// paste), errInterrupt for Ctrl-C, io.EOF at the end of the input.
	readLine(prompt string) (line string, pasted bool, err error)
	// watch calls cancel on Ctrl-C until the returned stop is called.
	watch(cancel func()) (stop func())
}

// plainReader reads lines from a pipe or a file; interrupts are signals.
type plainReader struct {
	ctx  context.Context
	src  *source
	sigs <-chan os.Signal
	buf  []byte
	eof  bool
}

func (r *plainReader) readLine(string) (string, bool, error) {
	for {
		if i := bytes.IndexByte(r.buf, '\n'); i >= 0 {
			line := string(r.buf[:i])
			r.buf = r.buf[i+1:]
			return strings.TrimSuffix(line, "\r"), false, nil
		}
		if r.eof {
			if len(r.buf) > 0 {
				line := string(r.buf)
				r.buf = nil
				return line, false, nil
			}
			return "", false, r.src.endErr()
		}
		if len(r.buf) > maxLineBytes {
			return "", false, errors.New("an input line is longer than 1 MiB")
		}
		select {
		case b, ok := <-r.src.chunks:
			r.eof = !ok
			r.buf = append(r.buf, b...)
		case <-r.sigs:
			return "", false, errInterrupt
		case <-r.ctx.Done():
			return "", false, r.ctx.Err()
		}
	}
}

func (r *plainReader) watch(cancel func()) func() {
	return watchWith(func(quit <-chan struct{}) {
		select {
		case <-r.sigs:
			cancel()
		case <-quit:
		}
	})
}

// watchWith runs loop on a goroutine until the returned stop closes its
// quit channel, and waits for it there.
func watchWith(loop func(quit <-chan struct{})) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		loop(quit)
	}()
	return func() {
		close(quit)
		<-done
	}
}

// keys is the line editor's input on a terminal in raw mode, where Ctrl-C
// is a byte. At the prompt it becomes end-of-line then Enter, with "^C"
// shown, so the editor returns the line typed so far and the session knows
// it was interrupted; while an answer streams, watch takes it and keeps
// the other keys for the next prompt.
type keys struct {
	ctx         context.Context
	src         *source
	sigs        <-chan os.Signal
	echo        io.Writer // where "^C" is shown
	pending     []byte
	ctrlC       bool // Ctrl-E was sent for a Ctrl-C; Enter follows
	interrupted bool
}

// Read hands the line editor its next keys.
func (k *keys) Read(p []byte) (int, error) {
	if k.ctrlC {
		k.ctrlC, k.interrupted = false, true
		_, _ = io.WriteString(k.echo, "^C")
		p[0] = '\r'
		return 1, nil
	}
	if len(k.pending) == 0 {
		select {
		case b, ok := <-k.src.chunks:
			if !ok {
				return 0, k.src.endErr()
			}
			k.pending = b
		case <-k.sigs:
			k.pending = []byte{keyCtrlC}
		case <-k.ctx.Done():
			return 0, k.ctx.Err()
		}
	}
	if k.pending[0] == keyCtrlC {
		k.pending, k.ctrlC = k.pending[1:], true
		p[0] = keyCtrlE
		return 1, nil
	}
	n := bytes.IndexByte(k.pending, keyCtrlC)
	if n < 0 {
		n = len(k.pending)
	}
	n = copy(p, k.pending[:n])
	k.pending = k.pending[n:]
	return n, nil
}

// watch cancels on Ctrl-C (or a signal) while an answer streams; the other
// keys typed meanwhile wait for the next prompt.
func (k *keys) watch(cancel func()) func() {
	return watchWith(func(quit <-chan struct{}) {
		for {
			select {
			case b, ok := <-k.src.chunks:
				if !ok {
					return
				}
				if bytes.IndexByte(b, keyCtrlC) >= 0 {
					cancel()
					b = bytes.ReplaceAll(b, []byte{keyCtrlC}, nil)
				}
				k.pending = append(k.pending, b...)
			case <-k.sigs:
				cancel()
			case <-quit:
				return
			}
		}
	})
}

// termReader is the line editor on a terminal in raw mode.
type termReader struct {
	fd   int
	term *term.Terminal
	keys *keys
	hist *history
}

func (r *termReader) readLine(prompt string) (string, bool, error) {
	if w, h, err := term.GetSize(r.fd); err == nil && w > 0 && h > 0 {
		_ = r.term.SetSize(w, h)
	}
	r.term.SetPrompt(prompt)
	line, err := r.term.ReadLine()
	if r.keys.interrupted {
		r.keys.interrupted = false
		r.hist.dropLast()
		return line, false, errInterrupt
	}
	if errors.Is(err, term.ErrPasteIndicator) {
		return line, true, nil
	}
	return line, false, err
}

func (r *termReader) watch(cancel func()) func() { return r.keys.watch(cancel) }

// history is the line editor's history: the lines entered, without
// repeats of the last one or blank lines, at most maxHistory.
type history struct {
	lines []string
	added bool // the last Add kept its line
}

// Add records a line entered.
func (h *history) Add(line string) {
	h.added = strings.TrimSpace(line) != "" && (len(h.lines) == 0 || h.lines[len(h.lines)-1] != line)
	if h.added {
		h.lines = append(h.lines, line)
		if len(h.lines) > maxHistory {
			h.lines = h.lines[len(h.lines)-maxHistory:]
		}
	}
}

// Len is the number of lines recorded.
func (h *history) Len() int { return len(h.lines) }

// At returns the line entered i lines ago (0: the last).
func (h *history) At(i int) string { return h.lines[len(h.lines)-1-i] }

// dropLast forgets the line the last Add kept (a line Ctrl-C discarded).
func (h *history) dropLast() {
	if h.added {
		h.lines, h.added = h.lines[:len(h.lines)-1], false
	}
}

// readMessage reads one message: a line; lines ending in a backslash
// continue on the next; a block opened by """ runs to the line ending in
// """; a bracketed paste of several lines is one message. Ctrl-C discards
// what was typed, and at an empty prompt ends the session (errInterrupt).
func readMessage(r lineReader) (string, error) {
	var parts []string
	block, prompt := false, ">>> "
	for {
		line, pasted, err := r.readLine(prompt)
		prompt = "... "
		switch {
		case errors.Is(err, errInterrupt):
			if line == "" && len(parts) == 0 && !block {
				return "", errInterrupt
			}
			return "", nil
		case err != nil && len(parts) > 0 && errors.Is(err, io.EOF):
			return strings.Join(append(parts, line), "\n"), nil
		case err != nil:
			return "", err
		case block:
			if body, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `"""`); ok {
				return strings.Join(append(parts, body), "\n"), nil
			}
			parts = append(parts, line)
		case len(parts) == 0 && strings.HasPrefix(line, `"""`):
			rest := strings.TrimPrefix(line, `"""`)
			if body, ok := strings.CutSuffix(strings.TrimRight(rest, " \t"), `"""`); ok {
				return body, nil
			}
			block = true
			if rest != "" {
				parts = append(parts, rest)
			}
		case pasted:
			parts = append(parts, line)
		case strings.HasSuffix(line, `\`):
			parts = append(parts, strings.TrimSuffix(line, `\`))
		default:
			return strings.Join(append(parts, line), "\n"), nil
		}
	}
}
