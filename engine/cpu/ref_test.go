package cpu

import (
	"slices"
	"testing"
)

func TestGreedyReference(t *testing.T) {
	for _, tc := range []struct {
		file string
		ref  []int32
	}{
		{"stories260K.gguf", refStories},
		{"stories260K.bin", refStories},
		{"llama2xs-model.bin", refLlama2xs},
	} {
		t.Run(tc.file, func(t *testing.T) {
			e := openModel(t, tc.file, Options{})
			got := greedy(t, e, 1, []int32{1}, len(tc.ref))
			if !slices.Equal(got, tc.ref) {
				t.Fatalf("greedy ids differ\n got %v\nwant %v", got, tc.ref)
			}
		})
	}
}
