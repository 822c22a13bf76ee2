package cpubench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

func TestRunReportsEveryFigure(t *testing.T) {
	path := filepath.Join(testmodels.Dir(t), "stories260K.gguf")
	rep, err := Run(context.Background(), Options{
		Files: []string{path}, Threads: []int{1, 2}, Prompt: 16, Decode: 4, Seqs: []int{4}, Repeat: 1,
		BandwidthBytes: 64 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Bandwidth[1] <= 0 || rep.Bandwidth[2] <= 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r.DecodeTokS <= 0 || r.PromptTokS <= 0 || len(r.Aggregate) != 1 || r.Aggregate[0].TokS <= 0 {
			t.Fatalf("result %+v", r)
		}
		// stories260K: 5 layers of 64×64 (q, o), 2 of 32×64 (k, v), 3 of
		// 172×64 (gate, up, down) and the 512×64 classifier, all F32
		want := int64(4 * (5*(2*64*64+2*32*64+3*172*64) + 512*64))
		if r.WeightBytes != want {
			t.Fatalf("weight bytes per token %d, want %d", r.WeightBytes, want)
		}
		if r.BoundTokS <= 0 || r.PeakRSS <= 0 || r.FileBytes <= 0 || r.DecodeBandwidth <= 0 || r.OfBound <= 0 || r.Speedup <= 0 {
			t.Fatalf("result %+v", r)
		}
		if r.Threads == 1 && r.Speedup != 1 {
			t.Fatalf("speed-up of the first thread count over itself: %v", r.Speedup)
		}
		// the bound is the paired bandwidth over the bytes per token
		if got := r.DecodeBandwidth * 1e9 / float64(r.WeightBytes); math.Abs(got-r.BoundTokS) > 1e-9*got {
			t.Fatalf("bound %v, want %v", r.BoundTokS, got)
		}
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "stories260K.gguf") || !strings.Contains(text.String(), "GB/s") {
		t.Fatalf("text report:\n%s", text.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

func TestReadSumAddsEveryWord(t *testing.T) {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i * 7)
	}
	if got, want := readSum(b), readSumGeneric(b); got != want {
		t.Fatalf("readSum %d, generic %d", got, want)
	}
}
