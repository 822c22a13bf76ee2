package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/server"
)

// TestServeDefaults: with no arguments serve describes the pair built into
// the binary under r-stitch; --engine sim the simulated pair under
// r2r-random (p = 0.35).
func TestServeDefaults(t *testing.T) {
	cfg := serveFlagsConfig(t)
	p := cfg.Presets[0]
	if cfg.Addr() != "127.0.0.1:30000" || !reflect.DeepEqual(cfg.Models, config.Tiny().Models) || p.Name != "r-stitch" || p.Algorithm != "r-stitch" ||
		!reflect.DeepEqual(p.Params, map[string]string{"tau": config.TinyTau}) || p.MaxWait != 50*time.Millisecond {
		t.Fatalf("%+v", cfg)
	}
	cfg = serveFlagsConfig(t, "--engine", "sim")
	if cfg.Addr() != "127.0.0.1:30000" || len(cfg.Models) != 2 || cfg.Models[0].Profile != "paper-r2r/slm" || cfg.Models[1].Engine != "sim" ||
		cfg.Presets[0].Name != "r2r-random" || cfg.Presets[0].Params["p"] != "0.35" || cfg.Presets[0].MaxWait != 50*time.Millisecond {
		t.Fatalf("--engine sim: %+v", cfg)
	}
	cfg = serveFlagsConfig(t, "--engine", "sim", "--profile", "paper-r2r-batched", "--algorithm", "speculative")
	if cfg.Models[1].Profile != "paper-r2r-batched/llm" || cfg.Presets[0].Name != "speculative" || len(cfg.Presets[0].Params) != 0 {
		t.Fatalf("--engine sim --profile: %+v", cfg)
	}
	cfg = serveFlagsConfig(t, "--algorithm", "r2r-random", "--kv-reserve-mb", "8")
	if cfg.Models[0].Path != "embedded:stories260K.bin" || cfg.Models[1].KVReserveMB != 8 || cfg.Presets[0].Params["p"] != "0.35" || cfg.Presets[0].Params["tau"] != "" {
		t.Fatalf("the built-in pair under r2r-random: %+v", cfg)
	}
}

// TestServeModelCount: one --model without --algorithm is served alone
// (single); two without one are refused, and the error names every
// algorithm that serves two models.
func TestServeModelCount(t *testing.T) {
	cfg := serveFlagsConfig(t, "--model", "a=/x/a.gguf")
	if p := cfg.Presets[0]; p.Name != "single" || p.Algorithm != "single" || !slices.Equal(p.Models, []string{"a"}) || len(p.Params) != 0 {
		t.Fatalf("one model: %+v", cfg.Presets)
	}
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf"}); err != nil {
		t.Fatal(err)
	}
	_, err := serveConfig(cmd, flagsOf(t, cmd))
	fit := builtin.Registry().Fitting(2)
	if err == nil || len(fit) < 9 || !strings.Contains(err.Error(), "2 models need a routing algorithm: give --algorithm, one of "+strings.Join(fit, ", ")) {
		t.Fatalf("two models, no algorithm: %v", err)
	}
	for _, name := range []string{"r-stitch", "r2r-random", "speculative", "single"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

// serveFlagsConfig is the configuration serve's flags args describe.
func serveFlagsConfig(t *testing.T, args ...string) config.Config {
	t.Helper()
	cmd := newServeCmd()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := serveConfig(cmd, flagsOf(t, cmd))
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cfg
}

func TestServeFlags(t *testing.T) {
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--port", "0", "--algorithm", "r2r-random", "--p", "0.1", "--thresholds", "1,3", "--preset", "fast",
		"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--api-key", "k", "--chat-template", "chatml", "--kv-reserve-mb", "64"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := serveConfig(cmd, flagsOf(t, cmd))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Presets[0]
	if cfg.Port != 0 || p.Name != "fast" || p.Params["p"] != "0.1" || p.Thresholds != "1,3" || cfg.APIKey != "k" ||
		cfg.Models[1].Name != "b" || cfg.Models[1].Engine != "cpu" || cfg.Models[1].Path != "/x/b.gguf" ||
		cfg.Models[0].ChatTemplate != "chatml" || cfg.Models[1].ChatTemplate != "chatml" ||
		cfg.Models[0].KVReserveMB != 64 || cfg.Models[1].KVReserveMB != 64 {
		t.Fatalf("%+v", cfg)
	}
	cmd = newServeCmd()
	_ = cmd.ParseFlags([]string{"--config", "x.yaml", "--p", "0.2"})
	if _, err := serveConfig(cmd, flagsOf(t, cmd)); err == nil || !strings.Contains(err.Error(), "--p") {
		t.Fatalf("model flags with --config: %v", err)
	}
	cmd = newServeCmd()
	_ = cmd.ParseFlags([]string{"--config", "x.yaml", "--chat-template", "t.jinja"})
	if _, err := serveConfig(cmd, flagsOf(t, cmd)); err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Fatalf("--chat-template with --config: %v", err)
	}
}

