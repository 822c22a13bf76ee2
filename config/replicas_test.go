package config

import (
	"maps"
	"strings"
	"testing"
)

// TestReplicas: a model's replicas come from its entry, a preset may set
// them for its own models, and bad counts or names are refused naming the
// field.
func TestReplicas(t *testing.T) {
	c, err := Parse([]byte(`
models:
  - {name: slm, engine: sim, replicas: 3}
  - {name: llm, engine: sim}
presets:
  - {name: a, algorithm: r2r-random, models: [slm, llm]}
  - {name: b, algorithm: r2r-random, models: [slm, llm], replicas: {llm: 2, slm: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	slm, _ := c.Model("slm")
	llm, _ := c.Model("llm")
	for _, x := range []struct {
		preset int
		m      Model
		want   int
	}{{0, slm, 3}, {0, llm, 1}, {1, slm, 1}, {1, llm, 2}} {
		if got := c.Presets[x.preset].ReplicasOf(x.m); got != x.want {
			t.Errorf("preset %s, model %s: %d replicas, want %d", c.Presets[x.preset].Name, x.m.Name, got, x.want)
		}
	}
	for yaml, want := range map[string]string{
		"models: [{name: slm, engine: sim, replicas: 65}]\npresets: [{name: a, algorithm: single, models: [slm]}]":                     `model "slm": replicas 65`,
		"models: [{name: slm, engine: sim, replicas: -1}]\npresets: [{name: a, algorithm: single, models: [slm]}]":                     `model "slm": replicas -1`,
		"models: [{name: slm, engine: sim}]\npresets: [{name: a, algorithm: single, models: [slm], replicas: {llm: 2}}]":               `replicas: "llm" is not one of its models`,
		"models: [{name: slm, engine: sim}]\npresets: [{name: a, algorithm: single, models: [slm], replicas: {slm: 0}}]":               `replicas of "slm": 0`,
		"models: [{name: slm, engine: sim}]\npresets: [{name: a, algorithm: single, models: [slm], replicas: {slm: 2, zz: 9, aa: 9}}]": `"aa" is not one of its models`,
	} {
		if _, err := Parse([]byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n  err %v, want one naming %s", yaml, err, want)
		}
	}
}

func TestParseReplicas(t *testing.T) {
	got, err := ParseReplicas([]string{"slm=2", "llm=1,xl=64"})
	if err != nil || !maps.Equal(got, map[string]int{"slm": 2, "llm": 1, "xl": 64}) {
		t.Fatalf("%v, %v", got, err)
	}
	if got, err := ParseReplicas(nil); err != nil || len(got) != 0 {
		t.Fatalf("no values: %v, %v", got, err)
	}
	for _, bad := range [][]string{{"slm"}, {"slm=x"}, {"=2"}, {"slm=0"}, {"slm=65"}, {"slm=2", "slm=3"}, {"slm=2,"}} {
		if _, err := ParseReplicas(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
