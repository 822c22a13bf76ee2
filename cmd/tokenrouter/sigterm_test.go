package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

// sigtermStreamsEnv sets the number of streams TestServeSIGTERMStreams
// opens (default 100; the acceptance run uses 500):
//
//	TOKENROUTER_SIGTERM_STREAMS=500 go test ./cmd/tokenrouter -run TestServeSIGTERMStreams -v
const sigtermStreamsEnv = "TOKENROUTER_SIGTERM_STREAMS"

// streamEnd is how one stream ended, seen by its client.
type streamEnd struct {
	finished bool   // a chunk carried a finish_reason
	errCode  string // the code of an error event
	done     bool   // data: [DONE] arrived
	err      error  // the connection failed
}

// readStream reads an SSE chat stream to its end; started is closed by the
// caller's first chunk.
func readStream(resp *http.Response, started func()) streamEnd {
	defer resp.Body.Close()
	var end streamEnd
	sc := bufio.NewScanner(resp.Body)
	first := true
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if first {
			first = false
			started()
		}
		switch {
		case data == "[DONE]":
			end.done = true
		case strings.Contains(data, `"error"`):
			if m := regexp.MustCompile(`"code":"([^"]*)"`).FindStringSubmatch(data); m != nil {
				end.errCode = m[1]
			} else {
				end.errCode = "?"
			}
		case strings.Contains(data, `"finish_reason":"`):
			end.finished = true
		}
	}
	end.err = sc.Err()
	return end
}

// TestServeSIGTERMStreams: SIGTERM while hundreds of streams run; within
// the shutdown timeout some finish, the rest are told: every client sees
// its stream end with a finish reason or a server_shutdown error event,
// then [DONE]. Nothing ends silently, and serve exits 0.
func TestServeSIGTERMStreams(t *testing.T) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv(sigtermStreamsEnv)); err == nil && v > 0 {
		n = v
	}
	logs := &logBuffer{}
	cmd := exec.Command(bin.path, "serve", "--engine", "sim", "--port", "0", "--shutdown-timeout", "2s", "--thresholds", "1,3",
		"--max-in-flight", strconv.Itoa(2*n))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("serve's log:\n%.20000s", logs)
		}
		_ = cmd.Process.Kill()
	}()
	urlRE := regexp.MustCompile(`msg=serving url=(http://127\.0\.0\.1:\d+)`)
	var url string
	waitFor(t, 20*time.Second, "serve to listen", func() bool {
		if m := urlRE.FindStringSubmatch(logs.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	ends := make([]streamEnd, n)
	var started, wg sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			mark := func() { once.Do(started.Done) }
			defer mark()
			maxTokens := 4000
			if i%4 == 0 {
				maxTokens = 300 // some finish during the drain
			}
			body := `{"stream":true,"max_tokens":` + strconv.Itoa(maxTokens) + `,"messages":[{"role":"user","content":"Tell me a long story"}]}`
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				ends[i].err = err
				return
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				ends[i].err = &statusError{resp.StatusCode}
				return
			}
			ends[i] = readStream(resp, mark)
		}()
	}
	started.Wait()
	peak := testkit.PeakRSS(cmd.Process.Pid)
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := testkit.Receive(t, exited, 20*time.Second); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	finished, told := 0, 0
	for i, e := range ends {
		switch {
		case e.err != nil || !e.done:
			t.Errorf("stream %d ended silently: %+v", i, e)
		case e.errCode == "server_shutdown":
			told++
		case e.finished && e.errCode == "":
			finished++
		default:
			t.Errorf("stream %d: %+v", i, e)
		}
	}
	t.Logf("%d streams: %d finished, %d told server_shutdown; serve exited %v after SIGTERM; its peak RSS before it %d MiB",
		n, finished, told, time.Since(t0).Round(time.Millisecond), peak>>20)
	if told == 0 {
		t.Errorf("no stream was cut at the shutdown timeout: the test did not test the cut")
	}
}

// statusError is a response status other than 200.
type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }
