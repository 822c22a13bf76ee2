// Package termchat is an interactive chat in a terminal with a server's
// OpenAI API: the user's lines go out as streamed chat completions, and the
// answer comes back token by token, each token in the colour of the model
// that wrote it (the per-token "model" of the logprobs extension), with a
// line after each answer giving its tokens, tokens per second and each
// model's share.
//
// It talks to a running server (Options.URL) or starts one itself: the
// deployment Options.Local describes, served on a free loopback port for
// the session, so that there is one client path either way.
//
// On a terminal (input and output both) the input is read in raw mode by
// a line editor with history; Ctrl-C stops the answer being written (the
// request's connection closes, and the server cancels it) and at an empty
// prompt ends the session, as Ctrl-D does. Otherwise lines are read as
// they come and Options.Interrupts (SIGINT) does what Ctrl-C does; output
// that is not a terminal is plain text, without escape sequences.
package termchat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/tokenrouter/tokenrouter/config"
)

// Options configure a chat session.
type Options struct {
	// URL is the base URL of a running server (http://host:port). Empty:
	// Run serves Local itself for the session.
	URL string
	// APIKey is sent as "Authorization: Bearer <key>". With Local, the
	// server requires it; empty, a key is made up for the session.
	APIKey string
	// Local is the deployment Run serves when URL is empty (its listener
	// settings are replaced: loopback, a free port).
	Local *config.Config
	// Logger is the local server's log (nil: none).
	Logger *slog.Logger
	// LogOutput, where the log handlers write, goes through the line
	// editor while the session owns the terminal, so that log lines do not
	// break the screen (nil: nothing to route).
	LogOutput *LogOutput
	// Model is the preset to chat with (empty: the first one listed).
	Model string
	// System is the system message that opens every conversation (empty:
	// none).
	System string
	// Temperature, TopP, MaxTokens and Seed are the sampling settings
	// sent with every request (nil: the server's defaults); /set changes
	// them.
	Temperature, TopP *float64
	MaxTokens         *int
	Seed              *uint64
	// In and Out are the user's input and the chat's output: a terminal,
	// or pipes and files.
	In, Out *os.File
	// NoColor turns colours off (they are off anyway when Out is not a
	// terminal; callers pass NO_COLOR here).
	NoColor bool
	// Interrupts delivers SIGINT, which does what Ctrl-C does (nil: none).
	Interrupts <-chan os.Signal
}

// Run chats until the user leaves (/exit, Ctrl-D, Ctrl-C at an empty
// prompt, the end of the input) or ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.In == nil || o.Out == nil {
		return errors.New("termchat: no input or output")
	}
	outTerm := term.IsTerminal(int(o.Out.Fd()))
	interactive := outTerm && term.IsTerminal(int(o.In.Fd()))
	c := &client{base: strings.TrimRight(o.URL, "/"), key: o.APIKey, http: newHTTPClient()}
	defer c.http.CloseIdleConnections()
	if o.URL == "" {
		if o.Local == nil {
			return errors.New("termchat: give a server's URL or a deployment to serve")
		}
		if c.key == "" {
			c.key = rand.Text()
		}
		if interactive {
			fmt.Fprintln(o.Out, "Starting the models…")
		}
		base, stop, err := startLocal(ctx, o, c.key)
		if err != nil {
			return err
		}
		defer func() { _ = stop() }()
		c.base = base
	}
	s := &session{client: c, opts: o, settings: settingsOf(o)}
	if err := s.choose(ctx, o.Model); err != nil {
		return err
	}
	src, err := newSource(o.In)
	if err != nil {
		return err
	}
	defer src.stop()
	if !interactive {
		s.paint = &painter{w: o.Out, color: outTerm && !o.NoColor, atBOL: true}
		s.in = &plainReader{ctx: ctx, src: src, sigs: o.Interrupts}
		return s.loop(ctx)
	}
	return s.runTerminal(ctx, src)
}

// runTerminal runs the session on a terminal in raw mode, restored at the
// end.
func (s *session) runTerminal(ctx context.Context, src *source) error {
	fd := int(s.opts.In.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		return fmt.Errorf("termchat: raw mode: %w", err)
	}
	defer func() { _ = term.Restore(fd, old) }()
	k := &keys{ctx: ctx, src: src, sigs: s.opts.Interrupts, echo: s.opts.Out}
	hist := &history{}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{k, s.opts.Out}, ">>> ")
	t.History = hist
	t.SetBracketedPasteMode(true)
	defer t.SetBracketedPasteMode(false)
	if lo := s.opts.LogOutput; lo != nil {
		lo.route(t)
		defer lo.route(nil)
	}
	s.in = &termReader{fd: fd, term: t, keys: k, hist: hist}
	s.paint = &painter{w: t, color: !s.opts.NoColor, atBOL: true}
	return s.loop(ctx)
}

