package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/system"
)

// benchStartedRE matches the log line of a child process started, its
// pid the submatch.
var benchStartedRE = regexp.MustCompile(`msg="sub-server process started" [^\n]*?pid=(\d+)`)

// TestBenchProcesses runs a short bench run --processes on the simulated
// pair with the built binary: the report has committed tokens and says
// where the sub-servers ran, each model ran in a child process of its own
// (its pid logged), and no child outlives the run.
func TestBenchProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin.path, "bench", "run", "--processes", "--thresholds", "1,3", "--concurrency", "2",
		"--duration", "1s", "--warmup", "300ms", "--max-tokens", "32", "--format", "json", "--log-level", "info")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench run --processes: %v\nstderr:\n%s", err, stderr.String())
	}
	var row bench.MeasureRow
	if err := json.Unmarshal(stdout.Bytes(), &row); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if row.System != "tokenrouter" || row.Concurrency != 2 || !slices.Equal(row.Thresholds, []int{1, 3}) || row.Auto {
		t.Errorf("report %+v", row)
	}
	if row.Tokens <= 0 || !(row.TokensPerSecond > 0) || row.Deployed != processesDeployed {
		t.Errorf("report %+v: want committed tokens, deployed in %q", row, processesDeployed)
	}
	var pids []int
	for _, m := range benchStartedRE.FindAllStringSubmatch(stderr.String(), -1) {
		pid, _ := strconv.Atoi(m[1])
		if pid > 0 && pid != cmd.Process.Pid && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("child processes %v (bench pid %d), want one per model\nstderr:\n%s", pids, cmd.Process.Pid, stderr.String())
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("child process %d outlived bench", pid)
		}
	}
}

// TestBenchProcessesTable checks the table report says where the
// sub-servers ran.
func TestBenchProcessesTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin.path, "bench", "run", "--processes", "--thresholds", "1", "--concurrency", "1",
		"--duration", "500ms", "--warmup", "200ms", "--max-tokens", "16", "--log-level", "warn").Output()
	if err != nil {
		t.Fatalf("bench run --processes: %v", err)
	}
	if !strings.Contains(string(out), "sub-servers in "+processesDeployed+"\n") || !strings.Contains(string(out), "tokenrouter ") {
		t.Fatalf("table:\n%s", out)
	}
}

// TestBenchProcessesRejects checks that what cannot run across processes
// is refused, before anything starts, with an error that says why.
func TestBenchProcessesRejects(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bus-delay", "1ms", "--thresholds", "1,3"}, "--bus-delay delays the in-process bus"},
		{nil, `thresholds "auto"`},
		{[]string{"--thresholds", "auto"}, "--thresholds 1,3"},
		{[]string{"--system", "lockstep", "--thresholds", "1,3"}, `"lockstep" runs in bench's process only`},
		{[]string{"--system", "tokenrouter-b1"}, "give --thresholds 1"},
		{[]string{"--placement", "time-shared", "--thresholds", "1,3"}, "--placement partitioned"},
		{[]string{"--kv-reserve-mb", "8", "--thresholds", "1,3"}, "engines run in the children"},
	} {
		cmd := newBenchCmd()
		cmd.SilenceUsage = true
		var stdout bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"run", "--processes", "--concurrency", "1", "--duration", "100ms"}, c.args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.args, err, c.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%v: measured anyway: %s", c.args, stdout.String())
		}
	}
}

// errDeployed ends TestBenchProcessesSpec's run at its deployer.
var errDeployed = errors.New("deployer reached")

// TestBenchProcessesSpec checks what bench run --processes hands the
// deployment it starts: the replica counts of --replicas, simulated
// models that sleep instead of spinning, static tables, partitioned
// placement.
func TestBenchProcessesSpec(t *testing.T) {
	cmd, f := benchRunCmd()
	if err := cmd.ParseFlags([]string{"--processes", "--replicas", "slm=2", "--thresholds", "1,3", "--concurrency", "4", "--duration", "1s"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.spec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if s.Deploy == nil || s.Deployed != processesDeployed {
		t.Fatalf("spec deploys in process (%q)", s.Deployed)
	}
	var got []system.Spec
	s.Deploy = func(_ context.Context, sp system.Spec) (bench.System, error) {
		got = append(got, sp)
		return nil, errDeployed
	}
	if err := bench.Measure(context.Background(), s, f.system); !errors.Is(err, errDeployed) {
		t.Fatalf("Measure: %v, want the deployer's error", err)
	}
	if len(got) != 1 {
		t.Fatalf("deployer called %d times", len(got))
	}
	sp := got[0]
	if len(sp.Models) != 2 || sp.Models[0].Replicas != 2 || sp.Models[1].Replicas > 1 {
		t.Errorf("models %+v: want slm with 2 replicas, llm with one", sp.Models)
	}
	for _, m := range sp.Models {
		if m.Engine != loader.KindSim || !m.NoSpin {
			t.Errorf("model %s: engine %s, no_spin %v: want a sleeping simulated model", m.Name, m.Engine, m.NoSpin)
		}
	}
	if sp.Launch.Auto || len(sp.Launch.Tables) != 2 || sp.Launch.Policy(0).B.At(4) != 1 || sp.Launch.Policy(1).B.At(4) != 3 || sp.TimeShared || sp.BusDelay != 0 {
		t.Errorf("launch %+v, time-shared %v, bus delay %v", sp.Launch, sp.TimeShared, sp.BusDelay)
	}
}
