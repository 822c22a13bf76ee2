package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/console"
)

// consoleWatch reads a front end's console events stream (five frames a
// second) until the test ends or the server drains.
type consoleWatch struct {
	mu     sync.Mutex
	frames []console.Frame
}

func watchConsole(t *testing.T, f *front) *consoleWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/console/events?interval=200ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("console events: %v %v", resp, err)
	}
	w := &consoleWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var fr console.Frame
			if !ok || json.Unmarshal([]byte(data), &fr) != nil {
				continue
			}
			w.mu.Lock()
			w.frames = append(w.frames, fr)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// seen reports whether a frame received so far satisfies ok for the model
// of the first preset.
func (w *consoleWatch) seen(model string, ok func(console.ModelFrame) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fr := range w.frames {
		for _, m := range fr.Presets[0].Models {
			if m.Name == model && ok(m) {
				return true
			}
		}
	}
	return false
}

// waitSeen waits until a frame satisfies ok for model.
func (w *consoleWatch) waitSeen(t *testing.T, model, what string, ok func(console.ModelFrame) bool) {
	t.Helper()
	waitFor(t, 10*time.Second, "the console to show "+model+" "+what, func() bool { return w.seen(model, ok) })
}

// working: the model is up and stepped requests at some point.
func working(m console.ModelFrame) bool { return m.Up && m.StepsS > 0 && m.TokS > 0 && m.Batch >= 1 }
