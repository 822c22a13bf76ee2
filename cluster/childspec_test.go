package cluster_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// childSpec is model 1's ChildSpec of a two-model deployment with every
// field set.
func childSpec(t *testing.T) cluster.ChildSpec {
	t.Helper()
	s := system.Spec{
		Models: []config.Model{{Name: "slm", Engine: loader.KindSim, Profile: "paper-r2r/slm", Seed: 1},
			{Name: "llm", Engine: loader.KindSim, Latency: &config.Latency{Base: time.Millisecond, PerSeq: 2 * time.Microsecond},
				Seed: 2, VocabSize: 512, CPUs: []int{0, 1}}},
		Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"},
		Launch: sched.Launch{Tables: []sched.Table{{1}, {1, 2, 3}}, MaxWait: 50 * time.Millisecond}, MaxBatch: 8,
		Speculate: subserver.Speculation{Mode: subserver.SpeculateOn, Depth: 4}, StallTimeout: 3 * time.Second,
	}
	c, err := cluster.NewChildSpec(s, 1, 0, cluster.BusSpec{NATS: "nats://127.0.0.1:4222", Prefix: "tokenrouter.abc",
		Secrets:   cluster.Secrets{Auth: busnats.Auth{User: "u", Password: "p"}, Key: busnats.NewKey()},
		Heartbeat: 250 * time.Millisecond, Misses: 4})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChildSpecRoundTrip(t *testing.T) {
	c := childSpec(t)
	if c.Version != cluster.ChildSpecVersion || c.Member.Policy.MaxWait != 50*time.Millisecond || len(c.Member.Policy.B) != 3 {
		t.Fatalf("derived %+v", c)
	}
	line, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(bytes.NewReader(append(line, "after"...)))
	back, err := cluster.ReadChildSpec(r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("decoded\n%+v\nencoded\n%+v", back, c)
	}
	if rest, _ := r.ReadString(0); rest != "after" {
		t.Errorf("what follows the spec: %q", rest)
	}
}

// TestChildSpecRefused: what is not a whole, valid spec of this version
// is refused, with an error that says what is wrong.
func TestChildSpecRefused(t *testing.T) {
	c := childSpec(t)
	line, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	good := string(line)
	edit := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in %s", old, good)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "standard input ended"},
		{"truncated", good[:len(good)/2], "truncated"},
		{"no end of line", strings.TrimSuffix(good, "\n"), "truncated"},
		{"oversized", strings.Repeat(" ", cluster.MaxChildSpecSize) + good, "more than"},
		{"not JSON", "hello\n", "invalid character"},
		{"unknown field", edit(`"version":1,`, `"version":1,"extra":true,`), `unknown field "extra"`},
		{"unknown nested field", edit(`"misses":4`, `"misses":4,"color":"red"`), `unknown field "color"`},
		{"wrong version", edit(`"version":1,`, `"version":2,"new":1,`), "version 2: this binary reads version 1"},
		{"no version", edit(`"version":1,`, ``), "version: missing"},
		{"trailing data", strings.TrimSuffix(good, "\n") + "{}\n", "after"},
		{"wrong type", edit(`"misses":4`, `"misses":"4"`), "misses"},
		{"bad index", edit(`"index":1`, `"index":2`), "index 2"},
		{"other model", edit(`"index":1`, `"index":0`), "model.name"},
		{"no key", edit(`"key":`, `"old_key":`), "unknown field"},
		{"short key", strings.Replace(good, string(mustJSON(t, c.Bus.Secrets.Key)), `"AAAA"`, 1), "bus.secrets.key"},
		{"no heartbeat", edit(`"heartbeat":250000000`, `"heartbeat":0`), "bus.heartbeat"},
		{"no NATS", edit(`"nats":"nats://127.0.0.1:4222"`, `"nats":""`), "bus.nats"},
		{"bad threshold", edit(`"b":[1,2,3]`, `"b":[0]`), "threshold 0"},
		{"deep speculation", edit(`"Depth":4`, `"Depth":100000`), "speculate.depth"},
	} {
		_, err := cluster.ReadChildSpec(bufio.NewReader(strings.NewReader(tc.in)))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "cluster: child spec") {
			t.Errorf("%s: got %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}

// TestChildSpecAutoRefused: automatic thresholds are the front end's; a
// child needs tables.
func TestChildSpecAutoRefused(t *testing.T) {
	s := system.Spec{Models: []config.Model{{Name: "a"}, {Name: "b"}}, Algorithm: "r2r-random", Launch: sched.Launch{Auto: true}}
	_, err := cluster.NewChildSpec(s, 0, 0, cluster.BusSpec{NATS: "nats://x:1", Prefix: "p", Secrets: cluster.Secrets{Key: busnats.NewKey()},
		Heartbeat: time.Second, Misses: 3})
	if err == nil || !strings.Contains(err.Error(), "automatic thresholds") {
		t.Fatalf("got %v", err)
	}
}

// mustJSON is v's JSON encoding.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
