package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdp "github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/server"
)

// ShotsEnv names the folder the browser tests write their screenshots to
// (default: a temporary folder of the test).
const ShotsEnv = "TOKENROUTER_CONSOLE_SHOTS"

// xss is typed into the playground; it must come back as text.
const xss = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>&lt;b&gt;`

// browser starts a headless Chromium for the test, or skips the test when
// none is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no Chromium installed (Debian: apt-get install chromium; .ci/run installs it): the console's browser tests need one")
	}
	// A headless Chromium now and then exits before it listens (seen once
	// in CI under load, with nothing in its output but crash-reporter
	// noise); that says nothing about the console, so a start is tried up
	// to three times, each failure logged.
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		actx, cancelA := cdp.NewExecAllocator(context.Background(),
			cdp.ExecPath(path), cdp.Headless, cdp.NoSandbox, cdp.DisableGPU, cdp.NoFirstRun,
			cdp.Flag("disable-quic", true), cdp.Flag("disable-background-networking", true),
			cdp.Flag("disable-component-update", true), cdp.Flag("disable-sync", true),
			cdp.UserDataDir(t.TempDir()), cdp.WindowSize(1280, 900))
		ctx, cancel := cdp.NewContext(actx)
		if err = cdp.Do(ctx); err == nil {
			t.Cleanup(func() { cancel(); cancelA() })
			return ctx
		}
		cancel()
		cancelA()
		t.Logf("starting %s, attempt %d: %v", path, attempt, err)
	}
	t.Fatalf("starting %s: %v", path, err)
	return nil
}

// tab opens a new tab of the browser bounded by timeout.
func tab(t *testing.T, b context.Context, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := cdp.NewContext(b)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancel() })
	return ctx
}

// serve runs a server with cfg on a loopback port until the test ends and
// returns its URL.
func serve(t *testing.T, cfg config.Config) string {
	t.Helper()
	cfg.Port, cfg.ShutdownTimeout = 0, 5*time.Second
	cfg.FillDefaults()
	s, err := server.New(context.Background(), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return "http://" + testkit.Serve(t, func(ctx context.Context, ln net.Listener) error { return s.Serve(ctx, ln) })
}

// shots returns the screenshot folder.
func shots(t *testing.T) string {
	dir := os.Getenv(ShotsEnv)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shoot writes a full-page screenshot at the given width.
func shoot(t *testing.T, ctx context.Context, dir, name string, width int64) {
	t.Helper()
	view := cdp.EmulateViewport(width, 900)
	if width < 600 {
		view = cdp.EmulateViewport(width, 900, cdp.EmulateMobile, cdp.EmulatePortrait)
	}
	if err := cdp.Do(ctx, view, cdp.Sleep(150*time.Millisecond)); err != nil { // one layout pass
		t.Fatalf("screenshot %s: %v", name, err)
	}
	png, err := cdp.Run(ctx, cdp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

// answer is what a pane shows after a run.
type answer struct {
	State   string            `json:"state"`
	Spans   map[string]int    `json:"spans"`   // token spans by model name
	Colours map[string]string `json:"colours"` // background colour by model name
	Summary map[string]int    `json:"summary"` // tokens by model in the summary (the API's routing)
	Error   string            `json:"error"`
}

const paneJS = `(() => {
  const pane = document.querySelector('[data-pane=%q]');
  const names = [...pane.querySelectorAll('.summary dd[data-model]')].map(d => d.dataset.model);
  const a = {state: pane.dataset.state || '', spans: {}, colours: {}, summary: {}, error: pane.querySelector('.err').textContent};
  for (const d of pane.querySelectorAll('.summary dd[data-model]')) a.summary[d.dataset.model] = Number(d.textContent);
  pane.querySelectorAll('.out .tok[data-m]').forEach(s => {
    const n = names[Number(s.dataset.m)] || ('model ' + s.dataset.m);
    a.spans[n] = (a.spans[n] || 0) + 1;
    a.colours[n] = getComputedStyle(s).backgroundColor;
  });
  return a;
})()`

// waitPane waits until pane p finished and returns its answer.
func waitPane(t *testing.T, ctx context.Context, p string) answer {
	t.Helper()
	var a answer
	testkit.Until(t, 30*time.Second, func() error {
		var err error
		if a, err = cdp.Run(ctx, cdp.Evaluate[answer](fmt.Sprintf(paneJS, p))); err != nil {
			return err
		}
		if a.State == "running" || a.State == "" {
			return fmt.Errorf("pane %s still %q", p, a.State)
		}
		return nil
	})
	if a.State != "done" {
		t.Fatalf("pane %s ended %q: %s", p, a.State, a.Error)
	}
	return a
}

// checkColoured: every model wrote tokens, each model's tokens have their
// own colour, and the spans per model equal the API's routing counts.
func checkColoured(t *testing.T, a answer, models ...string) {
	t.Helper()
	seen := map[string]string{}
	for _, m := range models {
		if a.Spans[m] == 0 || a.Spans[m] != a.Summary[m] {
			t.Fatalf("model %s: %d token spans, routing.tokens_by_model says %d (answer %+v)", m, a.Spans[m], a.Summary[m], a)
		}
		c := a.Colours[m]
		if other, dup := seen[c]; dup || c == "" || c == "rgba(0, 0, 0, 0)" {
			t.Fatalf("model %s has colour %q (same as %s)", m, c, other)
		}
		seen[c] = m
	}
}

// fill types text into the pane's (empty) message and sets the token
// limit and the seed.
func fill(p, text string, maxTokens, seed int) cdp.Action[cdp.Void] {
	sel := func(s string) cdp.CSS { return cdp.CSS(fmt.Sprintf("[data-pane=%q] %s", p, s)) }
	return cdp.Steps(
		cdp.SendKeys(sel("textarea[name=text]"), text),
		cdp.SetValue(sel("input[name=max_new_tokens]"), fmt.Sprint(maxTokens)),
		cdp.SetValue(sel("input[name=seed]"), fmt.Sprint(seed)),
	)
}

// load runs n clients that each send /generate requests to preset back to
// back until ctx ends.
func load(ctx context.Context, url, preset string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	body, _ := json.Marshal(map[string]any{"model": preset, "text": "load", "sampling_params": map[string]any{"max_new_tokens": 32}})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/generate", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	return &wg
}

// chart reads a dashboard chart: its largest value and its line.
type chart struct {
	Max    float64 `json:"max"`
	Points string  `json:"points"`
}

const chartJS = `(() => {
  const f = document.querySelector('[data-preset=%q] [data-model=%q] [data-metric=%q]');
  if (!f) return {max: -1, points: ''};
  return {max: Number(f.dataset.max || -1), points: f.querySelector('polyline').getAttribute('points') || ''};
})()`

func readChart(t *testing.T, ctx context.Context, preset, model, metric string) chart {
	t.Helper()
	c, err := cdp.Run(ctx, cdp.Evaluate[chart](fmt.Sprintf(chartJS, preset, model, metric)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// text reads an element's text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := cdp.Run(ctx, cdp.Text(cdp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := cdp.Run(ctx, cdp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// do runs steps or fails the test.
func do(t *testing.T, ctx context.Context, steps ...cdp.Action[cdp.Void]) {
	t.Helper()
	if err := cdp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleSim drives the console against the default configuration
// (two simulated models under r2r-random, automatic thresholds) plus a
// second preset with fixed thresholds: a streamed answer coloured by model
// with the API's counts, two answers side by side, the XSS strings as
// text, keyboard navigation, and the dashboard's charts under load.
func TestConsoleSim(t *testing.T) {
	b := browser(t)
	cfg := config.Default()
	cfg.Presets = append(cfg.Presets, config.Preset{Name: "r2r-b3", Algorithm: "r2r-random", Models: cfg.Presets[0].Models,
		Params: map[string]string{"p": "0.5"}, Thresholds: "1,3"})
	url := serve(t, cfg)
	ctx := tab(t, b, 90*time.Second)
	dir := shots(t)
	do(t, ctx,
		cdp.EmulateViewport(1280, 900),
		cdp.Navigate(url+"/"),
		cdp.WaitReady(cdp.CSS(`[data-pane=A] select[name=preset] option`)),
		fill("A", xss, 48, 5),
		cdp.SendKeys(cdp.CSS(`[data-pane=A] input[name=system]`), "</p><b>bold?</b>"),
		cdp.Click(cdp.CSS(`[data-pane=A] button.run`)),
	)
	checkColoured(t, waitPane(t, ctx, "A"), "slm", "llm")
	// Keyboard: from the answer, the arrow keys move over the tokens and
	// the focused token's model and position are shown.
	do(t, ctx,
		cdp.Focus(cdp.CSS(`[data-pane=A] .out`)),
		cdp.KeyEvent(kb.ArrowRight), // ArrowRight: the first token
		cdp.KeyEvent(kb.ArrowRight), // the second
	)
	if info := text(t, ctx, `[data-pane=A] .tokinfo`); !strings.HasPrefix(info, "Token 2: ") || !(strings.Contains(info, "slm") || strings.Contains(info, "llm")) {
		t.Fatalf("focused token info %q", info)
	}
	transcript := text(t, ctx, `[data-pane=A] .transcript`)
	injected := eval[int](t, ctx, `document.querySelectorAll('img, script:not([src]), b').length + (window.__xss === undefined ? 0 : 100)`)
	if !strings.Contains(transcript, xss) || !strings.Contains(transcript, "</p><b>bold?</b>") || injected != 0 {
		t.Fatalf("XSS: transcript %q, %d injected elements (100: a script ran)", transcript, injected)
	}
	// Two answers side by side, from the two presets; "Generate both" by
	// keyboard.
	do(t, ctx,
		cdp.Click(cdp.CSS(`#compare`)),
		cdp.WaitVisible(cdp.CSS(`[data-pane=B] select[name=preset]`)),
		cdp.SetValue(cdp.CSS(`[data-pane=B] select[name=preset]`), "r2r-b3"),
		fill("B", "Two answers", 40, 9),
		cdp.Focus(cdp.CSS(`#runboth`)),
		cdp.KeyEvent("\r"),
	)
	checkColoured(t, waitPane(t, ctx, "A"), "slm", "llm")
	checkColoured(t, waitPane(t, ctx, "B"), "slm", "llm")
	shoot(t, ctx, dir, "playground-desktop", 1280)
	shoot(t, ctx, dir, "playground-phone", 390)

	// The dashboard, by keyboard from the tabs: its queue and batch charts
	// move under load.
	do(t, ctx, cdp.EmulateViewport(1280, 900),
		cdp.Focus(cdp.CSS(`#tab-play`)), cdp.KeyEvent(kb.ArrowRight), // ArrowRight: the dashboard tab
		cdp.WaitVisible(cdp.CSS(`[data-preset="r2r-b3"] [data-model=llm] [data-metric=batch]`)))
	idle := readChart(t, ctx, "r2r-b3", "llm", "batch")
	lctx, stop := context.WithCancel(context.Background())
	wg := load(lctx, url, "r2r-b3", 24)
	testkit.Until(t, 30*time.Second, func() error {
		q := readChart(t, ctx, "r2r-b3", "llm", "runnable")
		bt := readChart(t, ctx, "r2r-b3", "llm", "batch")
		if q.Max < 1 || bt.Max < 2 || bt.Points == idle.Points {
			return fmt.Errorf("under load: queue %+v, batch %+v", q, bt)
		}
		return nil
	})
	// A few seconds of load on the charts for the screenshots.
	testkit.Eventually(t, 30*time.Second, func() bool {
		return strings.Count(readChart(t, ctx, "r2r-b3", "llm", "batch").Points, " ") >= strings.Count(idle.Points, " ")+4
	}, "the batch chart did not go on")
	shoot(t, ctx, dir, "dashboard-desktop", 1280)
	shoot(t, ctx, dir, "dashboard-phone", 390)
	stop()
	wg.Wait()
}

