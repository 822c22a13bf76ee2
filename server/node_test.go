package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
)

// openaiPackage is the npm package the end-to-end test installs.
const openaiPackage = "openai@6"

// TestOpenAINodeSDK drives a listening server with the official openai npm
// package (server/testdata/openai_e2e.mjs), installed into a temporary
// folder at test time.
func TestOpenAINodeSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the npm install")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: skipping the openai npm end-to-end test")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: skipping the openai npm end-to-end test")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save",
		"--loglevel=error", "--no-update-notifier", openaiPackage)
	install.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", openaiPackage, err, out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "openai_e2e.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "openai_e2e.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}

	e := start(t, func(c *config.Config) { c.APIKey = "sk-tokenrouter-test" })
	run := exec.CommandContext(ctx, node, path)
	chatHonoured, compHonoured := honouredFields(chatFields), honouredFields(completionFields)
	run.Env = append(os.Environ(), "TR_BASE_URL="+e.url+"/v1", "TR_API_KEY=sk-tokenrouter-test",
		"TR_CHAT_FIELDS="+strings.Join(chatHonoured, ","), "TR_COMPLETION_FIELDS="+strings.Join(compHonoured, ","))
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("node openai_e2e.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var summary struct {
		Models []string `json:"models"`
		Stream struct {
			ContentChunks int `json:"contentChunks"`
		} `json:"stream"`
		Error struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"error"`
		Fields struct {
			Chat        []string `json:"chat"`
			Completions []string `json:"completions"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &summary); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	if len(summary.Models) != 1 || summary.Models[0] != "r2r-random" || summary.Stream.ContentChunks != 16 || summary.Error.Status != 404 {
		t.Fatalf("summary %s", stdout.String())
	}
	if !slices.Equal(summary.Fields.Chat, chatHonoured) || !slices.Equal(summary.Fields.Completions, compHonoured) {
		t.Fatalf("the SDK exercised %v and %v, the honoured fields are %v and %v",
			summary.Fields.Chat, summary.Fields.Completions, chatHonoured, compHonoured)
	}
	t.Logf("openai SDK: %s", stdout.String())
	waitIdle(t, e.s)
}

// honouredFields lists the top-level honoured fields of t.
func honouredFields(t fieldTable) []string {
	var out []string
	for _, f := range t.fields {
		if f.use == honoured {
			out = append(out, f.name)
		}
	}
	return out
}
