package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261130120000-abcdef123456+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef1234567890"}, {Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo(bi)
	want := Info{Version: "v0.0.0-20261130120000-abcdef123456+dirty", Revision: "abcdef1234567890+dirty", Time: "2026-11-30T12:00:00Z", GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8"}); got.Version != "unknown" || got.Revision != "unknown" {
		t.Fatalf("unstamped build: %+v", got)
	}
}

func TestRead(t *testing.T) {
	if got := Read(); got.GoVersion == "" || got.Version == "" || got.Revision == "" {
		t.Fatalf("Read() = %+v: every field must be filled", got)
	}
}
