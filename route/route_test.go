package route

import (
	"slices"
	"strings"
	"testing"
)

func TestIntsRoundTrip(t *testing.T) {
	for _, in := range []Ints{{}, {0}, {1, -1, 1 << 40, -(1 << 62), 7}} {
		var st State = &in
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var out Ints
		if err := out.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(in, out) {
			t.Fatalf("round trip %v -> %v", in, out)
		}
	}
	var x Ints
	for _, bad := range [][]byte{nil, {5, 1}, {1, 2, 3}, {0xff, 0xff, 0xff, 0xff, 0x7f}} {
		if err := x.UnmarshalBinary(bad); err == nil {
			t.Errorf("decoded %x without error", bad)
		}
	}
}

func FuzzIntsDecode(f *testing.F) {
	f.Add([]byte{2, 4, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Ints
		if s.UnmarshalBinary(b) != nil {
			return
		}
		enc, _ := s.MarshalBinary()
		var again Ints
		if err := again.UnmarshalBinary(enc); err != nil || !slices.Equal(s, again) {
			t.Fatalf("re-encode of %v failed: %v", s, err)
		}
	})
}

func TestCommitEnd(t *testing.T) {
	r := &Request{Tokens: []int32{1, 5, 6, 2, 7}, PromptLen: 2, Committed: 2, Params: Params{MaxTokens: 10}}
	if end, why := r.CommitEnd(2, nil); end != 3 || why != "stop" {
		t.Fatalf("eos: %d %q", end, why)
	}
	r.Params.IgnoreEOS = true
	if end, why := r.CommitEnd(2, nil); end != 5 || why != "" {
		t.Fatalf("ignore eos: %d %q", end, why)
	}
	r.Params.MaxTokens = 2
	if end, why := r.CommitEnd(2, nil); end != 4 || why != "length" {
		t.Fatalf("limit: %d %q", end, why)
	}
}

func TestRegistryAndSpec(t *testing.T) {
	r := NewRegistry()
	f := func(Spec) (Algorithm, error) { return nil, nil }
	if err := r.Register("a", f); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("a", f); err == nil {
		t.Fatal("duplicate accepted")
	}
	if _, err := r.New("zzz", Spec{}); err == nil || !strings.Contains(err.Error(), "have a") {
		t.Fatalf("unknown algorithm error %v", err)
	}
	s := Spec{Params: map[string]string{"p": "0.5", "k": "x"}}
	if v, err := s.Float("p", 0); err != nil || v != 0.5 {
		t.Fatal(v, err)
	}
	if v, err := s.Float("q", 0.25); err != nil || v != 0.25 {
		t.Fatal(v, err)
	}
	if _, err := s.Int("k", 0); err == nil {
		t.Fatal("non-integer accepted")
	}
}

func TestUniformIsDeterministicAndSpread(t *testing.T) {
	below := 0
	for i := range 10000 {
		u := Uniform(3, uint64(i), i%7)
		if u != Uniform(3, uint64(i), i%7) || u < 0 || u >= 1 {
			t.Fatal("not deterministic or out of range")
		}
		if u < 0.35 {
			below++
		}
	}
	if below < 3300 || below > 3700 {
		t.Fatalf("%d of 10000 below 0.35", below)
	}
}

func TestDrawFollowsSeedNotID(t *testing.T) {
	a := &Request{ID: 1, Params: Params{Seed: 42}}
	b := &Request{ID: 2, Params: Params{Seed: 42}}
	c := &Request{ID: 1}
	d := &Request{ID: 2}
	if a.Draw(7) != b.Draw(7) {
		t.Fatal("same seed, different requests: draws differ")
	}
	if c.Draw(7) == d.Draw(7) || a.Draw(7) == a.Draw(8) {
		t.Fatal("unseeded requests or different positions share draws")
	}
}

// TestCommitEndStops: stop tokens end the output before them, whatever
// IgnoreEOS says; a stop string ends it after the token that completes it,
// also when the string began in tokens committed earlier.
func TestCommitEndStops(t *testing.T) {
	text := func(id int32) []byte {
		return []byte(map[int32]string{10: "ab", 11: "c", 12: "STO", 13: "P!", 14: "x"}[id])
	}
	for _, c := range []struct {
		name      string
		tokens    []int32
		committed int
		p         Params
		end       int
		why       string
	}{
		{"stop id", []int32{1, 10, 11, 7, 14}, 1, Params{StopIDs: []int32{7}, IgnoreEOS: true}, 3, "stop"},
		{"no stop", []int32{1, 10, 11, 14}, 1, Params{StopIDs: []int32{7}, Stop: []string{"zz"}}, 4, ""},
		{"string in one token", []int32{1, 10, 11, 14}, 1, Params{Stop: []string{"bc"}}, 3, "stop"},
		{"string across tokens", []int32{1, 10, 12, 13, 14}, 1, Params{Stop: []string{"STOP"}}, 4, "stop"},
		{"string begun before the commit", []int32{1, 10, 12, 13, 14}, 3, Params{Stop: []string{"STOP"}}, 4, "stop"},
		{"string wholly committed before", []int32{1, 11, 10, 11, 14}, 4, Params{Stop: []string{"abc"}}, 5, ""},
		{"length first", []int32{1, 10, 11, 14}, 1, Params{MaxTokens: 1, Stop: []string{"x"}}, 2, "length"},
		{"id before string", []int32{1, 10, 7, 11}, 1, Params{StopIDs: []int32{7}, Stop: []string{"c"}}, 2, "stop"},
	} {
		r := &Request{Tokens: c.tokens, PromptLen: 1, Committed: c.committed, Params: c.p}
		if end, why := r.CommitEnd(2, text); end != c.end || why != c.why {
			t.Errorf("%s: CommitEnd = %d %q, want %d %q", c.name, end, why, c.end, c.why)
		}
	}
	r := &Request{Tokens: []int32{1, 10, 11}, PromptLen: 1, Committed: 1, Params: Params{Stop: []string{"bc"}}}
	if end, why := r.CommitEnd(2, nil); end != 3 || why != "" {
		t.Errorf("without token texts: %d %q, want the stop string left to the front end", end, why)
	}
}