// flagsOf reads the parsed flag values back into serveFlags.
func flagsOf(t *testing.T, cmd *cobra.Command) serveFlags {
	t.Helper()
	fl := cmd.Flags()
	var f serveFlags
	var errs []error
	for name, v := range map[string]*string{"config": &f.configPath, "host": &f.host, "api-key": &f.apiKey, "profile": &f.profile,
		"engine": &f.engine, "kernels": &f.kernels, "tokenizer": &f.tokenizer, "chat-template": &f.chatTemplate,
		"algorithm": &f.algorithm, "preset": &f.preset, "thresholds": &f.thresholds} {
		var err error
		*v, err = fl.GetString(name)
		errs = append(errs, err)
	}
	for name, v := range map[string]*int{"port": &f.port, "max-in-flight": &f.maxInFlight, "default-max-tokens": &f.defaultMaxTokens,
		"max-connections": &f.maxConns, "kv-reserve-mb": &f.kvReserveMB} {
		var err error
		*v, err = fl.GetInt(name)
		errs = append(errs, err)
	}
	for name, v := range map[string]*time.Duration{"shutdown-timeout": &f.shutdownTimeout, "max-wait": &f.maxWait,
		"write-timeout": &f.writeTimeout, "read-header-timeout": &f.readHeaderTimeout, "body-timeout": &f.bodyTimeout, "idle-timeout": &f.idleTimeout} {
		var err error
		*v, err = fl.GetDuration(name)
		errs = append(errs, err)
	}
	for name, v := range map[string]*[]string{"model": &f.models, "param": &f.params, "replicas": &f.replicas} {
		var err error
		*v, err = fl.GetStringArray(name)
		errs = append(errs, err)
	}
	var err error
	f.maxBody, err = fl.GetInt64("max-body-bytes")
	errs = append(errs, err)
	f.p, err = fl.GetFloat64("p")
	errs = append(errs, err)
	f.allowNoKey, err = fl.GetBool("allow-no-key")
	if err := errors.Join(append(errs, err)...); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestServeRefuses: flag values that would be ignored or unsafe are
// refused with a message that says what to do.
func TestServeRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-wait", "-1s"}, "--max-wait -1s is negative"},
		{[]string{"--write-timeout", "0s"}, "--write-timeout 0s: must be positive"},
		{[]string{"--host", "0.0.0.0"}, "no api_key is set"},
		{[]string{"--max-connections", "-1"}, "max_connections -1 is negative"},
		{[]string{"--model", "a=/x/a.gguf", "--kv-reserve-mb", "-1"}, "--kv-reserve-mb -1: must not be negative"},
		{[]string{"--engine", "sim", "--kv-reserve-mb", "8"}, "--kv-reserve-mb applies to the cpu engine"},
		{[]string{"--engine", "sim", "--kernels", "generic"}, "--kernels applies to the cpu engine"},
		{[]string{"--engine", "sim", "--tokenizer", "t.bin"}, "--tokenizer applies to the cpu engine"},
		{[]string{"--engine", "sim", "--model", "a=/x/a.gguf"}, "--model files run on the cpu engine; --engine sim serves two simulated models"},
		{[]string{"--engine", "sim", "--profile", "nope"}, "--profile: "},
		{[]string{"--engine", "gpu"}, `--engine "gpu": want cpu or sim`},
		{[]string{"--profile", "paper-r2r"}, "--profile is the simulated models' latency profile: add --engine sim"},
		{[]string{"--tokenizer", "t.bin"}, "--tokenizer applies to --model files (the built-in pair has its own)"},
		{[]string{"--config", "x.yaml", "--kv-reserve-mb", "8"}, "--kv-reserve-mb: describe models and presets in the --config file"},
	} {
		cmd := newServeCmd()
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		_, err := serveConfig(cmd, flagsOf(t, cmd))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	for _, args := range [][]string{{"--host", "0.0.0.0", "--api-key", "k"}, {"--host", "0.0.0.0", "--allow-no-key"}, {"--host", "::1"}} {
		cmd := newServeCmd()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if _, err := serveConfig(cmd, flagsOf(t, cmd)); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestServeStartErrors: an unknown algorithm parameter names the known
// ones; a missing model file says so.
func TestServeStartErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--param", "q=1"}, []string{"algorithm r-stitch: unknown parameter q", "known: tau"}},
		{[]string{"--engine", "sim", "--param", "q=1"}, []string{"unknown parameter q", "known: p, p-after, switch-at"}},
		{[]string{"--model", "x=embedded:nope.bin"}, []string{"embedded:nope.bin: no such embedded file (have stories260K.bin, llama2xs-model.bin, tok512.bin)"}},
		{[]string{"--model", "x=" + filepath.Join(t.TempDir(), "nope.gguf")}, []string{"nope.gguf", "no such file"}},
	} {
		cmd := newServeCmd()
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := serveConfig(cmd, flagsOf(t, cmd))
		if err == nil {
			var s *server.Server
			if s, err = server.New(context.Background(), cfg, server.Options{}); err == nil {
				s.Close()
			}
		}
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v, want %q", c.args, err, w)
			}
		}
	}
}

