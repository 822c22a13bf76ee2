package layers

import (
	"os/exec"
	"strings"
	"testing"
)

// Module is the module path.
const Module = "github.com/tokenrouter/tokenrouter"

// Level returns the layer of a package of the module (its path inside the
// module, "deploy/routetest"): a package may import only packages of its
// own layer or below. A sub-package is in its parent's layer unless it is
// listed itself.
func Level(pkg string) (int, bool) {
	levels := map[string]int{
		// Concepts with no dependency on the runtime.
		"engine": 0, "stream": 0, "sched": 0, "steptime": 0, "gguf": 0, "llama2c": 0, "internal": 0, "constrain": 0,
		// Model files built into the binary (models/tiny).
		"models": 0,
		// Formats (chat templates among them), engines, the algorithm
		// interface, the throughput model.
		"tokenizer": 1, "chat": 1, "engine/sim": 1, "engine/cpu": 1, "route": 1, "perfmodel": 1,
		// Algorithms, the bus, the sub-server loop, the configuration.
		"route/builtin": 2, "route/citer": 2, "route/colm": 2, "route/ensemble": 2, "route/nn": 2, "route/querylevel": 2,
		"route/r2r": 2, "route/r2rrandom": 2, "route/rstitch": 2, "route/single": 2, "route/speculative": 2,
		"bus": 2, "subserver": 2, "config": 2, "internal/faults": 2,
		// The runtime of one deployment, its tuner, its baselines, the
		// composition root.
		"autotune": 3, "deploy": 3, "baseline": 3, "loader": 3, "system": 3,
		// What drives the runtime (bench; lab, which checks the throughput
		// model against what bench measures), and the web console that
		// shows it.
		"cluster": 4, "bench": 4, "lab": 4, "eval": 4, "server": 4, "console": 4,
		"routertrain": 4, "termchat": 4,
		// The binary.
		"cmd": 5,
	}
	for p := pkg; p != "." && p != ""; p = parent(p) {
		if l, ok := levels[p]; ok {
			return l, true
		}
	}
	return 0, false
}

func parent(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return ""
}

// TestNoUpwardImport lists every package of the module with its imports
// (tests excluded, as `go list -deps` sees them) and checks that none
// imports a package of a higher layer.
func TestNoUpwardImport(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, Module+"/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		from := strings.TrimPrefix(f[0], Module+"/")
		lf, ok := Level(from)
		if !ok {
			t.Errorf("package %s has no layer: add it to Level", from)
			continue
		}
		for _, imp := range f[1:] {
			to, ok := strings.CutPrefix(imp, Module+"/")
			if !ok {
				continue
			}
			lt, _ := Level(to)
			checked++
			if lt > lf {
				t.Errorf("%s (layer %d) imports %s (layer %d)", from, lf, to, lt)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d imports checked:\n%s", checked, out)
	}
}

func TestLevel(t *testing.T) {
	for pkg, want := range map[string]int{"deploy/routetest": 3, "route/r2rrandom": 2, "route": 1, "engine/cpu/kernels": 1, "cmd/tokenrouter": 5} {
		if got, ok := Level(pkg); !ok || got != want {
			t.Errorf("Level(%q) = %d, %v; want %d", pkg, got, ok, want)
		}
	}
	if _, ok := Level("nowhere"); ok {
		t.Error("an unknown package has a layer")
	}
}
