//go:build unix

package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// TestGenModelBarOnTerminal runs gen-model on a pseudo-terminal: it draws
// a bar of the bytes written, redrawn in place, that reaches 100% of the
// file's size and ends its line before the summary.
func TestGenModelBarOnTerminal(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	c := exec.Command(bin.path, "gen-model", "--shape", "tiny-qwen2", "--type", "Q8_0", "--out", out)
	c.Env = terminalEnv()
	ptmx, err := pty.Start(c)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	_, err = io.Copy(&screen, ptmx) // until the child exits: EIO on Linux
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("gen-model: %v\n%q", err, screen.String())
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	text := screen.String()
	frames := strings.Split(text, "\r\x1b[K")
	last := frames[len(frames)-1]
	size := strings.TrimSuffix(mib(st.Size()), " MiB")
	want := "m.gguf [##############################] 100%  " + size + "/" + size + " MiB"
	if len(frames) < 3 || !strings.HasPrefix(last, want) || !strings.Contains(last, "\r\n"+out+": tiny-qwen2 Q8_0") {
		t.Fatalf("screen %q: want frames ending with %q, then the summary", text, want)
	}
	if !strings.Contains(frames[1], "m.gguf [") || strings.Contains(frames[1], "100%") {
		t.Fatalf("first frame %q", frames[1])
	}
}
