package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/console"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/server"
)

// testBinary is the tokenrouter executable TestMain builds once; the
// multi-process tests run it as serve and as the sub-server children.
type testBinary struct{ path string }

var bin testBinary // set once by TestMain, read-only afterwards

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tokenrouter-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.path = filepath.Join(dir, "tokenrouter")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin.path, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tokenrouter: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer collects log lines (the front end's and the children's).
type logBuffer struct{ testkit.Buffer }

var startedRE = regexp.MustCompile(`msg="sub-server process started" preset=\S+ model=(\S+) pid=(\d+)`)

// pids returns the latest child process id of each model, and every child
// process id ever started.
func (l *logBuffer) pids() (latest map[string]int, all []int) {
	latest = map[string]int{}
	for _, m := range startedRE.FindAllStringSubmatch(l.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		latest[m[1]] = pid
		all = append(all, pid)
	}
	return latest, all
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, d, cond, "waiting for %s", what)
}

// front is an HTTP front end on 127.0.0.1 over a deployment that runs
// elsewhere.
type front struct {
	url    string
	client *http.Client
	log    *logBuffer
	srv    *server.Server
	stop   context.CancelFunc
	served chan error
}

// startFront serves the default configuration (sim paper-r2r, r2r-random)
// with deploy running the models.
func startFront(t *testing.T, d clusterDeploy) *front {
	t.Helper()
	return startFrontWith(t, d, nil)
}

// startFrontWith is startFront with the configuration changed by tweak.
func startFrontWith(t *testing.T, d clusterDeploy, tweak func(*config.Config)) *front {
	t.Helper()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	d.binary, d.logLevel, d.output, d.log, d.joinTimeout = bin.path, "warn", logs, log, 20*time.Second
	cfg := config.Default()
	cfg.Port, cfg.ShutdownTimeout = 0, 5*time.Second
	// Plans the same "auto" table up to 4 concurrent requests instead of
	// the default 16: 0.05 s instead of 4 s (over 20 s with -race).
	cfg.Presets[0].AutoConcurrency = 4
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := server.New(context.Background(), cfg, server.Options{Logger: log, Deploy: d.deploy})
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &front{url: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second},
		log: logs, srv: srv, stop: cancel, served: make(chan error, 1)}
	go func() { f.served <- srv.Serve(ctx, ln) }()
	return f
}

