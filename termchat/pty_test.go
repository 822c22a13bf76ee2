//go:build linux

package termchat

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// ptySession is Run on a pseudo-terminal: the test types on the master
// side and reads what the session writes there.
type ptySession struct {
	t      *testing.T
	master *os.File
	tty    *os.File
	out    *testkit.Buffer
	done   chan error
	mark   int // where the next wait starts looking in out
}

func startPTY(t *testing.T, o Options) *ptySession {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: 50, Cols: 160}); err != nil {
		t.Fatal(err)
	}
	out := &testkit.Buffer{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, master) // ends with EIO once both sides are closed
	}()
	s := &ptySession{t: t, master: master, tty: tty, out: out, done: make(chan error, 1)}
	o.In, o.Out = tty, tty
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		s.done <- Run(ctx, o)
	}()
	t.Cleanup(func() {
		cancel() // a session the test did not end
		<-exited
		tty.Close()
		master.Close()
		<-copied
	})
	return s
}

// mode is the terminal's line discipline flags: echo, canonical input,
// signals, output processing.
func (s *ptySession) mode() [2]uint32 {
	s.t.Helper()
	st, err := unix.IoctlGetTermios(int(s.tty.Fd()), unix.TCGETS)
	if err != nil {
		s.t.Fatal(err)
	}
	return [2]uint32{st.Lflag & (unix.ECHO | unix.ICANON | unix.ISIG), st.Oflag & unix.OPOST}
}

// ansi matches the escape sequences of colours and of the line editor.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z~]`)

// wait waits for re to match the output after the last match (escape
// sequences removed) and returns the match and its groups.
func (s *ptySession) wait(re string) []string {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	testkit.Eventually(s.t, 60*time.Second, func() bool {
		plain := ansi.ReplaceAllString(s.out.String(), "")[s.mark:]
		loc := rx.FindStringSubmatchIndex(plain)
		if loc == nil {
			return false
		}
		m = make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = plain[loc[2*i]:loc[2*i+1]]
			}
		}
		s.mark += loc[1]
		return true
	}, "%q on the terminal; it shows:\n%s", re, s.tail())
	return m
}

// tail is the end of the output, readable.
func (s *ptySession) tail() string {
	text := s.out.String()
	if len(text) > 3000 {
		text = text[len(text)-3000:]
	}
	return strings.ReplaceAll(ansi.ReplaceAllString(text, ""), "\r", "")
}

func (s *ptySession) typeKeys(keys string) {
	s.t.Helper()
	if _, err := s.master.Write([]byte(keys)); err != nil {
		s.t.Fatal(err)
	}
}

// TestTerminalSession types into a pseudo-terminal against a real server
// on the simulated pair: a question streams back coloured by model with
// its stats line; /set, /clear and /model change what the next request
// sends; an unknown model is an error line; Ctrl-C in the middle of a long
// answer stops it, the prompt comes back and the server's request ends;
// Ctrl-C over typed text discards it; at an empty prompt it leaves, and
// the terminal is out of raw mode again.
func TestTerminalSession(t *testing.T) {
	ts := startServer(t)
	n := 24
	s := startPTY(t, Options{URL: ts.url, MaxTokens: &n})
	cooked := s.mode()
	s.wait(`Chatting with r2r-random: r2r-random routing over slm, llm\.`)
	s.wait(`>>> $`)
	if s.mode() == cooked {
		t.Errorf("the terminal is not in raw mode during the session")
	}

	s.typeKeys("Tell me a story\r")
	m := s.wait(`\[length limit · (\d+) tokens · [0-9.]+ tok/s · [0-9.]+ s · slm (\d+)% · llm (\d+)%\]\s*\r?\n>>> $`)
	if m[1] != "24" {
		t.Errorf("stats line counts %s tokens; want 24", m[1])
	}
	raw := s.out.String()
	if !strings.Contains(raw, "\x1b[36m") || !strings.Contains(raw, "\x1b[33m") {
		t.Errorf("no token coloured as slm (36) or llm (33): %q", raw)
	}

	s.typeKeys("/set temperature 0.7\r")
	s.wait(`Set temperature to 0\.7\.`)
	s.typeKeys("Go on\r")
	s.wait(`\[length limit · 24 tokens`)
	s.typeKeys("/clear\r")
	s.wait(`Conversation cleared\.`)
	s.typeKeys("/model nosuch\r")
	s.wait(`error: no model "nosuch" \(the server has r2r-random, slm-alone\)`)
	s.typeKeys("/model slm-alone\r")
	s.wait(`Chatting with slm-alone: single routing over slm\.`)
	s.typeKeys("Again\r")
	s.wait(`\[length limit · 24 tokens · [0-9.]+ tok/s · [0-9.]+ s · slm 100%\]`)
	reqs := ts.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests; want 3", len(reqs))
	}
	if _, ok := reqs[0]["temperature"]; ok {
		t.Errorf("first request sent a temperature: %v", reqs[0])
	}
	if reqs[1]["temperature"] != 0.7 || len(reqs[1]["messages"].([]any)) != 3 {
		t.Errorf("second request: want temperature 0.7 and 3 messages (a turn, its answer, the question): %v", reqs[1])
	}
	if reqs[2]["model"] != "slm-alone" || len(reqs[2]["messages"].([]any)) != 1 {
		t.Errorf("after /clear and /model slm-alone: want one message to slm-alone: %v", reqs[2])
	}

	s.typeKeys("/model r2r-random\r/set max_tokens 30000\r")
	s.wait(`Set max_tokens to 30000\.`)
	s.typeKeys("Tell me a very long story\r")
	testkit.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(ts.metrics(t), "tokenrouter_http_generation_in_flight 1")
	}, "the long answer to start")
	s.wait(`very long story\s+\S+ \S+ \S+ `) // some words streamed
	s.typeKeys("\x03")
	s.wait(`\[stopped · \d+ tokens.*\]\s*\r?\n>>> $`)
	testkit.Eventually(t, 30*time.Second, func() bool {
		m := ts.metrics(t)
		return strings.Contains(m, "tokenrouter_http_generation_in_flight 0") &&
			strings.Contains(m, `tokenrouter_active_requests{preset="r2r-random"} 0`) &&
			strings.Contains(m, `tokenrouter_requests_aborted_total{preset="r2r-random",reason="client_disconnected"} 1`)
	}, "the server to end the stopped request: %s", ts.metrics(t))

	s.typeKeys("/stats\r")
	s.wait(`4 answers, 4 messages in the conversation\.`)
	s.typeKeys("some words\x03")
	s.wait(`some words\^C\s*\r?\n>>> $`)
	s.typeKeys("\x03")
	if err := testkit.Receive(t, s.done, 30*time.Second); err != nil {
		t.Fatalf("Run after Ctrl-C at an empty prompt: %v", err)
	}
	if got := len(ts.requests()); got != 4 {
		t.Errorf("%d requests; want 4 (the discarded line sent nothing)", got)
	}
	if got := s.mode(); got != cooked {
		t.Errorf("terminal modes after the session %x; want them restored to %x", got, cooked)
	}
}
