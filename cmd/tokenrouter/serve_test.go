package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/server"
)

func TestServeDefaults(t *testing.T) {
	cmd := newServeCmd()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	f := flagsOf(t, cmd)
	cfg, err := serveConfig(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr() != "127.0.0.1:30000" || len(cfg.Models) != 2 || cfg.Models[0].Profile != "paper-r2r/slm" ||
		cfg.Presets[0].Name != "r2r-random" || cfg.Presets[0].Params["p"] != "0.35" || cfg.Presets[0].MaxWait != 50*time.Millisecond {
		t.Fatalf("%+v", cfg)
	}
}

func TestServeFlags(t *testing.T) {
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--port", "0", "--p", "0.1", "--thresholds", "1,3", "--preset", "fast",
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
	var err error
	get := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	f.configPath, err = fl.GetString("config")
	var e error
	f.host, e = fl.GetString("host")
	get(e)
	f.port, e = fl.GetInt("port")
	get(e)
	f.apiKey, e = fl.GetString("api-key")
	get(e)
	f.maxInFlight, e = fl.GetInt("max-in-flight")
	get(e)
	f.maxBody, e = fl.GetInt64("max-body-bytes")
	get(e)
	f.defaultMaxTokens, e = fl.GetInt("default-max-tokens")
	get(e)
	f.shutdownTimeout, e = fl.GetDuration("shutdown-timeout")
	get(e)
	f.profile, e = fl.GetString("profile")
	get(e)
	f.models, e = fl.GetStringArray("model")
	get(e)
	f.tokenizer, e = fl.GetString("tokenizer")
	get(e)
	f.chatTemplate, e = fl.GetString("chat-template")
	get(e)
	f.algorithm, e = fl.GetString("algorithm")
	get(e)
	f.preset, e = fl.GetString("preset")
	get(e)
	f.p, e = fl.GetFloat64("p")
	get(e)
	f.params, e = fl.GetStringArray("param")
	get(e)
	f.thresholds, e = fl.GetString("thresholds")
	get(e)
	f.maxWait, e = fl.GetDuration("max-wait")
	get(e)
	for _, d := range []struct {
		name string
		v    *time.Duration
	}{{"write-timeout", &f.writeTimeout}, {"read-header-timeout", &f.readHeaderTimeout},
		{"body-timeout", &f.bodyTimeout}, {"idle-timeout", &f.idleTimeout}} {
		*d.v, e = fl.GetDuration(d.name)
		get(e)
	}
	f.maxConns, e = fl.GetInt("max-connections")
	get(e)
	f.kvReserveMB, e = fl.GetInt("kv-reserve-mb")
	get(e)
	f.allowNoKey, e = fl.GetBool("allow-no-key")
	get(e)
	if err != nil {
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
		{[]string{"--kv-reserve-mb", "8"}, "--kv-reserve-mb applies to --model files"},
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
		{[]string{"--param", "q=1"}, []string{"unknown parameter q", "known: p, p-after, switch-at"}},
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
