package routertrain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/colm"
)

// TestTrainEndToEnd runs Train from model files: a co-llm router and its
// figures are written, a second run writes the same bytes, and the router
// serves on the small model it was trained for and on no other.
func TestTrainEndToEnd(t *testing.T) {
	dir := testmodels.Dir(t)
	out := filepath.Join(t.TempDir(), "colm.safetensors")
	var epochs []int
	o := Options{
		SLM:     config.Model{Name: "stories260K", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.gguf"), Threads: 1},
		LLM:     config.Model{Name: "llama2xs", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Threads: 1},
		Prompts: []string{"Once upon a time", "The little dog", "Lily wanted to", "One day, a boy", "The sun was", "Tom saw a"},
		Collect: CollectOptions{MaxTokens: 40, TopK: 8, Batch: 4},
		Fit: FitOptions{Algorithm: CoLLM, Epochs: 10, Seed: 1, Target: Target{Share: -1, Recall: 0.8}, Progress: func(p Progress) {
			if p.EpochDone {
				epochs = append(epochs, p.Epoch)
			}
		}},
		Out: out, Plots: true,
	}
	rep, err := Train(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 4 || rep.Dataset.Len() == 0 || len(epochs) != len(rep.Result.Losses) || epochs[0] != 1 {
		t.Fatalf("files %v, %d positions, epochs reported %v of %d", rep.Files, rep.Dataset.Len(), epochs, len(rep.Result.Losses))
	}
	for _, f := range rep.Files[1:] {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("%s: not a PNG (%v)", f, err)
		}
	}
	if _, err := os.Stat(out + ".tmp"); err == nil {
		t.Fatal("the temporary file was left behind")
	}
	// A second run from the model files, same seed: the same bytes.
	again := o
	again.Out, again.Plots, again.Fit.Progress = filepath.Join(t.TempDir(), "again.safetensors"), false, nil
	if _, err := Train(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again.Out)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatal("two runs with the same seed wrote different routers")
	}
	m, err := loader.Builtin().OpenEngine(context.Background(), o.SLM)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	spec := route.Spec{Models: []string{"s", "l"}, Params: map[string]string{"weights": out}}
	spec.Infos = append(spec.Infos, m.Info(), m.Info())
	if _, err := colm.New(spec); err != nil {
		t.Fatalf("trained router does not load on its small model: %v", err)
	}
	other := m.Info()
	other.HiddenSize, other.VocabHash = 288, "0123456789abcdef"
	spec.Infos[0] = other
	if _, err := colm.New(spec); err == nil || !strings.Contains(err.Error(), "stories260K") {
		t.Fatalf("router served on another model: %v", err)
	}
}
