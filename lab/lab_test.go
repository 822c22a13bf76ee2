package lab

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/loader"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tinyPair describes the real tiny pair on the cpu engine: llama2xs and
// stories260K, which share the tok512 vocabulary.
func tinyPair(t *testing.T) []config.Model {
	dir := testmodels.Dir(t)
	return []config.Model{
		{Name: "slm", Engine: loader.KindCPU, Path: filepath.Join(dir, "llama2xs-model.bin"), Tokenizer: filepath.Join(dir, "tok512.bin")},
		{Name: "llm", Engine: loader.KindCPU, Path: filepath.Join(dir, "stories260K.gguf")},
	}
}
