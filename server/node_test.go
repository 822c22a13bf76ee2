package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
)

// openaiPackage is the npm package the end-to-end tests install.
const openaiPackage = "openai@6"

// openaiNPM returns node and a folder holding the openai npm package,
// installed there once per machine (a folder under the temporary directory
// that later runs reuse). It skips the test, with the reason, under -short,
// without node or npm, and when the npm registry cannot be reached; an
// install that fails with the registry reachable fails the test.
func openaiNPM(t *testing.T) (node, dir string) {
	t.Helper()
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
	dir = filepath.Join(os.TempDir(), "tokenrouter-npm-"+strings.NewReplacer("@", "-", "/", "-").Replace(openaiPackage))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err == nil {
		return node, dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := registryReachable(ctx, npm); err != nil {
		t.Skipf("skipping the openai npm end-to-end test: %v", err)
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "tokenrouter-npm-install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	install := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
		"--loglevel=error", "--no-update-notifier", openaiPackage)
	install.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", openaiPackage, err, out)
	}
	// A finished install moves into place whole; a concurrent one that
	// won the race leaves its copy there, which serves as well.
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); statErr != nil {
			t.Fatalf("placing the npm install: %v", err)
		}
	}
	return node, dir
}

// registryReachable asks the registry npm is configured with for the
// openai package's metadata, so that a machine without network access (or
// with a broken mirror) skips the npm tests instead of failing them.
func registryReachable(ctx context.Context, npm string) error {
	out, err := exec.CommandContext(ctx, npm, "config", "get", "registry").Output()
	if err != nil {
		return fmt.Errorf("npm config get registry: %w", err)
	}
	registry := strings.TrimSpace(string(out))
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, strings.TrimSuffix(registry, "/")+"/openai", nil)
	if err != nil {
		return fmt.Errorf("npm registry %q: %w", registry, err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("npm registry %s unreachable: %w", registry, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("npm registry %s answered %s", registry, resp.Status)
	}
	return nil
}

// nodeScript copies testdata/name beside the npm install in dir (so that
// node resolves the openai package) and returns its path.
func nodeScript(t *testing.T, dir, name string) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRegistryUnreachableSkips checks the reason the npm tests skip with
// when the registry cannot be reached: npm pointed at a closed port.
func TestRegistryUnreachableSkips(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()
	t.Setenv("npm_config_registry", closed)
	err = registryReachable(context.Background(), npm)
	if err == nil || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("registryReachable with the registry at a closed port = %v, want an error naming it unreachable", err)
	}
}

// TestOpenAINodeSDK drives a listening server with the official openai npm
// package (server/testdata/openai_e2e.mjs), installed into a temporary
// folder at test time.
func TestOpenAINodeSDK(t *testing.T) {
	node, dir := openaiNPM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := nodeScript(t, dir, "openai_e2e.mjs")

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
