package system_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/system"
)

// TestMemberChecksRouterAgainstItsModel: a member that runs its model in
// a process of its own (OpenMember, SubServer) checks a co-llm head's
// metadata against that model's facts, and refuses a head trained for
// another model, naming both.
func TestMemberChecksRouterAgainstItsModel(t *testing.T) {
	const h = 64 // stories260K's hidden width
	meta, err := nn.RouterMeta{Algorithm: "co-llm", SLM: "other", VocabSize: 32000, HiddenSize: h, Threshold: 0.5}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "head.safetensors")
	ts := map[string]nn.Tensor{"defer.weight": {Shape: []int{1, h}, Data: make([]float32, h)}, "defer.bias": {Shape: []int{1}, Data: []float32{0}}}
	if err := nn.Save(path, ts, map[string]string{nn.MetaKey: meta}); err != nil {
		t.Fatal(err)
	}
	s := system.Spec{
		Models: []config.Model{{Name: "stories", Engine: loader.KindCPU, Path: filepath.Join(testmodels.Dir(t), "stories260K.gguf"), Threads: 1},
			{Name: "llm", Engine: loader.KindSim, Profile: "paper-r2r/llm", Seed: 2}},
		Algorithm: "co-llm", Params: map[string]string{"weights": path}, Registry: builtin.Registry(),
		Launch: sched.Launch{Tables: []sched.Table{{1}, {1}}, MaxWait: 20 * time.Millisecond}, MaxBatch: 4, StallTimeout: time.Second,
	}
	b := bus.NewMemory()
	defer b.Close()
	m, err := system.OpenMember(context.Background(), s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Engine().Close()
	_, err = m.SubServer(m.Engine(), b, nil)
	for _, want := range []string{"router " + path, "(32000 tokens, hidden 64)", `of "other"`, `model "stories" has vocabulary`, "(512 tokens, hidden 64)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SubServer: %v\nwant an error saying %q", err, want)
		}
	}
}
