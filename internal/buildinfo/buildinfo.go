// Package buildinfo reports what the running binary was built from: the
// main module's version and the version-control revision the go command
// stamped into it (runtime/debug.ReadBuildInfo).
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what the binary knows about its own build. Fields the build did
// not record read "unknown".
type Info struct {
	// Version is the main module's version ("(devel)" for a build from a
	// work tree the go command could not version).
	Version string
	// Revision is the VCS revision, with "+dirty" when the work tree had
	// uncommitted changes.
	Revision string
	// Time is the revision's commit time (RFC 3339).
	Time string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", Revision: "unknown", Time: "unknown", GoVersion: "unknown"}
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo extracts Info from the go command's record.
func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Revision: "unknown", Time: "unknown", GoVersion: bi.GoVersion}
	if in.Version == "" {
		in.Version = "unknown"
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && in.Revision != "unknown" {
		in.Revision += "+dirty"
	}
	return in
}

// String is the one-line form --version prints.
func (i Info) String() string {
	return strings.Join([]string{i.Version, "revision " + i.Revision, "committed " + i.Time, i.GoVersion}, ", ")
}