// servedBinary is a `tokenrouter serve` process of the test binary.
type servedBinary struct {
	url  string
	logs *logBuffer
}

// startServe runs the binary's serve with args on a free port and waits
// until it listens; the test's cleanup stops it with SIGTERM and checks
// that it exits cleanly.
func startServe(t *testing.T, args ...string) *servedBinary {
	t.Helper()
	logs := &logBuffer{}
	cmd := exec.Command(bin.path, append([]string{"serve", "--port", "0", "--shutdown-timeout", "5s"}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		if err := testkit.Receive(t, exited, 15*time.Second); err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
		if t.Failed() {
			t.Logf("serve's log:\n%.20000s", logs)
		}
	})
	urlRE := regexp.MustCompile(`msg=serving url=(http://127\.0\.0\.1:\d+)`)
	s := &servedBinary{logs: logs}
	waitFor(t, 20*time.Second, "serve to listen", func() bool {
		if m := urlRE.FindStringSubmatch(logs.String()); m != nil {
			s.url = m[1]
		}
		return s.url != ""
	})
	return s
}

// chatReply is the part of a chat completion these tests read.
type chatReply struct {
	Choices []struct {
		Message struct{ Content string } `json:"message"`
	} `json:"choices"`
	Routing struct {
		Algorithm    string         `json:"algorithm"`
		TokensBy     map[string]int `json:"tokens_by_model"`
		LargeModelRa float64        `json:"large_model_ratio"`
	} `json:"routing"`
}

// chat sends one greedy chat request for preset and decodes the reply.
func (s *servedBinary) chat(t *testing.T, preset string) chatReply {
	t.Helper()
	body := `{"model":"` + preset + `","messages":[{"role":"user","content":"Tell me a story about a dog"}],"max_tokens":64,"temperature":0}`
	resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r chatReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK || len(r.Choices) != 1 {
		t.Fatalf("chat: %d %+v %v", resp.StatusCode, r, err)
	}
	return r
}

