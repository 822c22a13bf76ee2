package bench

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/server"
)

// serve starts a TokenRouter server over models under r2r-random (p 0.3,
// thresholds 1,2, max-wait 5 ms) on a free loopback port and returns its
// URL.
func serve(t *testing.T, models []config.Model) string {
	t.Helper()
	cfg := config.Default()
	cfg.Models = models
	cfg.Presets = []config.Preset{{Name: "r2r", Algorithm: "r2r-random", Models: []string{models[0].Name, models[1].Name},
		Params: map[string]string{"p": "0.3"}, Thresholds: "1,2", MaxWait: 5 * time.Millisecond, Placement: config.Partitioned}}
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
	return "http://" + testkit.Serve(t, func(ctx context.Context, ln net.Listener) error { return srv.Serve(ctx, ln) })
}

func simPair() []config.Model {
	return []config.Model{
		{Name: "slm", Engine: loader.KindSim, Seed: 1, Latency: &config.Latency{Base: 2 * time.Millisecond}},
		{Name: "llm", Engine: loader.KindSim, Seed: 2, Latency: &config.Latency{Base: 8 * time.Millisecond}},
	}
}

// TestURLMatchesInProcess measures the same deployment in process and
// behind `tokenrouter serve`'s HTTP API, side by side in interleaved rounds:
// the closed loop over HTTP measures throughput, latency samples and the
// server's account of the large model's share (how close the two
// throughputs are is a measurement, not a check here: docs/results/served-throughput.md has it).
func TestURLMatchesInProcess(t *testing.T) {
	url := serve(t, simPair())
	setup := Setup{Models: simPair(), Algorithm: "r2r-random", Params: map[string]string{"p": "0.3"}, Registry: builtin.Registry(),
		Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(2)}, MaxWait: 5 * time.Millisecond}}
	rows, err := Compare(context.Background(), setup, []string{"tokenrouter", "served=" + url}, []int{4},
		Options{MaxTokens: 24, Warmup: 100 * time.Millisecond, Duration: 1200 * time.Millisecond, Seed: 5}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, over := rows[0], rows[1]
	if over.System != "served="+url || len(over.TTFT) == 0 || len(over.TPOT) == 0 || over.Requests == 0 {
		t.Fatalf("over HTTP: %+v", over.Result)
	}
	if over.TokensPerSecond <= 0 || in.TokensPerSecond <= 0 {
		t.Fatalf("over HTTP %.1f tok/s, in process %.1f", over.TokensPerSecond, in.TokensPerSecond)
	}
	if over.RoutedFraction < 0.1 || over.RoutedFraction > 0.5 {
		t.Fatalf("the server's large-model share %.2f for p = 0.3", over.RoutedFraction)
	}
	t.Logf("N=4: in process %.1f tok/s, over HTTP %.1f tok/s; TTFT p50 %v / %v", in.TokensPerSecond, over.TokensPerSecond,
		in.TTFT.Quantile(0.5), over.TTFT.Quantile(0.5))
}

// TestURLRealText sends text prompts to a server over the real tiny pair:
// every request yields its full length (text held back and sent with a
// later token is counted from the final usage).
func TestURLRealText(t *testing.T) {
	url := serve(t, tinyPair(t))
	ctx := context.Background()
	h, err := NewHTTPSystem(ctx, url+"/v1", HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Model() != "r2r" {
		t.Fatalf("model %q", h.Model())
	}
	for i, p := range []Prompt{{Text: "Once upon a time"}, {IDs: []int32{1, 403, 407}}} {
		s, err := h.SubmitPrompt(ctx, p, route.Params{MaxTokens: 30, IgnoreEOS: true, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Wait(ctx)
		if err != nil || len(res.Tokens) != 30 || res.Reason != "length" {
			t.Fatalf("prompt %d: %d tokens, reason %q, %v", i, len(res.Tokens), res.Reason, err)
		}
	}
	if f, ok := h.LargeShare(); !ok || f < 0 || f > 1 {
		t.Fatalf("large share %v %v", f, ok)
	}
	s, err := h.Submit(ctx, []int32{1, 2}, route.Params{MaxTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(ctx); err == nil || !strings.Contains(err.Error(), "400 Bad Request") || !strings.Contains(err.Error(), "max_tokens") {
		t.Fatalf("an oversized request: %v", err)
	}
	if _, err := NewHTTPSystem(ctx, "http://127.0.0.1:1", HTTPOptions{}); err == nil || !strings.Contains(err.Error(), "listing models") {
		t.Fatalf("no server: %v", err)
	}
}

// procsWriter records GOMAXPROCS each time progress is reported.
type procsWriter struct {
	mu    sync.Mutex
	procs []int
}

func (w *procsWriter) tick(Tick) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs = append(w.procs, runtime.GOMAXPROCS(0))
}

// TestClientProcs checks that Compare runs a server's slices on
// Options.ClientProcs processors and the in-process system's on all of
// them, restoring the setting after each slice.
func TestClientProcs(t *testing.T) {
	all := runtime.GOMAXPROCS(0)
	if all < 2 {
		t.Skip("GOMAXPROCS is 1: nothing to lower")
	}
	url := serve(t, simPair())
	setup := Setup{Models: simPair(), Algorithm: "r2r-random", Params: map[string]string{"p": "0.3"}, Registry: builtin.Registry(),
		Launch: sched.Launch{Tables: []sched.Table{sched.Static(1), sched.Static(2)}, MaxWait: 5 * time.Millisecond}}
	var inProc, served procsWriter
	o := Options{MaxTokens: 16, Warmup: 100 * time.Millisecond, Duration: 1300 * time.Millisecond, Seed: 3, ClientProcs: 1}
	for _, c := range []struct {
		system string
		w      *procsWriter
	}{{"tokenrouter", &inProc}, {"served=" + url, &served}} {
		o.Progress = c.w.tick
		if _, err := Compare(context.Background(), setup, []string{c.system}, []int{2}, o, 1, nil); err != nil {
			t.Fatal(err)
		}
		if got := runtime.GOMAXPROCS(0); got != all {
			t.Fatalf("after %s: GOMAXPROCS %d, want %d restored", c.system, got, all)
		}
	}
	if len(inProc.procs) == 0 || len(served.procs) == 0 {
		t.Fatalf("no progress: in process %v, served %v", inProc.procs, served.procs)
	}
	for _, p := range inProc.procs {
		if p != all {
			t.Fatalf("in process: GOMAXPROCS %v during the slice, want %d", inProc.procs, all)
		}
	}
	for _, p := range served.procs {
		if p != 1 {
			t.Fatalf("served: GOMAXPROCS %v during the slice, want 1", served.procs)
		}
	}
}
