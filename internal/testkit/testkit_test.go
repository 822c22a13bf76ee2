package testkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder stands in for a test so the helpers' failures can be checked:
// it records Fatal and Error messages (without stopping the goroutine) and
// the cleanup functions.
type recorder struct {
	testing.TB
	fatal, errs []string
	cleanups    []func()
	deadline    time.Time
}

func (r *recorder) Helper()                   {}
func (r *recorder) Fatal(a ...any)            { r.fatal = append(r.fatal, fmt.Sprint(a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.fatal = append(r.fatal, fmt.Sprintf(f, a...)) }
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }

// end runs the recorded cleanups, last first, as the testing package does.
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// withDeadline is a recorder whose test binary ends at a given time.
type withDeadline struct{ *recorder }

func (w withDeadline) Deadline() (time.Time, bool) { return w.deadline, true }

func TestEventuallyReturnsOnceTrue(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	Eventually(r, 5*time.Second, func() bool { calls++; return calls == 4 }, "never")
	if len(r.fatal) != 0 || calls != 4 {
		t.Fatalf("fatal %q after %d calls, want none after 4", r.fatal, calls)
	}
}

func TestEventuallyFailsWithMessage(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	Eventually(r, 30*time.Millisecond, func() bool { return false }, "queue holds %d", 7)
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", took)
	}
	if len(r.fatal) != 1 || !strings.Contains(r.fatal[0], "queue holds 7") {
		t.Fatalf("fatal %q, want one message naming the condition", r.fatal)
	}
}

func TestUntilReportsLastError(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	Until(r, 20*time.Millisecond, func() error { n++; return fmt.Errorf("attempt %d", n) })
	if len(r.fatal) != 1 || !strings.Contains(r.fatal[0], fmt.Sprintf("attempt %d", n)) || n < 2 {
		t.Fatalf("fatal %q after %d attempts, want the last attempt's error", r.fatal, n)
	}
	r = &recorder{TB: t}
	n = 0
	Until(r, 5*time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if len(r.fatal) != 0 || n != 3 {
		t.Fatalf("fatal %q after %d attempts", r.fatal, n)
	}
}

func TestWaitEndsBeforeTheTestBinaryDeadline(t *testing.T) {
	r := &recorder{TB: t, deadline: time.Now().Add(1100 * time.Millisecond)}
	start := time.Now()
	Eventually(withDeadline{r}, time.Hour, func() bool { return false }, "never")
	if took := time.Since(start); took > 5*time.Second || len(r.fatal) != 1 {
		t.Fatalf("waited %v with fatal %q; want a failure about 0.1s in, before the binary's deadline", took, r.fatal)
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 5
	r := &recorder{TB: t}
	if v := Receive(r, ch, time.Second); v != 5 || len(r.fatal) != 0 {
		t.Fatalf("got %d, fatal %q", v, r.fatal)
	}
	if Receive(r, ch, 10*time.Millisecond); len(r.fatal) != 1 || !strings.Contains(r.fatal[0], "nothing received") {
		t.Fatalf("empty channel: fatal %q", r.fatal)
	}
	close(ch)
	if Receive(r, ch, time.Second); len(r.fatal) != 2 || !strings.Contains(r.fatal[1], "closed") {
		t.Fatalf("closed channel: fatal %q", r.fatal)
	}
}

func TestQuiet(t *testing.T) {
	ch := make(chan string, 1)
	r := &recorder{TB: t}
	if Quiet(r, ch, 5*time.Millisecond); len(r.fatal) != 0 {
		t.Fatalf("silent channel: fatal %q", r.fatal)
	}
	ch <- "stray"
	if Quiet(r, ch, time.Second); len(r.fatal) != 1 || !strings.Contains(r.fatal[0], "stray") {
		t.Fatalf("value on the channel: fatal %q", r.fatal)
	}
}

func TestServeHTTPServesOnLoopbackUntilTheTestEnds(t *testing.T) {
	var base string
	t.Run("serve", func(t *testing.T) {
		base = ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello "+r.URL.Path)
		}))
		if !strings.HasPrefix(base, "http://127.0.0.1:") {
			t.Fatalf("base URL %s is not loopback", base)
		}
		c := &http.Client{Timeout: 10 * time.Second}
		defer c.CloseIdleConnections()
		resp, err := c.Get(base + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "hello /x" {
			t.Fatalf("body %q, err %v", b, err)
		}
	})
	// The subtest's cleanup shut the server down.
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after the test ended", base)
	}
}

func TestServeReportsAServerError(t *testing.T) {
	r := &recorder{TB: t}
	addr := Serve(r, func(ctx context.Context, ln net.Listener) error {
		<-ctx.Done()
		return errors.New("disk on fire")
	})
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %s is not loopback", addr)
	}
	r.end()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "disk on fire") {
		t.Fatalf("errors %q, want the server's error", r.errs)
	}
	r = &recorder{TB: t}
	Serve(r, func(ctx context.Context, ln net.Listener) error {
		<-ctx.Done()
		return fmt.Errorf("stopped: %w", ctx.Err())
	})
	if r.end(); len(r.errs) != 0 {
		t.Fatalf("a server stopped by the cancellation reported %q", r.errs)
	}
}
