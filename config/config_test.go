package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Addr() != "127.0.0.1:30000" || len(c.Models) != 2 || c.Presets[0].Name != "r2r-random" || c.Presets[0].Params["p"] != "0.35" {
		t.Fatalf("%+v", c)
	}
	l, err := c.Presets[0].Launch()
	if err != nil || !l.Auto || l.Tables != nil || l.MaxWait != DefaultMaxWait {
		t.Fatalf("launch %+v %v", l, err)
	}
}

func TestLoadExample(t *testing.T) {
	c, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 4 || len(c.Presets) != 3 {
		t.Fatalf("%+v", c)
	}
	if c.Presets[0].Params["p"] != "0.35" || c.Presets[0].MaxWait != 50*time.Millisecond || c.ShutdownTimeout != 30*time.Second {
		t.Fatalf("preset %+v", c.Presets[0])
	}
	if l, _ := c.Presets[1].Launch(); !l.Auto || c.Presets[1].AutoConcurrency != 8 {
		t.Fatalf("auto preset %+v", c.Presets[1])
	}
	if l, _ := c.Presets[2].Launch(); len(l.Tables) != 2 || l.Tables[1][0] != 1 {
		t.Fatalf("one B for both models: %+v", l)
	}
	if m, _ := c.Model("stories"); m.Engine != "cpu" || m.Tokenizer != filepath.Join("testdata", "../../models/tiny/tok512.bin") {
		t.Fatalf("paths are relative to the file: %+v", m)
	}
}

