package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	h, err := logHandler(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("request", "id", "x-1", "finish_reason", "stop")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "request" || line["id"] != "x-1" {
		t.Fatalf("json log line %q: %v", buf.String(), err)
	}
	buf.Reset()
	h, _ = logHandler(&buf, "warn", "text")
	slog.New(h).Info("hidden")
	slog.New(h).Warn("shown", "k", "v")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "msg=shown k=v") {
		t.Fatalf("text log %q", got)
	}
	for _, bad := range [][2]string{{"info", "xml"}, {"loud", "text"}} {
		if _, err := logHandler(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("logHandler(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
