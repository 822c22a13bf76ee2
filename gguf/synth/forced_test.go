package synth

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestWriteForcedRefuses(t *testing.T) {
	ok := Forced{Tokens: []string{"a", "b", "ab"}, Types: []int32{1, 1, 1}, Merges: []string{"a b"}, BOS: -1, EOS: 1, Chain: []int32{0, 1}}
	if err := WriteForced(context.Background(), io.Discard, ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*Forced)
		want string
	}{
		{func(f *Forced) { f.Chain = nil }, "needs tokens"},
		{func(f *Forced) { f.Merges = nil }, "needs tokens"},
		{func(f *Forced) { f.Types = f.Types[:1] }, "needs tokens"},
		{func(f *Forced) { f.Chain = []int32{0, 3} }, "outside the vocabulary"},
		{func(f *Forced) { f.Chain = []int32{1, 1} }, "repeats"},
	} {
		f := ok
		c.edit(&f)
		if err := WriteForced(context.Background(), io.Discard, f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}
