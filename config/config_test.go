package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Addr() != "127.0.0.1:30000" || len(c.Models) != 2 || c.Presets[0].Name != "r2r-random" || c.Presets[0].Params["p"] != "0.35" {
		t.Fatalf("%+v", c)
	}
	tabs, auto, err := c.Presets[0].ParseThresholds()
	if err != nil || !auto || tabs != nil {
		t.Fatalf("thresholds %v %v %v", tabs, auto, err)
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
	if _, auto, _ := c.Presets[1].ParseThresholds(); !auto || c.Presets[1].AutoConcurrency != 8 {
		t.Fatalf("auto preset %+v", c.Presets[1])
	}
	if tabs, _, _ := c.Presets[2].ParseThresholds(); len(tabs) != 2 {
		t.Fatalf("one B for both models: %v", tabs)
	}
	if m, _ := c.Model("stories"); m.Engine != "cpu" || m.Tokenizer != filepath.Join("testdata", "../../testdata/models/tok512.bin") {
		t.Fatalf("paths are relative to the file: %+v", m)
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	c, err := Parse([]byte("port: 31000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 31000 || c.Presets[0].Name != "r2r-random" || c.MaxInFlight != DefaultMaxInFlight {
		t.Fatalf("%+v", c)
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
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}
