package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/gguf/synth"
	"github.com/tokenrouter/tokenrouter/internal/progress"
)

// terminalEnv is the process environment with CI and TERM replaced by an
// interactive terminal's, so that only the standard error's being a
// terminal decides whether bars are drawn.
func terminalEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "TERM=") {
			env = append(env, kv)
		}
	}
	return append(env, "TERM=xterm")
}

// TestProgressQuietOffTerminal runs gen-model and quantize with their
// standard error a pipe (outside CI, TERM an interactive terminal's): it
// stays empty, and the summary goes to the standard output; a failing run
// writes its error alone.
func TestProgressQuietOffTerminal(t *testing.T) {
	dir := t.TempDir()
	f32, q := filepath.Join(dir, "f32.gguf"), filepath.Join(dir, "q.gguf")
	for _, args := range [][]string{
		{"gen-model", "--shape", "tiny-llama", "--type", "F32", "--out", f32},
		{"quantize", f32, q, "--type", "Q4_K_M"},
	} {
		var stdout, stderr bytes.Buffer
		c := exec.Command(bin.path, args...)
		c.Env, c.Stdout, c.Stderr = terminalEnv(), &stdout, &stderr
		if err := c.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		if stderr.Len() != 0 || !strings.Contains(stdout.String(), " in ") {
			t.Fatalf("%v: stderr %q, stdout %q", args, stderr.String(), stdout.String())
		}
	}
	var stderr bytes.Buffer
	c := exec.Command(bin.path, "quantize", filepath.Join(dir, "missing.gguf"), q)
	c.Env, c.Stderr = terminalEnv(), &stderr
	if err := c.Run(); err == nil || !strings.HasPrefix(stderr.String(), "tokenrouter: ") || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("failing quantize: %v, stderr %q", err, stderr.String())
	}
}

// TestGGUFSize: the size the bars of gen-model and quantize count up to
// is the size of the file written.
func TestGGUFSize(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ shape, typ string }{{"tiny-llama", "F32"}, {"tiny-qwen2", "Q4_K_M"}, {"tiny-gemma3", "Q8_0"}} {
		s, err := synth.Lookup(c.shape)
		if err != nil {
			t.Fatal(err)
		}
		m, err := quantize.Lookup(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ggufSize(s.Header(m))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, c.shape+".gguf")
		if _, err := runCmd(t, "gen-model", "--shape", c.shape, "--type", c.typ, "--out", p); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil || st.Size() != want {
			t.Fatalf("%s %s: file of %v bytes (%v), ggufSize %d", c.shape, c.typ, st.Size(), err, want)
		}
		src, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		mix, _ := quantize.Lookup("Q5_K_M")
		want, err = ggufSize(quantize.Header(src, mix))
		src.Close()
		q := filepath.Join(dir, c.shape+"-q5.gguf")
		if _, qerr := runCmd(t, "quantize", p, q, "--type", "Q5_K_M", "--allow-requantize"); err != nil || qerr != nil {
			t.Fatal(err, qerr)
		}
		if st, err := os.Stat(q); err != nil || st.Size() != want {
			t.Fatalf("%s quantized: file of %v bytes (%v), ggufSize %d", c.shape, st.Size(), err, want)
		}
	}
}

// fakeTerminal is a stand-in terminal (progress.Terminal) that records what is
// drawn on it.
type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

// frames are the frames drawn on the terminal, each after its
// carriage-return-erase-line.
func (s *fakeTerminal) frames() []string { return strings.Split(s.String(), "\r\x1b[K")[1:] }

// fakeClock is a clock a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func noEnv(string) string { return "" }

// TestLoadBars: a bar per model read in, ended at its total; a file read
// in again for huge pages (its total doubled) gets a bar labelled so.
func TestLoadBars(t *testing.T) {
	var s fakeTerminal
	c := &fakeClock{t: time.Unix(1, 0)}
	l := newLoadBars(&s, progress.Options{Width: 4, Now: c.now, Getenv: noEnv})
	l.report("slm", 64<<20, 128<<20)
	c.t = c.t.Add(time.Second)
	l.report("slm", 128<<20, 128<<20)
	l.report("llm", 1<<20, 1<<20)
	l.report("slm", 192<<20, 256<<20)
	l.report("slm", 256<<20, 256<<20)
	want := []string{
		"loading slm [##--]  50%  64.0/128.0 MiB",
		"loading slm [####] 100%  128.0/128.0 MiB  128.0 MiB/s",
		"loading slm [####] 100%  128.0/128.0 MiB  128.0 MiB/s\n",
		"loading llm [####] 100%  1.0/1.0 MiB",
		"loading llm [####] 100%  1.0/1.0 MiB\n",
		"loading slm again, in huge pages [###-]  75%  192.0/256.0 MiB",
		"loading slm again, in huge pages [####] 100%  256.0/256.0 MiB",
		"loading slm again, in huge pages [####] 100%  256.0/256.0 MiB\n",
	}
	if got := s.frames(); !slices.Equal(got, want) {
		t.Fatalf("frames\n%q\nwant\n%q", got, want)
	}
}

// TestBenchBars: bench's bars, one per run of its seconds, with the
// slice's number among bench compare's once known; lines written go
// above the bar.
func TestBenchBars(t *testing.T) {
	var s fakeTerminal
	c := &fakeClock{t: time.Unix(1, 0)}
	b := newBenchBars(&s, progress.Options{Width: 4, Now: c.now, Getenv: noEnv})
	total := 4 * time.Second
	b.tick(bench.Tick{Label: "tokenrouter N=2", Elapsed: time.Second, Total: total, Warmup: true})
	fmt.Fprintln(b, "placement: partitioned")
	c.t = c.t.Add(time.Second)
	b.tick(bench.Tick{Label: "tokenrouter N=2", Elapsed: total, Total: total, Tokens: 300, Requests: 3, TokensPerSecond: 100})
	b.slice(1, 4, bench.Row{})
	b.tick(bench.Tick{Label: "lockstep N=2", Elapsed: 2 * time.Second, Total: total, TokensPerSecond: 50, Requests: 1})
	b.end()
	want := []string{
		"tokenrouter N=2 [#---]  25%  1s/4s  3s left  warm-up",
		"placement: partitioned\n",
		"tokenrouter N=2 [#---]  25%  1s/4s  3s left  warm-up",
		"tokenrouter N=2 [####] 100%  4s/4s  100.0 tok/s, requests done 3",
		"tokenrouter N=2 [####] 100%  4s/4s  100.0 tok/s, requests done 3\n",
		"slice 2/4 lockstep N=2 [##--]  50%  2s/4s  2s left  50.0 tok/s, requests done 1",
		"slice 2/4 lockstep N=2 [##--]  50%  2s/4s  2s left  50.0 tok/s, requests done 1\n",
	}
	if got := s.frames(); !slices.Equal(got, want) {
		t.Fatalf("frames\n%q\nwant\n%q", got, want)
	}
}