// TestConsoleTinyPair: the real tiny pair (TinyStories 260K and a larger
// llama2.c model on the CPU engine) writes a prompt's continuation with
// both models' tokens coloured and counted as the API counts them.
func TestConsoleTinyPair(t *testing.T) {
	b := browser(t)
	dir := testmodels.Dir(t)
	tok := filepath.Join(dir, "tok512.bin")
	cfg := config.Default()
	cfg.Models = []config.Model{
		{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.bin"), Tokenizer: tok},
		{Name: "llama2xs", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: tok},
	}
	cfg.Presets = []config.Preset{{Name: "tiny-r2r", Algorithm: "r2r-random", Models: []string{"stories", "llama2xs"},
		Params: map[string]string{"p": "0.4"}, Thresholds: "1"}}
	url := serve(t, cfg)
	ctx := tab(t, b, 60*time.Second)
	do(t, ctx,
		cdp.EmulateViewport(1280, 900),
		cdp.Navigate(url+"/"),
		cdp.WaitReady(cdp.CSS(`[data-pane=A] select[name=preset] option`)),
		cdp.Click(cdp.CSS(`[data-pane=A] input[value=prompt]`)),
		cdp.Click(cdp.CSS(`[data-pane=A] details.params summary`)),
		cdp.Click(cdp.CSS(`[data-pane=A] input[name=logprobs]`)),
		fill("A", "Once upon a time", 60, 3),
		cdp.Click(cdp.CSS(`[data-pane=A] button.run`)),
	)
	a := waitPane(t, ctx, "A")
	checkColoured(t, a, "stories", "llama2xs")
	// Each token carries the log-probability the server reported; a
	// focused token shows it.
	do(t, ctx, cdp.Focus(cdp.CSS(`[data-pane=A] .out`)), cdp.KeyEvent(kb.ArrowRight))
	if info := text(t, ctx, `[data-pane=A] .tokinfo`); !strings.Contains(info, ", log-probability -") && !strings.Contains(info, ", log-probability 0.000") {
		t.Fatalf("focused token info %q: no log-probability", info)
	}
	if n := eval[int](t, ctx, `[...document.querySelectorAll('[data-pane=A] .tok[data-m]')].filter(s => !(Number(s.dataset.lp) <= 0)).length`); n != 0 {
		t.Fatalf("%d tokens without a log-probability at most 0", n)
	}
	out := text(t, ctx, `[data-pane=A] .out`)
	if len(strings.Fields(out)) < 5 {
		t.Fatalf("the real models wrote %q", out)
	}
	t.Logf("tiny pair: %q, %v", out, a.Summary)
	shoot(t, ctx, shots(t), "playground-tiny-desktop", 1280)
}

// TestConsoleAPIKey: with an API key the console asks for it, refuses a
// wrong one, and with the right one lists the presets, generates and
// streams the dashboard.
func TestConsoleAPIKey(t *testing.T) {
	b := browser(t)
	cfg := config.Default()
	cfg.APIKey = "sk-console-test"
	url := serve(t, cfg)
	ctx := tab(t, b, 60*time.Second)
	do(t, ctx,
		cdp.Navigate(url+"/"),
		cdp.WaitVisible(cdp.CSS(`#keyform`)),
		cdp.SendKeys(cdp.CSS(`#key`), "wrong\r"),
		cdp.WaitVisible(cdp.CSS(`#keyerr`)),
	)
	if _, err := cdp.Run(ctx, cdp.Poll[bool](`document.getElementById('keyerr').textContent.length > 0`)); err != nil {
		t.Fatal(err)
	}
	if refused := text(t, ctx, `#keyerr`); !strings.Contains(refused, "refused") {
		t.Fatalf("wrong key: %q", refused)
	}
	do(t, ctx,
		cdp.SendKeys(cdp.CSS(`#key`), cfg.APIKey+"\r"),
		cdp.WaitNotVisible(cdp.CSS(`#keyform`)),
		cdp.WaitReady(cdp.CSS(`[data-pane=A] select[name=preset] option`)),
		cdp.Click(cdp.CSS(`#tab-dash`)),
		cdp.WaitVisible(cdp.CSS(`[data-preset="r2r-random"] [data-model=llm] .health`)),
		cdp.Click(cdp.CSS(`#tab-play`)),
		fill("A", "With a key", 48, 1),
		cdp.Click(cdp.CSS(`[data-pane=A] button.run`)),
	)
	checkColoured(t, waitPane(t, ctx, "A"), "slm", "llm")
}