// shutdown cancels Serve's context, waits for it and closes the server.
func (f *front) shutdown(t *testing.T) {
	t.Helper()
	f.stop()
	if err := <-f.served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	f.client.CloseIdleConnections()
	if err := f.srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// chatResult is what a chat completion returned: status, text, routing
// counts, and for a stream whether it ended with an error event.
type chatResult struct {
	status   int
	text     string
	byModel  map[string]int
	errEvent string
	done     bool
	body     string
}

// chat sends a chat completion; first, if set, is called once the first
// content arrives.
func (f *front) chat(ctx context.Context, stream bool, maxTokens int, first func()) (chatResult, error) {
	return f.chatWith(ctx, stream, maxTokens, nil, first)
}

// chatWith is chat with extra request fields.
func (f *front) chatWith(ctx context.Context, stream bool, maxTokens int, extra map[string]any, first func()) (chatResult, error) {
	fields := map[string]any{"model": "r2r-random", "stream": stream, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": "Tell me a story"}}}
	for k, v := range extra {
		fields[k] = v
	}
	body, _ := json.Marshal(fields)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return chatResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return chatResult{}, err
	}
	defer resp.Body.Close()
	res := chatResult{status: resp.StatusCode}
	type routing struct {
		TokensByModel map[string]int `json:"tokens_by_model"`
	}
	if !stream || resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		res.body = string(b)
		if err != nil || resp.StatusCode != http.StatusOK {
			return res, err
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Routing routing `json:"routing"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
			return res, fmt.Errorf("body %s: %v", b, err)
		}
		res.text, res.byModel = out.Choices[0].Message.Content, out.Routing.TokensByModel
		return res, nil
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			res.done = true
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Routing *routing `json:"routing"`
			Error   *struct {
				Message, Code string
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return res, fmt.Errorf("event %s: %w", data, err)
		}
		if ch.Error != nil {
			res.errEvent = ch.Error.Code + ": " + ch.Error.Message
			continue
		}
		if len(ch.Choices) == 1 && ch.Choices[0].Delta.Content != "" {
			if res.text == "" && first != nil {
				first()
			}
			res.text += ch.Choices[0].Delta.Content
		}
		if ch.Routing != nil {
			res.byModel = ch.Routing.TokensByModel
		}
	}
	return res, sc.Err()
}

// bothModels checks a successful answer with tokens from both models.
func bothModels(t *testing.T, what string, res chatResult, err error) {
	t.Helper()
	if err != nil || res.status != http.StatusOK || res.errEvent != "" || res.text == "" {
		t.Fatalf("%s: %+v, %v", what, res, err)
	}
	if res.byModel["slm"] == 0 || res.byModel["llm"] == 0 {
		t.Fatalf("%s: tokens by model %v: want both", what, res.byModel)
	}
}

// TestServeProcesses runs the sim default with one child process per
// model: answers with tokens from both models, a SIGKILLed child under
// load ends every request in flight with a clear error within a bounded
// time, the restarted child serves again, and shutdown leaves no child.
func TestServeProcesses(t *testing.T) {
	f := startFront(t, clusterDeploy{processes: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dash := watchConsole(t, f)

	res, err := f.chat(ctx, false, 64, nil)
	bothModels(t, "non-streaming", res, err)
	res, err = f.chat(ctx, true, 64, nil)
	bothModels(t, "streaming", res, err)
	if !res.done {
		t.Fatalf("stream without [DONE]: %+v", res)
	}
	// Structured output: each child masks its draws with its own vocabulary.
	body, _ := json.Marshal(map[string]any{"model": "r2r-random", "text": "Tell me a story",
		"sampling_params": map[string]any{"max_new_tokens": 400, "json_schema": map[string]any{"type": "object",
			"properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"}}}})
	resp, err := f.client.Post(f.url+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var gen struct{ Text string }
	err = json.NewDecoder(resp.Body).Decode(&gen)
	resp.Body.Close()
	var obj struct{ N *int64 }
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(gen.Text), &obj) != nil || obj.N == nil {
		t.Fatalf("json_schema across processes: HTTP %d %q (%v)", resp.StatusCode, gen.Text, err)
	}
	// /metrics reports the children's counters from their heartbeats.
	waitFor(t, 5*time.Second, "/metrics to report both children's steps", func() bool {
		body := f.get(t, "/metrics")
		for _, m := range []string{"slm", "llm"} {
			if metricValue(body, "tokenrouter_model_up", m) != 1 || metricValue(body, "tokenrouter_model_steps_total", m) <= 0 ||
				metricValue(body, "tokenrouter_model_tokens_committed_total", m) <= 0 {
				return false
			}
		}
		return true
	})
	// So does the console's dashboard, with the thresholds the children
	// were given.
	for _, m := range []string{"slm", "llm"} {
		dash.waitSeen(t, m, "working", working)
		if !dash.seen(m, func(m console.ModelFrame) bool { return m.B != nil && m.MaxWaitMS > 0 }) {
			t.Errorf("the console does not show %s's thresholds", m)
		}
	}

	// Load: streaming and non-streaming requests far longer than the test.
	const streams, plain = 6, 2
	var started, wg sync.WaitGroup
	started.Add(streams)
	results := make([]chatResult, streams+plain)
	errs := make([]error, streams+plain)
	ended := make([]time.Time, streams+plain)
	for i := range streams + plain {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			results[i], errs[i] = f.chat(ctx, i < streams, 20000, func() { once.Do(started.Done) })
			ended[i] = time.Now()
		}()
	}
	started.Wait()
	// The plain requests are in flight too.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return sampleValue(f.get(t, "/metrics"), "tokenrouter_active_requests", `preset="r2r-random"`) == streams+plain
	}, "the front end never had all %d requests in flight", streams+plain)
	before, _ := f.log.pids()
	victim := before["llm"]
	if !alive(victim) || !alive(before["slm"]) {
		t.Fatalf("children %v not running\nlog:\n%s", before, f.log)
	}
	killed := time.Now()
	if err := kill(victim); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	const bound = 5 * time.Second // 3 missed 500 ms heartbeats, or the restart, whichever first
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if took := ended[i].Sub(killed); took > bound {
			t.Errorf("request %d ended %v after the kill (bound %v)", i, took, bound)
		}
		if i < streams {
			if r.status != http.StatusOK || !strings.HasPrefix(r.errEvent, "service_unavailable: ") || !strings.Contains(r.errEvent, "llm") || !r.done {
				t.Errorf("stream %d: want an error event naming llm and [DONE], got %+v", i, r)
			}
		} else if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "service_unavailable") || !strings.Contains(r.body, "llm") {
			t.Errorf("request %d: want 503 naming llm, got %d %s", i, r.status, r.body)
		}
	}
	t.Logf("in-flight requests ended %v after SIGKILL", ended[0].Sub(killed).Round(time.Millisecond))

	// The restarted child rejoins and serves.
	waitFor(t, 15*time.Second, "a restarted llm child to serve", func() bool {
		res, err := f.chat(ctx, false, 32, nil)
		return err == nil && res.status == http.StatusOK && res.byModel["llm"] > 0
	})
	after, all := f.log.pids()
	if after["llm"] == victim || !alive(after["llm"]) || after["slm"] != before["slm"] {
		t.Fatalf("children before %v, after %v", before, after)
	}
	res, err = f.chat(ctx, true, 64, nil)
	bothModels(t, "streaming after restart", res, err)
	dash.waitSeen(t, "llm", "back up after a restart", func(m console.ModelFrame) bool { return m.Up && m.Restarts > 0 })

	// Shutdown stops every child.
	f.shutdown(t)
	for _, pid := range all {
		if alive(pid) {
			t.Errorf("child %d still running after shutdown", pid)
		}
	}
}

// TestServeJoinsNATS runs the front end against sub-servers started by
// hand (tokenrouter subserver) on a NATS server of the test's own, as on
// two machines, with the NATS credentials and the message key in the
// environment. A sub-server without the key cannot start.
func TestServeJoinsNATS(t *testing.T) {
	ns, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	auth := ns.ClientAuth()
	key := busnats.NewSecret()
	env := append(os.Environ(), envNATSUser+"="+auth.User, envNATSPassword+"="+auth.Password)
	out, err := exec.Command(bin.path, "subserver", "--nats", ns.URL(), "--models", "slm,llm", "--engine", "sim").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "message key") {
		t.Fatalf("a sub-server without the message key: %v\n%s", err, out)
	}
	logs := &logBuffer{}
	var children []*exec.Cmd
	defer func() {
		for _, c := range children {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for i, profile := range []string{"paper-r2r/slm", "paper-r2r/llm"} {
		c := exec.Command(bin.path, "subserver", "--nats", ns.URL(), "--index", strconv.Itoa(i), "--models", "slm,llm",
			"--engine", "sim", "--profile", profile, "--algorithm", "r2r-random", "--param", "p=0.35", "--log-level", "warn")
		c.Stdout, c.Stderr, c.Env = logs, logs, append(env, envBusKey+"="+key)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, c)
	}
	f := startFront(t, clusterDeploy{nats: ns.URL(), prefix: busnats.DefaultPrefix, secrets: cluster.Secrets{Auth: auth, Key: []byte(key)}})
	defer f.shutdown(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dash := watchConsole(t, f)
	res, err := f.chat(ctx, true, 64, nil)
	bothModels(t, "streaming over joined sub-servers", res, err)
	for _, m := range []string{"slm", "llm"} {
		dash.waitSeen(t, m, "working", working)
		if dash.seen(m, func(m console.ModelFrame) bool { return m.B != nil }) {
			t.Errorf("the console claims to know the thresholds of %s, which owns them", m)
		}
	}
	// A sub-server that stops (nobody restarts it here) shows as down.
	if err := children[1].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	dash.waitSeen(t, "llm", "down", func(m console.ModelFrame) bool { return !m.Up })
	if !dash.seen("slm", func(m console.ModelFrame) bool { return m.Up }) {
		t.Fatal("slm not up")
	}
	if logs.String() != "" {
		t.Logf("sub-servers:\n%s", logs)
	}
}

// TestServeProcessesSIGTERM runs the binary's serve --processes, answers a
// request and sends SIGTERM: the command exits cleanly and no child
// outlives it.
func TestServeProcessesSIGTERM(t *testing.T) {
	logs := &logBuffer{}
	// Explicit thresholds: the default "auto" plans a table for 4 s first.
	cmd := exec.Command(bin.path, "serve", "--engine", "sim", "--processes", "--port", "0", "--shutdown-timeout", "5s", "--thresholds", "1,3")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waited := false
	defer func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs)
		}
		if !waited {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	urlRE := regexp.MustCompile(`msg=serving url=(http://127\.0\.0\.1:\d+)`)
	var url string
	waitFor(t, 20*time.Second, "serve to listen", func() bool {
		if m := urlRE.FindStringSubmatch(logs.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	f := &front{url: url, client: &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}}
	defer f.client.CloseIdleConnections()
	res, err := f.chat(context.Background(), true, 32, nil)
	if err != nil || !res.done || res.errEvent != "" {
		t.Fatalf("%+v, %v", res, err)
	}
	pids, all := logs.pids()
	if len(pids) != 2 || !alive(pids["slm"]) || !alive(pids["llm"]) {
		t.Fatalf("children %v", pids)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = testkit.Receive(t, exited, 15*time.Second) // serve exits
	waited = true
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	// The children are the serve process's own: it waited for them, so
	// they are gone (not zombies) once it has exited.
	for _, pid := range all {
		if alive(pid) {
			t.Errorf("child %d still running after serve exited", pid)
		}
	}
}

// get returns the body of a GET of path on the front end.
func (f *front) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := f.client.Get(f.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// metricValue returns the value of the Prometheus sample name{...model="model"...}
// in a text exposition, or -1 when there is none.
func metricValue(body, name, model string) float64 {
	return sampleValue(body, name, `model="`+model+`"`)
}

// sampleValue returns the value of the first Prometheus sample name{...label...}
// in a text exposition, or -1 when there is none.
func sampleValue(body, name, label string) float64 {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok || !strings.Contains(rest, label) {
			continue
		}
		_, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return -1
		}
		return v
	}
	return -1
}

// TestSubserverRefusesNegativeMaxWait: a negative --max-wait is refused
// before the sub-server opens its model or joins the bus.
func TestSubserverRefusesNegativeMaxWait(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetArgs([]string{"subserver", "--nats", "nats://127.0.0.1:1", "--index", "0", "--models", "slm,llm", "--engine", "sim",
		"--profile", "paper-r2r/slm", "--thresholds", "1", "--max-wait", "-1s"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--max-wait -1s is negative") {
		t.Fatalf("got %v, want the negative --max-wait refused", err)
	}
}

// TestServeProcessesReplicas: serve --processes with two replicas of the
// small model runs a child per replica, answers with tokens from both
// models, and /metrics reports the small model with both replicas up and
// its entries placed, its counters merged from both children.
func TestServeProcessesReplicas(t *testing.T) {
	f := startFrontWith(t, clusterDeploy{processes: true}, func(c *config.Config) { c.Models[0].Replicas = 2 })
	defer f.shutdown(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 4 {
		res, err := f.chat(ctx, false, 48, nil)
		bothModels(t, "with replicas", res, err)
	}
	waitFor(t, 5*time.Second, "/metrics to report the replicas", func() bool {
		body := f.get(t, "/metrics")
		return metricValue(body, "tokenrouter_model_replicas_up", "slm") == 2 && metricValue(body, "tokenrouter_model_replicas_up", "llm") == 1 &&
			metricValue(body, "tokenrouter_model_steps_total", "slm") > 0 && metricValue(body, "tokenrouter_model_up", "slm") == 1 &&
			sampleValue(body, "tokenrouter_model_placements_total", `model="slm",outcome="placed"`) >= 4
	})
}
