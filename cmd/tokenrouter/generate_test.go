package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

func modelsDir(t testing.TB) string { return testmodels.Dir(t) }

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

var refFirst20 = []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337}

func TestGenerateJSON(t *testing.T) {
	dir := modelsDir(t)
	for _, args := range [][]string{
		{"--model", filepath.Join(dir, "stories260K.gguf")},
		{"--model", "slm=" + filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin")},
	} {
		out, err := runCmd(t, append([]string{"generate", "--prompt", "", "--max-tokens", "20", "--temperature", "0", "--format", "json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var res generateResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if !slices.Equal(res.PromptIDs, []int32{1}) || !slices.Equal(res.OutputIDs, refFirst20) || res.TokensPerSecond <= 0 {
			t.Fatalf("result %+v", res)
		}
		if !strings.HasPrefix(res.Text, " Once upon a time, there was a little girl named Lily.") {
			t.Fatalf("text %q", res.Text)
		}
	}
	out, err := runCmd(t, "generate", "--model", filepath.Join(dir, "stories260K.gguf"), "--prompt", "Once upon a time", "--max-tokens", "5", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res generateResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.PromptIDs, []int32{1, 403, 407, 261, 378}) || !slices.Equal(res.OutputIDs, []int32{432, 383, 286, 261, 376}) {
		t.Fatalf("prompted result %+v", res)
	}
}

func TestGenerateTextAndErrors(t *testing.T) {
	dir := modelsDir(t)
	out, err := runCmd(t, "generate", "--model", filepath.Join(dir, "stories260K.gguf"), "--max-tokens", "8", "--temperature", "0.8", "--top-k", "40", "--top-p", "0.9", "--seed", "3")
	if err != nil || len(strings.TrimSpace(out)) == 0 {
		t.Fatalf("text output %q, %v", out, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", filepath.Join(dir, "stories260K.bin")}, "needs tokenizer"},
		{[]string{"generate", "--model", filepath.Join(dir, "stories260K.gguf"), "--format", "xml"}, "--format"},
		{[]string{"generate", "--model", filepath.Join(dir, "nonexistent.gguf")}, "no such file"},
	} {
		if _, err := runCmd(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to mention %q", c.args, err, c.want)
		}
	}
}

func TestParseModelSpec(t *testing.T) {
	for in, want := range map[string]modelSpec{
		"model.gguf":        {path: "model.gguf"},
		"slm=/m/a.gguf":     {name: "slm", path: "/m/a.gguf"},
		"/dir/x=y.gguf":     {path: "/dir/x=y.gguf"},
		"llm=../m/a=b.gguf": {name: "llm", path: "../m/a=b.gguf"},
		"=a.gguf":           {path: "=a.gguf"},
	} {
		if got := parseModelSpec(in); got != want {
			t.Errorf("%q: %+v, want %+v", in, got, want)
		}
	}
}
