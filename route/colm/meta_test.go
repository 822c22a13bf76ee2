package colm_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/colm"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// withMeta writes the test router (hidden width 64) again with m as its
// metadata and returns the new file's path.
func withMeta(t *testing.T, m nn.RouterMeta) string {
	t.Helper()
	paths, err := routetest.WriteWeights(t.TempDir(), 64, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := nn.Load(paths["co-llm"])
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "router.safetensors")
	if err := nn.Save(path, w.Tensors, map[string]string{nn.MetaKey: s}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNewChecksTheSmallModel checks that New refuses a router whose
// metadata or width does not fit model 0, naming both sides.
func TestNewChecksTheSmallModel(t *testing.T) {
	trained := nn.RouterMeta{Algorithm: "co-llm", SLM: "tiny", VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64, Threshold: 0.5}
	fits := engine.Info{VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64}
	for _, c := range []struct {
		name  string
		meta  nn.RouterMeta
		model engine.Info
		want  []string // in the error; none: no error
	}{
		{"fits", trained, fits, nil},
		{"model facts unknown", trained, engine.Info{}, nil},
		{"other vocabulary", trained, engine.Info{VocabSize: 32000, VocabHash: "0123456789abcdef", HiddenSize: 64},
			[]string{"router.safetensors", "887bc8e5bff8ce4d (512 tokens", `"tiny"`, `model "small"`, "0123456789abcdef (32000 tokens"}},
		{"other width", trained, engine.Info{VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 288},
			[]string{"hidden 64", `model "small"`, "hidden 288"}},
		{"other algorithm", nn.RouterMeta{Algorithm: "citer", HiddenSize: 64}, fits, []string{"algorithm citer, not co-llm"}},
	} {
		path := withMeta(t, c.meta)
		s := route.Spec{Model: 0, Models: []string{"small", "large"}, Infos: []engine.Info{c.model, {}}, Params: map[string]string{"weights": path}}
		_, err := colm.New(s)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: New accepted the router", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\ndoes not say %q", c.name, err, w)
			}
		}
	}
	// Without metadata the width alone is checked.
	paths, err := routetest.WriteWeights(t.TempDir(), 32, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := route.Spec{Model: 0, Models: []string{"small", "large"}, Infos: []engine.Info{fits, {}}, Params: map[string]string{"weights": paths["co-llm"]}}
	if _, err := colm.New(s); err == nil || !strings.Contains(err.Error(), `takes hidden states of 32 values, but model "small" has hidden 64`) {
		t.Errorf("width 32 on a model of hidden 64: %v", err)
	}
}
