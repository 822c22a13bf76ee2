package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// parsedSubserver parses args as the subserver command's flags.
func parsedSubserver(t *testing.T, args ...string) (*cobra.Command, subserverFlags) {
	t.Helper()
	var f subserverFlags
	cmd := &cobra.Command{Use: "subserver"}
	f.register(cmd.Flags())
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd, f
}

// TestSubserverSpecPaths: a member started by hand with flags and a child
// given its spec by serve --processes run the same ChildSpec value.
func TestSubserverSpecPaths(t *testing.T) {
	for _, k := range []string{envNATSUser, envNATSPassword, envNATSToken, envBusKey} {
		t.Setenv(k, "")
	}
	const key = "0123456789abcdef0123"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := config.Model{Name: "llm", Engine: loader.KindCPU, Path: "m.gguf", Threads: 2}
	desc, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	cmd, f := parsedSubserver(t, "--nats", "nats://127.0.0.1:4222", "--prefix", "tr.x", "--index", "1", "--models", "slm,llm",
		"--model-config", string(desc), "--algorithm", "r2r-random", "--param", "p=0.35", "--policy", `{"b":[1,2,3],"max_wait":"0s"}`,
		"--max-batch", "8", "--heartbeat", "250ms", "--misses", "4", "--speculate", "off", "--bus-key-file", keyFile)
	byHand, err := flagSpec(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	// What serve --processes derives from the preset's system.Spec.
	s := system.Spec{Models: []config.Model{{Name: "slm", Engine: loader.KindSim}, m}, Algorithm: "r2r-random",
		Params: map[string]string{"p": "0.35"}, Launch: sched.Launch{Tables: []sched.Table{{1, 3}, {1, 2, 3}}}, MaxBatch: 8,
		Speculate: subserver.Speculation{Mode: subserver.SpeculateOff}}
	parent, err := cluster.NewChildSpec(s, 1, 0, cluster.BusSpec{NATS: "nats://127.0.0.1:4222", Prefix: "tr.x",
		Secrets: cluster.Secrets{Key: []byte(key)}, Heartbeat: 250 * time.Millisecond, Misses: 4, Drain: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byHand, parent) {
		t.Fatalf("by hand:\n%+v\nfrom serve:\n%+v", byHand, parent)
	}
	if !filepath.IsAbs(parent.Member.Model.Path) || parent.Member.Policy.B[2] != 3 {
		t.Errorf("child spec %+v", parent.Member)
	}
	// The child reads the parent's encoding back to the same value.
	line, err := parent.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cmd, f = parsedSubserver(t, "--spec-on-stdin")
	child, err := subserverSpec(cmd, f, bufio.NewReader(bytes.NewReader(line)))
	if err != nil || !reflect.DeepEqual(child, parent) {
		t.Fatalf("from stdin: %+v, %v", child, err)
	}
}

// TestSubserverSpecOnStdinAlone: the spec on stdin replaces every other
// subserver flag.
func TestSubserverSpecOnStdinAlone(t *testing.T) {
	cmd, f := parsedSubserver(t, "--spec-on-stdin", "--index", "1", "--max-batch", "3")
	_, err := subserverSpec(cmd, f, bufio.NewReader(strings.NewReader("")))
	if err == nil || !strings.Contains(err.Error(), "--spec-on-stdin: the spec replaces --index, --max-batch") {
		t.Fatalf("got %v", err)
	}
	cmd, f = parsedSubserver(t, "--spec-on-stdin")
	_, err = subserverSpec(cmd, f, bufio.NewReader(strings.NewReader("")))
	if err == nil || !strings.Contains(err.Error(), "standard input ended") {
		t.Fatalf("empty stdin: %v", err)
	}
}
