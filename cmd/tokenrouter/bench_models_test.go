package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/lab"
	"github.com/tokenrouter/tokenrouter/server"
)

// runBenchCmd runs the bench subcommand sub with args and returns its
// standard output.
func runBenchCmd(t *testing.T, sub string, args ...string) (string, error) {
	t.Helper()
	cmd := newBenchCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{sub}, args...))
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	return out.String(), err
}

// tinyPairArgs are the flags of the real tiny pair.
func tinyPairArgs(t *testing.T) []string {
	dir := testmodels.Dir(t)
	return []string{"--model", "slm=" + filepath.Join(dir, "llama2xs-model.bin"), "--model", "llm=" + filepath.Join(dir, "stories260K.gguf"),
		"--tokenizer", filepath.Join(dir, "tok512.bin")}
}

func TestBenchModelFlagErrors(t *testing.T) {
	tiny := tinyPairArgs(t)
	type benchCase struct {
		args []string
		want string
		sub  string // "run" when empty
	}
	for _, c := range []benchCase{
		{[]string{"--engine", "cpu"}, "--engine cpu needs --model", ""},
		{[]string{"--engine", "gpu"}, `--engine "gpu": want sim or cpu`, ""},
		{append([]string{"--profile", "paper-r2r"}, tiny...), "--model runs on the cpu engine", ""},
		{append([]string{"--placement", "spread"}, tiny...), `--placement: placement "spread": want partitioned, time-shared or auto`, ""},
		{append([]string{"--threads", "0"}, tiny...), `--threads "0": want a positive thread count`, ""},
		{append([]string{"--threads", "xl=2"}, tiny...), `--threads "xl=2": no model "xl" (have slm, llm)`, ""},
		{append([]string{"--cpus", "llm=1-0"}, tiny...), `--cpus "llm=1-0": cpus "1-0": want CPU numbers`, ""},
		{[]string{"--cpus", "0"}, "not to sim", ""},
		{append([]string{"--config", "x.yaml"}, tiny...), "--model: the models come from --config", ""},
		{append([]string{"--range-ratio", "1"}, tiny...), "--range-ratio 1: want 0 ≤ r < 1", ""},
		{append([]string{"--kv-reserve-mb", "-1"}, tiny...), "--kv-reserve-mb -1: want 0 or more", ""},
		{append([]string{"--client-procs", "-1"}, tiny...), "--client-procs -1: want 0 (all) or more", "compare"},
		{append([]string{"--max-tokens", "600"}, tiny...), "exceeds the models' context", ""},
		{[]string{"--prompts", "p.txt"}, "--prompts: the models have no tokenizer", ""},
		{[]string{"--systems", "tokenrouter,ftp://x"}, `unknown system "ftp://x"`, "compare"},
		{[]string{"--cpus", "0"}, "not to sim", "interference"},
		{append([]string{"--threads", "xl=2"}, tiny...), `--threads "xl=2": no model "xl" (have slm, llm)`, "interference"},
	} {
		sub := cmp.Or(c.sub, "run")
		args := c.args
		if sub != "interference" {
			args = append(args, "--duration", "10ms")
		}
		if _, err := runBenchCmd(t, sub, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestServePlacementFlags(t *testing.T) {
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--algorithm", "r2r-random", "--threads", "2", "--threads", "b=1",
		"--cpus", "a=0-1", "--placement", "time-shared"}); err != nil {
		t.Fatal(err)
	}
	f := flagsOf(t, cmd)
	f.threads, _ = cmd.Flags().GetStringArray("threads")
	f.cpus, _ = cmd.Flags().GetStringArray("cpus")
	f.placement, _ = cmd.Flags().GetString("placement")
	cfg, err := flagsConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Models; m[0].Threads != 2 || m[1].Threads != 1 || !slices.Equal(m[0].CPUs, []int{0, 1}) || m[1].CPUs != nil || cfg.Presets[0].Placement != config.TimeShared {
		t.Fatalf("%+v %+v", cfg.Models, cfg.Presets[0])
	}
	f.placement = "both"
	if _, err := flagsConfig(f); err == nil || !strings.Contains(err.Error(), "--placement") {
		t.Fatalf("--placement both: %v", err)
	}
	cmd = newServeCmd()
	_ = cmd.ParseFlags([]string{"--config", "x.yaml", "--placement", "partitioned"})
	if _, err := serveConfig(cmd, flagsOf(t, cmd)); err == nil || !strings.Contains(err.Error(), "--placement: describe") {
		t.Fatalf("--placement with --config: %v", err)
	}
}

// TestBenchCPU runs one system on the real tiny pair, time-shared, with
// prompts from a file, and checks the row says how it was placed.
func TestBenchCPU(t *testing.T) {
	out, err := runBenchCmd(t, "run", append(tinyPairArgs(t), "--system", "tokenrouter", "--concurrency", "2", "--duration", "300ms", "--warmup", "50ms",
		"--max-tokens", "20", "--placement", "time-shared", "--threads", "slm=1", "--prompts", filepath.Join("..", "..", "testdata", "eval", "stories.jsonl"),
		"--format", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var row bench.MeasureRow
	if err := json.Unmarshal([]byte(out), &row); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if row.Tokens == 0 || !strings.HasPrefix(row.Placement, "time-shared, threads slm 1, llm ") {
		t.Fatalf("%+v", row)
	}
}

// TestBenchURL measures `tokenrouter serve --engine sim`'s deployment over
// HTTP beside the same deployment in process, interleaved: the
// throughputs agree within generous bounds (a shared machine).
func TestBenchURL(t *testing.T) {
	cfg := config.Default()
	cfg.ShutdownTimeout = 5 * time.Second
	srv, err := server.New(context.Background(), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + testkit.Serve(t, func(ctx context.Context, ln net.Listener) error { return srv.Serve(ctx, ln) })
	out, err := runBenchCmd(t, "compare", "--systems", "tokenrouter", "--url", "served="+url, "--concurrency", "4", "--duration", "2s", "--warmup", "300ms",
		"--rounds", "2", "--max-tokens", "64", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []bench.Summary
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) != 2 || rows[1].System != "served="+url || rows[0].Placement == "" || rows[1].Placement != "" || rows[1].TTFTp50MS <= 0 {
		t.Fatalf("%+v", rows)
	}
	if rows[1].TokensPerSecond <= 0 || rows[0].TokensPerSecond <= 0 {
		t.Fatalf("over HTTP %.1f tok/s, in process %.1f", rows[1].TokensPerSecond, rows[0].TokensPerSecond)
	}
	// The process's CPU while the server was driven (here the server runs
	// in it too) is reported for the server's row only.
	if rows[0].ClientCores != 0 || rows[1].ClientCores <= 0 || rows[1].ClientCores > float64(runtime.NumCPU()) {
		t.Fatalf("client cores: in process %g, over HTTP %g", rows[0].ClientCores, rows[1].ClientCores)
	}
	// Their ratio is a measurement (docs/results/served-throughput.md),
	// not checked here: a shared machine swings it either way.
	t.Logf("in process %.1f tok/s, over HTTP %.1f tok/s", rows[0].TokensPerSecond, rows[1].TokensPerSecond)
}

func TestBenchInterference(t *testing.T) {
	out, err := runBenchCmd(t, "interference", append(tinyPairArgs(t), "--interference-batches", "2", "--format", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rows []lab.InterferenceRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) < 2 || rows[0].Model != "slm" || rows[0].Threads != 1 || rows[0].Batch != 2 || rows[0].AloneMS <= 0 || rows[1].TogetherMS <= 0 {
		t.Fatalf("%+v", rows)
	}
}
