package routetest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/nn"
)

// CheckRouterFacts checks that newAlg, the New of the learned router
// algorithm (whose WriteWeights file is named algorithm), refuses a router
// whose tokenrouter.router metadata or input width does not fit model 0,
// naming both sides, and accepts one that fits or whose model facts are
// unknown. other is another learned router's name.
func CheckRouterFacts(t *testing.T, algorithm, other string, newAlg func(route.Spec) (route.Algorithm, error)) {
	t.Helper()
	trained := nn.RouterMeta{Algorithm: algorithm, SLM: "tiny", VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64, Threshold: 0.5}
	fits := engine.Info{VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64}
	spec := func(path string, model engine.Info) route.Spec {
		return route.Spec{Model: 0, Models: []string{"small", "large"}, Infos: []engine.Info{model, {}}, Params: map[string]string{"weights": path}}
	}
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
		{"other algorithm", nn.RouterMeta{Algorithm: other, HiddenSize: 64}, fits, []string{"algorithm " + other + ", not " + algorithm}},
	} {
		_, err := newAlg(spec(withMeta(t, algorithm, c.meta), c.model))
		checkErr(t, c.name, err, c.want)
	}
	// Without metadata the width alone is checked.
	paths, err := WriteWeights(t.TempDir(), 32, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newAlg(spec(paths[algorithm], fits))
	checkErr(t, "width 32 on a model of hidden 64", err, []string{`takes hidden states of 32 values, but model "small" has hidden 64`})
}

// checkErr reports err unless it is nil where want is empty, or holds
// every string of want.
func checkErr(t *testing.T, name string, err error, want []string) {
	t.Helper()
	switch {
	case len(want) == 0 && err != nil:
		t.Errorf("%s: %v", name, err)
	case len(want) > 0 && err == nil:
		t.Errorf("%s: New accepted the router", name)
	}
	for _, w := range want {
		if err != nil && !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v\ndoes not say %q", name, err, w)
		}
	}
}

// withMeta writes algorithm's test router (hidden width 64) again with m
// as its metadata and returns the new file's path.
func withMeta(t *testing.T, algorithm string, m nn.RouterMeta) string {
	t.Helper()
	paths, err := WriteWeights(t.TempDir(), 64, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := nn.Load(paths[algorithm])
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
