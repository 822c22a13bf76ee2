package loader

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

// TestLoadProgress: a cpu engine opened with a context carrying a
// LoadProgress tells it, under the model's name, the bytes of its GGUF
// file read in, up to the whole file; one opened without it is not
// affected.
func TestLoadProgress(t *testing.T) {
	path := filepath.Join(testmodels.Dir(t), "stories260K.gguf")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		model       string
		done, total int64
	}
	var calls []call
	ctx := WithLoadProgress(context.Background(), func(model string, done, total int64) {
		calls = append(calls, call{model, done, total})
	})
	m := config.Model{Name: "stories", Engine: KindCPU, Path: path, Threads: 1}
	e, err := Builtin().OpenEngine(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if len(calls) == 0 {
		t.Fatal("no progress")
	}
	last := calls[len(calls)-1]
	if last.model != "stories" || last.done != last.total || (last.total != st.Size() && last.total != 2*st.Size()) {
		t.Fatalf("progress %+v: want it to end at the whole file of %d bytes, for model stories", calls, st.Size())
	}
	calls = nil
	e2, err := Builtin().OpenEngine(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if len(calls) != 0 {
		t.Fatalf("a context without progress reported %+v", calls)
	}
}
