package simtok

import (
	"strings"
	"testing"
)

func TestRoundTripASCII(t *testing.T) {
	var tk Tokenizer
	in := "Hello, world!\n\tsecond line ~"
	ids := tk.Encode(in)
	if len(ids) != len(in) || ids[0] != ByteBase+'H' {
		t.Fatalf("Encode = %v", ids)
	}
	if got := tk.Decode(ids); got != in {
		t.Fatalf("Decode(Encode(%q)) = %q", in, got)
	}
}

func TestOutputIsReadableWords(t *testing.T) {
	var tk Tokenizer
	got := tk.Decode([]int32{BOS, 1000, 31999, 5000, EOS, ByteBase + 0x01, ByteBase + 0xff})
	fields := strings.Fields(got)
	if len(fields) != 5 {
		t.Fatalf("Decode = %q: want 5 words", got)
	}
	for _, f := range fields {
		if f != Word(1000) && !strings.ContainsFunc(f, func(r rune) bool { return r >= 'a' && r <= 'z' }) {
			t.Fatalf("word %q in %q is not a pseudo-word", f, got)
		}
	}
	if !strings.HasPrefix(got, " "+Word(1000)+" "+Word(31999)) {
		t.Fatalf("Decode = %q", got)
	}
	if Word(7) != Word(7) || tk.Decode([]int32{4242}) != tk.Decode([]int32{4242}) {
		t.Fatal("not deterministic")
	}
}

func TestWordsSpread(t *testing.T) {
	seen := map[string]bool{}
	for id := int32(259); id < 2259; id++ {
		seen[Word(id)] = true
	}
	if len(seen) < Words/2 {
		t.Fatalf("2000 ids use only %d of %d words", len(seen), Words)
	}
}