// modelsCard returns /v1/models' first card.
func (s *servedBinary) modelsCard(t *testing.T) (card struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Simulated   bool   `json:"simulated"`
	Models      []struct {
		Name, Path string
		Simulated  bool
	} `json:"models"`
}) {
	t.Helper()
	resp, err := http.Get(s.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 {
		t.Fatalf("/v1/models: %+v %v", list, err)
	}
	if err := json.Unmarshal(list.Data[0], &card); err != nil {
		t.Fatal(err)
	}
	return card
}

// TestServeFirstRun: serve with no arguments writes real text with the
// pair built into the binary, both models taking part under r-stitch, says
// so in its log, and /v1/models names the embedded files. --engine sim
// still serves the simulated pair.
func TestServeFirstRun(t *testing.T) {
	s := startServe(t)
	r := s.chat(t, "r-stitch")
	text := r.Choices[0].Message.Content
	words := regexp.MustCompile(`[A-Za-z]+`).FindAllString(text, -1)
	common := 0
	for _, w := range words {
		if slices.Contains([]string{"the", "a", "and", "was", "to", "she", "he", "they", "said", "her", "his", "it"}, strings.ToLower(w)) {
			common++
		}
	}
	if len(words) < 20 || common < 3 || strings.ContainsRune(text, utf8.RuneError) {
		t.Errorf("not English text: %q", text)
	}
	if r.Routing.Algorithm != "r-stitch" || r.Routing.TokensBy["slm"] == 0 || r.Routing.TokensBy["llm"] == 0 {
		t.Errorf("routing %+v: want both models", r.Routing)
	}
	if !strings.Contains(s.logs.String(), `msg="serving the tiny trained pair built into the binary`) {
		t.Error("the log does not say what is served")
	}
	card := s.modelsCard(t)
	if card.ID != "r-stitch" || card.Simulated || len(card.Models) != 2 || card.Models[0].Path != "embedded:stories260K.bin" ||
		card.Models[1].Path != "embedded:llama2xs-model.bin" || !strings.Contains(card.Description, "built into the binary") {
		t.Errorf("/v1/models: %+v", card)
	}
	t.Logf("%d words, tokens by model %v: %q", len(words), r.Routing.TokensBy, text)
	// A sub-server process per model: each child reads the files built
	// into its own binary and writes the same greedy text.
	procs := startServe(t, "--processes", "--thresholds", "1,3")
	if p := procs.chat(t, "r-stitch"); p.Choices[0].Message.Content != text || !reflect.DeepEqual(p.Routing.TokensBy, r.Routing.TokensBy) {
		t.Errorf("--processes: %+v, want the same text and routing as in one process", p)
	}
	sim := startServe(t, "--engine", "sim")
	if c := sim.modelsCard(t); c.ID != "r2r-random" || !c.Simulated || len(c.Models) != 2 || !strings.Contains(c.Description, "SIMULATED") {
		t.Errorf("--engine sim /v1/models: %+v", c)
	}
}

// TestServeOneModelAlone: one --model without --algorithm is served alone
// (every token from it, algorithm single), and the log says so.
func TestServeOneModelAlone(t *testing.T) {
	s := startServe(t, "--model", "stories=embedded:stories260K.bin", "--tokenizer", "embedded:tok512.bin")
	r := s.chat(t, "single")
	if r.Routing.Algorithm != "single" || len(r.Routing.TokensBy) != 1 || r.Routing.TokensBy["stories"] == 0 || r.Routing.LargeModelRa != 0 {
		t.Errorf("routing %+v", r.Routing)
	}
	line := `msg="one model: serving it alone, without routing (algorithm single); routing takes a second --model and --algorithm" model=stories path=embedded:stories260K.bin`
	if !strings.Contains(s.logs.String(), line) {
		t.Errorf("the log does not say the model is served alone: want %s", line)
	}
}
