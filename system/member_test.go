package system_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/system"
)

func memberSpec() system.Spec {
	return system.Spec{
		Models: []config.Model{{Name: "slm", Engine: loader.KindSim, Profile: "paper-r2r/slm", Seed: 1},
			{Name: "llm", Engine: loader.KindSim, Profile: "paper-r2r/llm", Seed: 2, ChatTemplate: "t/chat.jinja"}},
		Algorithm: "r2r-random", Params: map[string]string{"p": "0.35"}, Registry: builtin.Registry(),
		Launch: sched.Launch{Tables: []sched.Table{{1}, {2, 3}}, MaxWait: 20 * time.Millisecond}, MaxBatch: 4,
		StallTimeout: time.Second,
	}
}

// TestMemberSpec: a member's part of a Spec, and back.
func TestMemberSpec(t *testing.T) {
	s := memberSpec()
	m, err := s.Member(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(m.Model.ChatTemplate) || m.Model.Profile != "paper-r2r/llm" || s.Models[1].ChatTemplate != "t/chat.jinja" {
		t.Errorf("model %+v (the spec's: %+v)", m.Model, s.Models[1])
	}
	if !reflect.DeepEqual(m.Policy, s.Launch.Policy(1)) || !reflect.DeepEqual(m.Models, []string{"slm", "llm"}) || m.StallTimeout != time.Second {
		t.Errorf("member %+v", m)
	}
	// A member's Spec gives the member back.
	again, err := m.Spec(system.Spec{}).Member(1, 0)
	if err != nil || !reflect.DeepEqual(again, m) {
		t.Errorf("again: %+v, %v", again, err)
	}
	if _, err := s.Member(2, 0); err == nil {
		t.Error("member 2 of 2 models")
	}
	s.Launch.Auto = true
	if _, err := s.Member(0, 0); err == nil || !strings.Contains(err.Error(), "automatic thresholds") {
		t.Errorf("auto: %v", err)
	}
	bad := m
	bad.Model.Name = "slm"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "model.name") {
		t.Errorf("wrong model: %v", err)
	}
}

// TestOpenMember builds a member's sub-server through the system package.
func TestOpenMember(t *testing.T) {
	s := memberSpec()
	s.Models[1].ChatTemplate = ""
	m, err := system.OpenMember(context.Background(), s, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Engine().Close()
	b := bus.NewMemory()
	defer b.Close()
	sub, err := m.SubServer(m.Engine(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Engine() != m.Engine() || m.Index() != 1 {
		t.Errorf("sub-server over %v, index %d", sub.Engine(), m.Index())
	}
}

// TestMemberSpecEmbedded: a model built into the binary keeps its
// embedded: paths in a member's spec (every process of the binary has the
// files), where file paths become absolute.
func TestMemberSpecEmbedded(t *testing.T) {
	s := memberSpec()
	s.Models = config.Tiny().Models
	s.Models[1].Tokenizer = "tok512.bin"
	m, err := s.Member(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Model.Path != "embedded:llama2xs-model.bin" || !filepath.IsAbs(m.Model.Tokenizer) {
		t.Errorf("model %+v", m.Model)
	}
}
