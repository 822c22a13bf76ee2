package cpu

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"

	"github.com/tokenrouter/tokenrouter/engine"
)

func modelsDir(t testing.TB) string { return testmodels.Dir(t) }

func openModel(t testing.TB, name string, opts Options) *Engine {
	t.Helper()
	e, err := Open(filepath.Join(modelsDir(t), name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// greedy runs one sequence: extend with prompt, then decode n tokens.
func greedy(t testing.TB, e engine.Engine, seq engine.SeqID, prompt []int32, n int) []int32 {
	t.Helper()
	ctx := context.Background()
	out := make([]engine.Output, 1)
	in := []engine.Input{{Seq: seq, Tokens: prompt}}
	var got []int32
	for len(got) < n {
		if err := e.Step(ctx, in, out); err != nil {
			t.Fatal(err)
		}
		got = append(got, out[0].Token)
		in[0].Tokens = []int32{out[0].Token}
	}
	return got
}

var refStories = []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13, 438, 310, 439, 419, 357, 336, 432, 313, 438, 310, 432, 278, 316, 439, 419, 298, 414, 267, 265, 282, 295, 433, 426, 436, 317, 286, 296, 418, 269, 279, 292, 416, 439, 413, 409, 416, 327, 263}

var refLlama2xs = []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411}
