package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
)

func TestKVWarmBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	ms := []config.Model{{Name: "a", Engine: loader.KindCPU, Path: path}, {Name: "b", Engine: loader.KindCPU, Path: path},
		{Name: "s", Engine: loader.KindSim, Path: path}}
	for _, c := range []struct {
		mb        int
		stepsHere bool
		want      int64
	}{
		{1024, true, 12 << 20}, // twice the cpu files (3 + 3 MB), the sim model's not counted
		{8, true, 8 << 20},
		{0, true, 0},
		{1024, false, 0}, // only servers given by URL: nothing steps here
	} {
		got, err := kvWarmBytes(c.mb, ms, c.stepsHere)
		if err != nil || got != c.want {
			t.Errorf("kvWarmBytes(%d, stepsHere %v) = %d, %v; want %d", c.mb, c.stepsHere, got, err, c.want)
		}
	}
	if _, err := kvWarmBytes(-1, ms, false); err == nil {
		t.Error("kvWarmBytes(-1): no error")
	}
}
