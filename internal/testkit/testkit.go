// Package testkit holds the helpers TokenRouter's tests share: polling for
// a condition with a deadline instead of sleeping, receiving from a channel
// with a deadline, and serving on a free loopback port with shutdown at the
// end of the test.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// Poll intervals: the first check is immediate, later ones back off from
// minPoll to maxPoll so a quick condition is seen quickly and a slow one
// does not keep a loaded machine busy.
const (
	minPoll = time.Millisecond
	maxPoll = 50 * time.Millisecond
)

// deadliner is implemented by *testing.T: the time the test binary's
// -timeout ends the run.
type deadliner interface {
	Deadline() (time.Time, bool)
}

// limit returns the end of the wait: now+timeout, brought forward to one
// second before the test binary's own deadline so a timeout fails the test
// with its message instead of a panic that shows every goroutine.
func limit(t testing.TB, timeout time.Duration) time.Time {
	end := time.Now().Add(timeout)
	if d, ok := t.(deadliner); ok {
		if td, ok := d.Deadline(); ok && td.Add(-time.Second).Before(end) {
			end = td.Add(-time.Second)
		}
	}
	return end
}

// Until calls check until it returns nil and fails the test with check's
// last error when timeout passes first. The error should say what was
// seen, so a failure explains itself.
func Until(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	if err := poll(limit(t, timeout), check); err != nil {
		t.Fatalf("not reached within %v: %v", timeout, err)
	}
}

// Eventually calls cond until it returns true and fails the test with the
// formatted message when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	errNo := errors.New("condition false")
	if err := poll(limit(t, timeout), func() error {
		if cond() {
			return nil
		}
		return errNo
	}); err != nil {
		t.Fatalf("not reached within %v: %s", timeout, fmt.Sprintf(format, args...))
	}
}

// poll calls check until it returns nil (then poll returns nil) or end
// passes (then poll returns check's last error).
func poll(end time.Time, check func() error) error {
	wait := minPoll
	for {
		err := check()
		if err == nil {
			return nil
		}
		left := time.Until(end)
		if left <= 0 {
			return err
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, maxPoll)
	}
}

// Receive returns the next value from ch, failing the test when none
// arrives within timeout or ch is closed.
func Receive[T any](t testing.TB, ch <-chan T, timeout time.Duration) T {
	t.Helper()
	timer := time.NewTimer(time.Until(limit(t, timeout)))
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed while waiting for a value")
		}
		return v // the zero value when closed
	case <-timer.C:
		t.Fatalf("nothing received within %v", timeout)
	}
	var zero T
	return zero
}

// Quiet fails the test when ch yields a value within d. It waits the whole
// of d, so use it only for what must not happen, with a short d.
func Quiet[T any](t testing.TB, ch <-chan T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed unexpectedly")
			return
		}
		t.Fatalf("unexpected value %v", v)
	case <-timer.C:
	}
}

// ShutdownTimeout bounds how long Serve waits at the end of a test for the
// server to return.
const ShutdownTimeout = 30 * time.Second

// Serve listens on a free port of 127.0.0.1 and runs serve(ctx, ln) in a
// goroutine. When the test ends, ctx is cancelled and Serve waits for serve
// to return: an error other than one caused by the cancellation, or a serve
// that does not return within ShutdownTimeout, fails the test. It returns
// the listener's address (host:port).
func Serve(t testing.TB, serve func(ctx context.Context, ln net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		timer := time.NewTimer(ShutdownTimeout)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve on %s: %v", ln.Addr(), err)
			}
		case <-timer.C:
			t.Errorf("serve on %s did not return within %v of the end of the test", ln.Addr(), ShutdownTimeout)
		}
		_ = ln.Close() // serve may have closed it already
	})
	return ln.Addr().String()
}

// ServeHTTP serves h over HTTP on a free port of 127.0.0.1 until the test
// ends (with read-header and idle timeouts, as every server here has) and
// returns its base URL ("http://127.0.0.1:port").
func ServeHTTP(t testing.TB, h http.Handler) string {
	t.Helper()
	return "http://" + Serve(t, func(ctx context.Context, ln net.Listener) error {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout/2)
		defer cancel()
		err := srv.Shutdown(sctx)
		<-served
		return err
	})
}