// TestParseEmptyIsTiny: a configuration without models and presets serves
// what `serve` serves with no model flags, the pair built into the binary.
func TestParseEmptyIsTiny(t *testing.T) {
	c, err := Parse([]byte("port: 31000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 31000 || c.Presets[0].Name != TinyAlgorithm || c.MaxInFlight != DefaultMaxInFlight || !reflect.DeepEqual(c.Models, Tiny().Models) {
		t.Fatalf("%+v", c)
	}
}

// TestTiny: the first-run deployment is the embedded pair, small model
// first, on the cpu engine with their shared embedded tokenizer, under
// r-stitch; a file's embedded paths are not taken relative to the file.
func TestTiny(t *testing.T) {
	c := Tiny()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p := c.Presets[0]
	if c.Addr() != "127.0.0.1:30000" || len(c.Models) != 2 || p.Algorithm != "r-stitch" || p.Params["tau"] != TinyTau || !slices.Equal(p.Models, []string{"slm", "llm"}) {
		t.Fatalf("%+v", c)
	}
	for i, want := range []string{"stories260K.bin", "llama2xs-model.bin"} {
		m := c.Models[i]
		if name, ok := Embedded(m.Path); !ok || name != want || m.Engine != "cpu" || m.Tokenizer != "embedded:tok512.bin" {
			t.Errorf("model %d: %+v", i, m)
		}
	}
	if _, ok := Embedded("testdata/stories260K.bin"); ok {
		t.Error("a file path read as embedded")
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "models: [{name: a, engine: cpu, path: embedded:stories260K.bin, tokenizer: embedded:tok512.bin}]\n" +
		"presets: [{name: x, algorithm: single, models: [a]}]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := l.Models[0]; m.Path != "embedded:stories260K.bin" || m.Tokenizer != "embedded:tok512.bin" {
		t.Fatalf("embedded paths taken relative to the file: %+v", m)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"bogus: 1\n", "field bogus not found"},
		{"models: [{name: a, profile: paper-r2r/slm}]\npresets: [{name: x, algorithm: r2r-random, models: [a, b]}]\n", `unknown model "b"`},
		{"models: [{name: a, profile: paper-r2r/slm}, {name: b, profile: paper-r2r/llm}]\npresets: [{name: x, algorithm: r2r-random, models: [a, b], thresholds: '1,2,3'}]\n", "3 values for 2 models"},
		{"models: [{name: a, profile: paper-r2r/slm}]\npresets: [{name: x, algorithm: r2r-random, models: [a], thresholds: fast}]\n", `want "auto"`},
		{"models: [{name: a, profile: paper-r2r/slm}]\npresets: [{name: x, models: [a]}, {name: x, algorithm: y, models: [a]}]\n", "no algorithm"},
		{"max_in_flight: -1\n", "max_in_flight"},
		{"models: [{name: a, profile: paper-r2r/slm}]\npresets: [{name: x, algorithm: r2r-random, models: [a], placement: spread}]\n", `placement "spread": want partitioned, time-shared or auto`},
		{"models: [{name: a, engine: cpu, path: a.gguf, cpus: [0, -1]}]\npresets: [{name: x, algorithm: single, models: [a]}]\n", "CPU -1 is negative"},
		{"models: [{name: a, engine: cpu, path: a.gguf, cpus: 0-3}]\npresets: [{name: x, algorithm: single, models: [a]}]\n", "cannot unmarshal"},
		{"cors_origins: [\"https://app.example/path\"]\n", "cors origin"},
		{"cors_origins: [\"app.example\"]\n", "cors origin"},
		{"max_conns_per_client: -1\n", "max_conns_per_client -1 is negative"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestConnectionLimits: the connection cap and the per-client bound are
// read from YAML; both default to 0 (derived when the server starts).
func TestConnectionLimits(t *testing.T) {
	c, err := Parse([]byte("max_connections: 512\nmax_conns_per_client: 32\nbody_timeout: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConnections != 512 || c.MaxConnsPerClient != 32 || c.BodyTimeout != 2*time.Second {
		t.Fatalf("%+v", c)
	}
	if d := Default(); d.MaxConnections != 0 || d.MaxConnsPerClient != 0 || d.IdleTimeout != DefaultIdleTimeout || d.ReadHeaderTimeout != DefaultReadHeaderTimeout {
		t.Fatalf("defaults: %+v", d)
	}
}

// TestLaunchFromPlan reads a preset's thresholds from a plan file named
// relative to the configuration file.
func TestLaunchFromPlan(t *testing.T) {
	dir := t.TempDir()
	plan := `[{"concurrency":2,"thresholds":[1,2],"feasible":true,"best":true},
{"concurrency":2,"thresholds":[1,1],"feasible":true,"best":false},
{"concurrency":4,"thresholds":[1,3],"feasible":true,"best":true}]`
	if err := os.WriteFile(filepath.Join(dir, "plan.json"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadIn(t, dir, "presets: [{name: x, algorithm: r2r-random, models: [slm, llm], thresholds: '@plan.json', max_wait: -1s}]\n"+
		"models: [{name: slm, profile: paper-r2r/slm}, {name: llm, profile: paper-r2r/llm}]\n")
	l, err := c.Presets[0].Launch()
	if err != nil || l.Auto || l.MaxWait != 0 || !slices.Equal(l.Tables[1], sched.Table{2, 2, 2, 2, 3}) {
		t.Fatalf("launch %+v, %v", l, err)
	}
	if _, err := ParseLaunch("@"+filepath.Join(dir, "missing.json"), 2, 0); err == nil {
		t.Fatal("a missing plan file accepted")
	}
	if l, err := ParseLaunch("3", 2, time.Millisecond); err != nil || len(l.Tables) != 2 || l.Tables[0][0] != 3 || l.MaxWait != time.Millisecond {
		t.Fatalf("one value for every model: %+v, %v", l, err)
	}
}

// TestPlacement reads a preset's placement and a model's threads and CPUs
// from YAML, and placements and CPU lists as flags give them.
func TestPlacement(t *testing.T) {
	c, err := Parse([]byte("models: [{name: a, engine: cpu, path: a.gguf, threads: 1, cpus: [1, 0]}, {name: b, profile: paper-r2r/llm}]\n" +
		"presets: [{name: x, algorithm: r2r-random, models: [a, b], placement: time-shared}, {name: y, algorithm: r2r-random, models: [a, b]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Presets[0].Placement != TimeShared || c.Presets[1].Placement != PlacementAuto || c.Models[0].Threads != 1 || !slices.Equal(c.Models[0].CPUs, []int{1, 0}) {
		t.Fatalf("%+v", c)
	}
	for in, want := range map[string]Placement{"": PlacementAuto, " partitioned ": Partitioned, "time-shared": TimeShared, "auto": PlacementAuto} {
		if p, err := ParsePlacement(in); err != nil || p != want {
			t.Errorf("ParsePlacement(%q) = %q, %v; want %q", in, p, err, want)
		}
	}
	if _, err := ParsePlacement("timeshared"); err == nil {
		t.Error("ParsePlacement accepted timeshared")
	}
	for in, want := range map[string][]int{"0": {0}, "0-3": {0, 1, 2, 3}, "6,0-1": {0, 1, 6}, " 2 , 2,1-2": {1, 2}} {
		if got, err := ParseCPUList(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "-1", "3-1", "1,", "0-", "1-2-3"} {
		if got, err := ParseCPUList(in); err == nil || !strings.Contains(err.Error(), "want CPU numbers") {
			t.Errorf("ParseCPUList(%q) = %v, %v; want an error", in, got, err)
		}
	}
}

// TestChatTemplatePaths: a chat_template file is relative to the
// configuration file; a built-in name stays a name.
func TestChatTemplatePaths(t *testing.T) {
	dir := t.TempDir()
	c := loadIn(t, dir, "presets: [{name: x, algorithm: r2r-random, models: [slm, llm]}]\n"+
		"models: [{name: slm, profile: paper-r2r/slm, chat_template: t/chat.jinja}, {name: llm, profile: paper-r2r/llm, chat_template: chatml}]\n")
	if got := c.Models[0].ChatTemplate; got != filepath.Join(dir, "t", "chat.jinja") {
		t.Fatalf("file: %q", got)
	}
	if got := c.Models[1].ChatTemplate; got != "chatml" {
		t.Fatalf("built-in name: %q", got)
	}
}

// loadIn writes yaml as dir/c.yaml and loads it.
func loadIn(t *testing.T, dir, yaml string) Config {
	t.Helper()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseSpeculation(t *testing.T) {
	for _, c := range []struct {
		mode  string
		depth int
		want  subserver.Speculation
		ok    bool
	}{
		{"", 0, subserver.Speculation{Mode: subserver.SpeculateAuto}, true},
		{"auto", 3, subserver.Speculation{Mode: subserver.SpeculateAuto, Depth: 3}, true},
		{" on ", 0, subserver.Speculation{Mode: subserver.SpeculateOn}, true},
		{"off", subserver.MaxDepth, subserver.Speculation{Mode: subserver.SpeculateOff, Depth: subserver.MaxDepth}, true},
		{"yes", 0, subserver.Speculation{}, false},
		{"on", -1, subserver.Speculation{}, false},
		{"on", subserver.MaxDepth + 1, subserver.Speculation{}, false},
	} {
		got, err := ParseSpeculation(c.mode, c.depth)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseSpeculation(%q, %d) = %+v, %v; want %+v (ok %v)", c.mode, c.depth, got, err, c.want, c.ok)
		}
	}
	c, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.Presets[1].Speculation(); err != nil || s.Mode != subserver.SpeculateAuto || s.Depth != 0 || c.Presets[1].Speculate != "auto" {
		t.Errorf("example preset %q: %+v %v", c.Presets[1].Name, s, err)
	}
	c.Presets[1].Speculate = "sometimes"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("a bad speculate mode validates: %v", err)
	}
}
