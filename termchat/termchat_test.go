package termchat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// simConfig is two simulated models (the paper-r2r latency profile) under
// r2r-random, and the small one alone as a second preset.
func simConfig() config.Config {
	cfg := config.Default()
	cfg.Models = []config.Model{
		{Name: "slm", Engine: loader.KindSim, Profile: "paper-r2r/slm", Seed: 1},
		{Name: "llm", Engine: loader.KindSim, Profile: "paper-r2r/llm", Seed: 2},
	}
	cfg.Presets = []config.Preset{
		{Name: "r2r-random", Algorithm: "r2r-random", Models: []string{"slm", "llm"}, Params: map[string]string{"p": "0.35"}, Thresholds: "1,1"},
		{Name: "slm-alone", Algorithm: "single", Models: []string{"slm"}, Thresholds: "1"},
	}
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.FillDefaults()
	return cfg
}

// testServer is a real server on the simulated pair, behind a recorder
// of the chat requests' bodies.
type testServer struct {
	url    string
	client *http.Client
	mu     sync.Mutex
	bodies []map[string]any
}

func startServer(t *testing.T, edit ...func(*config.Config)) *testServer {
	t.Helper()
	cfg := simConfig()
	for _, e := range edit {
		e(&cfg)
	}
	srv, err := server.New(context.Background(), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{client: &http.Client{}}
	h := srv.Handler()
	ts.url = testkit.ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			ts.mu.Lock()
			ts.bodies = append(ts.bodies, m)
			ts.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.client.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return ts
}

// requests returns the chat request bodies so far.
func (ts *testServer) requests() []map[string]any {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]map[string]any(nil), ts.bodies...)
}

// metrics returns /metrics.
func (ts *testServer) metrics(t *testing.T) string {
	t.Helper()
	resp, err := ts.client.Get(ts.url + "/metrics")
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

// TestPipePlainOutput: with pipes for input and output the session reads
// lines as they come and writes plain text: the answer, the stats line,
// the commands' lines, and not one escape sequence.
func TestPipePlainOutput(t *testing.T) {
	ts := startServer(t)
	n := 12
	text := runPiped(t, Options{URL: ts.url, MaxTokens: &n}, "Hello there\n/set temperature 0.5\n/model nosuch\n/stats\n")
	if strings.ContainsRune(text, '\x1b') {
		t.Errorf("escape sequences in plain output:\n%q", text)
	}
	for _, want := range []string{
		"Chatting with r2r-random: r2r-random routing over slm, llm.",
		"[length limit · 12 tokens · ",
		"Set temperature to 0.5.",
		`error: no model "nosuch" (the server has r2r-random, slm-alone)`,
		"1 answer, 2 messages in the conversation.",
		"[session · 12 tokens",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the output:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`tok/s · [0-9.]+ s · slm \d+% · llm \d+%\]`).MatchString(text) {
		t.Errorf("no per-model shares in the stats line:\n%s", text)
	}
	if reqs := ts.requests(); len(reqs) != 1 || reqs[0]["model"] != "r2r-random" || reqs[0]["stream"] != true {
		t.Errorf("requests: %v", reqs)
	}
}

// TestDropsOldestExchange: when the server says the conversation no
// longer fits the model's context, the oldest exchange is dropped and the
// question sent again, so the chat goes on.
func TestDropsOldestExchange(t *testing.T) {
	ts := startServer(t, func(c *config.Config) {
		for i := range c.Models {
			c.Models[i].ContextLength = 100
		}
	})
	n := 30
	out := runPiped(t, Options{URL: ts.url, MaxTokens: &n}, "Hello\nHello\nHello\n")
	if got := strings.Count(out, "[length limit · 30 tokens"); got != 3 {
		t.Errorf("%d answers; want 3:\n%s", got, out)
	}
	if !strings.Contains(out, "its oldest exchange is dropped") {
		t.Errorf("no exchange dropped:\n%s", out)
	}
	reqs := ts.requests()
	var sizes []int
	for _, r := range reqs {
		sizes = append(sizes, len(r["messages"].([]any)))
	}
	if len(sizes) < 4 || sizes[0] != 1 || sizes[1] != 3 || sizes[len(sizes)-1] >= sizes[len(sizes)-2] {
		t.Errorf("messages per request %v: want 1, 3, then a refused one and a retry with fewer", sizes)
	}
}

// runPiped runs a session with pipes, input as its input, and returns its
// output.
func runPiped(t *testing.T, o Options, input string) string {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer outR.Close()
	o.In, o.Out = inR, outW
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), o)
		outW.Close()
	}()
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(outR); out <- b }()
	_, _ = io.WriteString(inW, input)
	inW.Close()
	if err := testkit.Receive(t, done, 60*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return string(testkit.Receive(t, out, 10*time.Second))
}

