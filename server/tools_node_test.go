package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
)

// TestOpenAINodeSDKTools drives tool calling with the official openai npm
// package (server/testdata/openai_tools.mjs): auto, required, named,
// parallel, streamed and a two-round loop on the tiny pair (routed and
// single) and on models that call, and malformed tools refused.
func TestOpenAINodeSDKTools(t *testing.T) {
	node, dir := openaiNPM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := nodeScript(t, dir, "openai_tools.mjs")
	e := toolServer(t, func(c *config.Config) { c.APIKey = "sk-node-tools" })
	run := exec.CommandContext(ctx, node, path)
	run.Env = append(os.Environ(), "TR_BASE_URL="+e.url+"/v1", "TR_API_KEY=sk-node-tools")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("node openai_tools.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var summary struct {
		Parallel []string `json:"parallel"`
		Tiny     map[string]struct {
			Call callOf `json:"call"`
		} `json:"tiny"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &summary); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	if len(summary.Parallel) != 2 || len(summary.Tiny) != 2 {
		t.Fatalf("summary %s", stdout.String())
	}
	for preset, r := range summary.Tiny {
		checkCalls(t, "node "+preset, []callOf{r.Call}, "get_weather")
	}
	t.Logf("openai SDK tools: %s", stdout.String())
	waitIdle(t, e.s)
}
