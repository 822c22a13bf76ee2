//go:build linux

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/server"
)

// ansiRE matches the escape sequences of colours and line editing.
var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z~]`)

// screen is a child's output, read for what appears after the last match.
type screen struct {
	t    *testing.T
	out  *testkit.Buffer
	mark int
}

// wait waits for re in the output after the last match, escape sequences
// removed.
func (s *screen) wait(re string) {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	testkit.Eventually(s.t, 60*time.Second, func() bool {
		plain := ansiRE.ReplaceAllString(s.out.String(), "")[s.mark:]
		loc := rx.FindStringIndex(plain)
		if loc != nil {
			s.mark += loc[1]
		}
		return loc != nil
	}, "%q in the output; it shows:\n%s", re, ansiRE.ReplaceAllString(s.out.String(), ""))
}

// TestChatTerminal runs the built command on a pseudo-terminal with the
// simulated pair started in its own process: a question streams back in
// colour with its stats line, Ctrl-C stops a long answer and the prompt
// comes back, Ctrl-D at the prompt ends the command with status 0 and the
// terminal out of raw mode.
func TestChatTerminal(t *testing.T) {
	cmd := exec.Command(bin.path, "chat", "--engine", "sim", "--thresholds", "1,1", "--max-tokens", "16")
	cmd.Env = append(os.Environ(), "NO_COLOR=")
	master, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 160})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	out := &testkit.Buffer{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, master)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-copied
		master.Close()
	}()
	s := &screen{t: t, out: out}
	typeKeys := func(k string) {
		if _, err := master.Write([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	s.wait(`Chatting with r2r-random: r2r-random routing over slm, llm\.`)
	typeKeys("Hello\r")
	s.wait(`\[length limit · 16 tokens · [0-9.]+ tok/s · [0-9.]+ s · slm \d+% · llm \d+%\]\s*>>> $`)
	if raw := out.String(); !strings.Contains(raw, "\x1b[36m") {
		t.Errorf("no colour on a terminal: %q", raw)
	}
	typeKeys("/set max_tokens 30000\rTell me a long story\r")
	s.wait(`long story\s+\S+ \S+ \S+ `)
	typeKeys("\x03")
	s.wait(`\[stopped · \d+ tokens.*\]\s*>>> $`)
	typeKeys("\x04")
	if err := testkit.Receive(t, exited, 30*time.Second); err != nil {
		t.Fatalf("chat after Ctrl-D: %v\n%s", err, out)
	}
	st, err := unix.IoctlGetTermios(int(master.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lflag&unix.ICANON == 0 || st.Lflag&unix.ECHO == 0 || st.Oflag&unix.OPOST == 0 {
		t.Errorf("the terminal is still in raw mode after chat: lflag %#x oflag %#x", st.Lflag, st.Oflag)
	}
}

// TestChatPipeInterrupt runs the built command with pipes against a
// running server (--url): the output is plain text, SIGINT during a long
// answer stops it (the server ends the request) and the chat goes on
// reading, and the end of the input ends it with status 0.
func TestChatPipeInterrupt(t *testing.T) {
	url, metrics := startChatServer(t)
	cmd := exec.Command(bin.path, "chat", "--url", url, "--max-tokens", "30000")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut := &testkit.Buffer{}, &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	s := &screen{t: t, out: out}
	s.wait(`Chatting with r2r-random.*\n.*Ctrl-D leaves\.\n`)
	_, _ = io.WriteString(stdin, "Tell me a long story\n")
	testkit.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(metrics(), "tokenrouter_http_generation_in_flight 1")
	}, "the answer to start")
	s.wait(`\S+ \S+ \S+ `) // words of the answer
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	s.wait(`\[stopped · \d+ tokens`)
	testkit.Eventually(t, 30*time.Second, func() bool {
		m := metrics()
		return strings.Contains(m, "tokenrouter_http_generation_in_flight 0") &&
			strings.Contains(m, `tokenrouter_requests_aborted_total{preset="r2r-random",reason="client_disconnected"} 1`)
	}, "the server to end the stopped request: %s", metrics())
	_, _ = io.WriteString(stdin, "/set max_tokens 8\nAnd then?\n")
	s.wait(`\[length limit · 8 tokens · [0-9.]+ tok/s · [0-9.]+ s · slm \d+% · llm \d+%\]`)
	stdin.Close()
	if err := testkit.Receive(t, exited, 30*time.Second); err != nil {
		t.Fatalf("chat at the end of its input: %v\n%s%s", err, out, errOut)
	}
	if strings.ContainsRune(out.String(), '\x1b') {
		t.Errorf("escape sequences in piped output: %q", out)
	}
}

// startChatServer serves the simulated pair on a loopback port until the
// test ends; it returns the URL and a reader of /metrics.
func startChatServer(t *testing.T) (string, func() string) {
	t.Helper()
	cfg := config.Default()
	cfg.Models = []config.Model{
		{Name: "slm", Engine: loader.KindSim, Profile: "paper-r2r/slm", Seed: 1},
		{Name: "llm", Engine: loader.KindSim, Profile: "paper-r2r/llm", Seed: 2},
	}
	cfg.Presets = []config.Preset{{Name: "r2r-random", Algorithm: "r2r-random", Models: []string{"slm", "llm"},
		Params: map[string]string{"p": "0.35"}, Thresholds: "1,1"}}
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.FillDefaults()
	srv, err := server.New(context.Background(), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	url := "http://" + testkit.Serve(t, srv.Serve)
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	return url, func() string {
		resp, err := client.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}