// TestReadMessage: continuation lines, """ blocks, pastes, and Ctrl-C
// discarding what was typed or, at an empty prompt, ending the session.
func TestReadMessage(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []fakeLine
		want  string
		err   error
	}{
		{"one line", []fakeLine{{line: "hi"}}, "hi", nil},
		{"backslash", []fakeLine{{line: `a \`}, {line: "b"}}, "a \nb", nil},
		{"block", []fakeLine{{line: `"""first`}, {line: "second"}, {line: `third"""`}}, "first\nsecond\nthird", nil},
		{"one-line block", []fakeLine{{line: `"""x"""`}}, "x", nil},
		{"paste", []fakeLine{{line: "p1", pasted: true}, {line: "p2", pasted: true}, {line: "end"}}, "p1\np2\nend", nil},
		{"ctrl-c discards", []fakeLine{{line: "typed", err: errInterrupt}}, "", nil},
		{"ctrl-c in a block", []fakeLine{{line: `"""`}, {line: "", err: errInterrupt}}, "", nil},
		{"ctrl-c at an empty prompt", []fakeLine{{line: "", err: errInterrupt}}, "", errInterrupt},
		{"eof", []fakeLine{{err: io.EOF}}, "", io.EOF},
		{"eof ends a block", []fakeLine{{line: `"""a`}, {err: io.EOF}}, "a\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &fakeReader{lines: c.lines}
			got, err := readMessage(r)
			if got != c.want || !errors.Is(err, c.err) {
				t.Errorf("readMessage = %q, %v; want %q, %v", got, err, c.want, c.err)
			}
			if r.next != len(c.lines) {
				t.Errorf("read %d of %d lines", r.next, len(c.lines))
			}
		})
	}
}

type fakeLine struct {
	line   string
	pasted bool
	err    error
}

type fakeReader struct {
	lines []fakeLine
	next  int
}

func (f *fakeReader) readLine(string) (string, bool, error) {
	l := f.lines[f.next]
	f.next++
	return l.line, l.pasted, l.err
}

func (f *fakeReader) watch(func()) func() { return func() {} }

// TestStatsLine: tokens, speed and shares, the preset's models first,
// colours only when asked for, and a server's control characters dropped.
func TestStatsLine(t *testing.T) {
	tl := tally{tokens: 40, elapsed: 2 * time.Second, byModel: map[string]int{"llm": 10, "slm": 30, "x\x1b[2J": 0}}
	p := &painter{models: []string{"slm", "llm"}}
	want := "[40 tokens · 20.0 tok/s · 2.00 s · slm 75% · llm 25% · x[2J 0%]"
	if got := p.statsLine("", tl); got != want {
		t.Errorf("statsLine = %q; want %q", got, want)
	}
	p.color = true
	if got := p.statsLine("stopped", tl); !strings.HasPrefix(got, "[stopped · ") || !strings.Contains(got, "\x1b[36mslm\x1b[0m 75%") ||
		!strings.Contains(got, "\x1b[33mllm\x1b[0m 25%") {
		t.Errorf("coloured statsLine = %q", got)
	}
}

// TestSettings: /set parses and bounds its values, and "default" gives
// the server's default back.
func TestSettings(t *testing.T) {
	var st settings
	set := setters()
	for _, c := range []struct{ key, val, err string }{
		{"temperature", "0.7", ""}, {"temperature", "3", "want a number from 0 to 2"}, {"temperature", "x", "want a number"},
		{"top_p", "0.9", ""}, {"max_tokens", "0", "positive"}, {"max_tokens", "64", ""}, {"seed", "-1", "non-negative"},
		{"seed", "7", ""}, {"system", "Be brief.", ""},
	} {
		err := set[c.key](&st, c.val)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("/set %s %s: %v; want %q", c.key, c.val, err, c.err)
		}
	}
	req := st.request("p", nil)
	if *req.Temperature != 0.7 || *req.TopP != 0.9 || *req.MaxTokens != 64 || *req.Seed != 7 || st.system != "Be brief." {
		t.Errorf("settings %s", st.show())
	}
	if err := set["temperature"](&st, "default"); err != nil || st.temperature != nil {
		t.Errorf("/set temperature default: %v, %v", err, st.temperature)
	}
}

// TestPainterColoursByModel: each piece of text takes the colour of the
// model of its token, a piece without a token keeps the last one, a colour
// is set only where the model changes, and the answer ends reset and on a
// new line; without colours the text is written as it came.
func TestPainterColoursByModel(t *testing.T) {
	pieces := []piece{{" a", []string{"slm"}}, {" b", []string{"llm"}}, {" c", []string{"llm"}}, {" d", []string{"slm"}},
		{"!", nil}, {"\x1b[2J e", []string{"other"}}}
	for _, c := range []struct {
		color bool
		want  string
	}{
		{true, "\x1b[36m a\x1b[33m b c\x1b[36m d!\x1b[0m[2J e\n"},
		{false, " a b c d![2J e\n"},
	} {
		var b strings.Builder
		p := &painter{w: &b, color: c.color, models: []string{"slm", "llm"}, atBOL: true}
		for _, pc := range pieces {
			p.piece(pc)
		}
		p.endAnswer()
		if b.String() != c.want {
			t.Errorf("colour %v: %q; want %q", c.color, b.String(), c.want)
		}
	}
}
