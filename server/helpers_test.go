package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a server listening on a real loopback port, with its own client.
type env struct {
	t      *testing.T
	s      *Server
	url    string
	client *http.Client
	stop   context.CancelFunc
	served chan error
}

// start runs a server on 127.0.0.1:0 with the default configuration changed
// by edit. Cleanup shuts it down and closes it.
func start(t *testing.T, edit func(*config.Config)) *env {
	t.Helper()
	return startWith(t, edit, Options{})
}

// startWith is start with server options.
func startWith(t *testing.T, edit func(*config.Config), opts Options) *env {
	t.Helper()
	cfg := config.Default()
	cfg.Port = 0
	cfg.ShutdownTimeout = 5 * time.Second
	if edit != nil {
		edit(&cfg)
	}
	cfg.FillDefaults()
	s, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, s: s, url: "http://" + ln.Addr().String(), stop: cancel, served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	served := e.served
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		e.shutdown()
		e.client.CloseIdleConnections()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// shutdown ends Serve (gracefully) and waits for it; safe to call twice.
func (e *env) shutdown() {
	e.stop()
	if e.served == nil {
		return
	}
	served := e.served
	e.served = nil
	if err := testkit.Receive(e.t, served, 30*time.Second); err != nil {
		e.t.Errorf("Serve: %v", err)
	}
}

// do sends a request and returns status and body.
func (e *env) do(method, path string, body any, hdr ...string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// post sends JSON and decodes a 200 answer into out.
func (e *env) post(path string, body, out any) {
	e.t.Helper()
	code, b := e.do(http.MethodPost, path, body)
	if code != http.StatusOK {
		e.t.Fatalf("POST %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		e.t.Fatalf("POST %s: %v in %s", path, err, b)
	}
}

// event is one server-sent event with its arrival time.
type event struct {
	data string
	at   time.Time
}

// openStream posts a streaming request and returns the response.
func (e *env) openStream(ctx context.Context, path string, body any) *http.Response {
	e.t.Helper()
	j, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, bytes.NewReader(j))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("Content-Type %q", ct)
	}
	return resp
}

// readEvents reads "data:" lines until [DONE] or the end of the body.
func readEvents(r io.Reader, each func(event) bool) ([]event, error) {
	var evs []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return evs, errors.New("not an SSE data line: " + line)
		}
		ev := event{data: data, at: time.Now()}
		evs = append(evs, ev)
		if each != nil && !each(ev) {
			return evs, nil
		}
		if data == "[DONE]" {
			return evs, nil
		}
	}
	return evs, sc.Err()
}

// waitIdle waits until every deployment of s holds no request and no KV.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	testkit.Until(t, 10*time.Second, func() error {
		busy := ""
		for _, d := range s.deps {
			if n := d.r.Active(); n != 0 {
				busy += " active=" + itoa(n)
			}
			for i, sub := range d.r.SubServers() {
				st := sub.Stats()
				if st.Records != 0 || st.Runnable != 0 || st.Pending != 0 || st.KVSequences != 0 {
					busy += " " + d.models[i].name + ":" + itoa(st.Records) + "/" + itoa(st.Runnable) + "/" + itoa(st.Pending) + "/" + itoa(st.KVSequences)
				}
			}
		}
		if s.inFlight.Load() != 0 {
			busy += " in_flight=" + itoa(int(s.inFlight.Load()))
		}
		if busy != "" {
			return errors.New("not idle (records/runnable/pending/kv):" + busy)
		}
		return nil
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// with returns a copy of base with the key-value pairs kv set.
func with(base map[string]any, kv ...any) map[string]any {
	m := make(map[string]any, len(base)+len(kv)/2)
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}