// LogOutput is where a log writes: its writer, or the line editor while a
// session owns the terminal (which then is in raw mode, where a bare
// newline does not return the cursor).
type LogOutput struct {
	mu   sync.Mutex
	w    io.Writer
	term io.Writer
}

// NewLogOutput writes to w outside sessions.
func NewLogOutput(w io.Writer) *LogOutput { return &LogOutput{w: w} }

// route sends the log through t (nil: back to its writer).
func (l *LogOutput) route(t io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term = t
}

// Write writes a log record.
func (l *LogOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term != nil {
		return l.term.Write(p)
	}
	return l.w.Write(p)
}

// session is one chat: the server, the preset, the conversation, the
// settings and the counts so far.
type session struct {
	client   *client
	opts     Options
	in       lineReader
	paint    *painter
	preset   preset
	settings settings
	history  []message
	total    tally
	answers  int
	used     int // prompt and output tokens of the last answer
}

// loop reads messages and commands until the session ends.
func (s *session) loop(ctx context.Context) error {
	s.paint.models = s.preset.modelNames()
	s.greet()
	for {
		text, err := readMessage(s.in)
		switch {
		case errors.Is(err, errInterrupt), errors.Is(err, io.EOF), ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case strings.HasPrefix(strings.TrimSpace(text), "/") && !strings.Contains(text, "\n"):
			if s.command(ctx, strings.TrimSpace(text)) {
				return nil
			}
		case strings.TrimSpace(text) != "":
			if s.ask(ctx, text) != nil {
				return nil // ctx ended
			}
		}
	}
}

// greet names the preset and its models, each in its colour.
func (s *session) greet() {
	p := s.preset
	if len(p.Models) > 0 {
		s.paint.info("Chatting with %s: %s routing over %s.", clean(p.ID), clean(p.Algorithm), s.paint.legend())
	} else {
		s.paint.info("Chatting with %s.", clean(p.ID))
	}
	s.paint.info(`/help lists the commands; a line ending in \ continues, """ opens a block. Ctrl-C stops an answer; Ctrl-D leaves.`)
}

// ask sends the conversation with text as the user's turn and streams the
// answer; Ctrl-C stops it, and what was written of it stays in the
// conversation. A failed request leaves the conversation as it was. The
// error returned ends the session (ctx ended).
func (s *session) ask(ctx context.Context, text string) error {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := s.in.watch(cancel)
	var answer strings.Builder
	var t tally
	start := time.Now()
	res, err := s.send(actx, text, func(p piece) {
		answer.WriteString(p.text)
		t.add(p)
		s.paint.piece(p)
	})
	stop()
	t.elapsed = time.Since(start)
	s.paint.endAnswer()
	stopped := err != nil && actx.Err() != nil && ctx.Err() == nil
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && !stopped:
		s.paint.errorf("%v", err)
		return nil
	}
	t.settle(res)
	prefix := ""
	if stopped {
		prefix = "stopped"
	} else if res.finish == "length" {
		prefix = "length limit"
	}
	s.paint.stats(prefix, t)
	if !stopped || answer.Len() > 0 {
		s.history = append(s.history, message{Role: "user", Content: text}, message{Role: "assistant", Content: answer.String()})
	}
	s.total.merge(t)
	s.answers++
	if res.promptTokens > 0 {
		s.used = res.promptTokens + res.outputTokens
	}
	return nil
}

// send streams the answer to text, dropping the oldest exchanges of the
// conversation while the server says it does not fit the model's context.
func (s *session) send(ctx context.Context, text string, on func(piece)) (result, error) {
	for {
		req := s.settings.request(s.preset.ID, s.messages(message{Role: "user", Content: text}))
		res, err := s.client.stream(ctx, req, on)
		if !tooLong(err) || len(s.history) < 2 {
			return res, err
		}
		s.history = s.history[2:]
		s.paint.info("(The conversation is too long for the model's context: its oldest exchange is dropped.)")
	}
}

// messages is the conversation to send: the system message, the turns so
// far, then next.
func (s *session) messages(next message) []message {
	var out []message
	if s.settings.system != "" {
		out = append(out, message{Role: "system", Content: s.settings.system})
	}
	return append(append(out, s.history...), next)
}
