package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
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
		"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--api-key", "k"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := serveConfig(cmd, flagsOf(t, cmd))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Presets[0]
	if cfg.Port != 0 || p.Name != "fast" || p.Params["p"] != "0.1" || p.Thresholds != "1,3" || cfg.APIKey != "k" ||
		cfg.Models[1].Name != "b" || cfg.Models[1].Engine != "cpu" || cfg.Models[1].Path != "/x/b.gguf" {
		t.Fatalf("%+v", cfg)
	}
	cmd = newServeCmd()
	_ = cmd.ParseFlags([]string{"--config", "x.yaml", "--p", "0.2"})
	if _, err := serveConfig(cmd, flagsOf(t, cmd)); err == nil || !strings.Contains(err.Error(), "--p") {
		t.Fatalf("model flags with --config: %v", err)
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
	if err != nil {
		t.Fatal(err)
	}
	return f
}
