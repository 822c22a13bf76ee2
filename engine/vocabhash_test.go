package engine_test

import (
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// The expected hashes are the first 8 bytes of SHA-256 over the byte
// strings written out by hand (computed outside Go).
func TestVocabHashKnownValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens []string
		want   string
	}{
		{"empty", nil, "e3b0c44298fc1c14"},                                   // sha256("")
		{"two", []string{"a", "bc"}, "ea1cc672b17a5c99"},                     // 01 'a' 02 'b' 'c'
		{"long", []string{strings.Repeat("x", 200), ""}, "fae0007d5da56c11"}, // c8 01 'x'×200 00
	} {
		if got := engine.VocabHash(c.tokens); got != c.want {
			t.Errorf("%s: VocabHash = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestVocabHashSeesBoundariesAndOrder(t *testing.T) {
	base := engine.VocabHash([]string{"a", "bc"})
	for _, other := range [][]string{
		{"ab", "c"},     // same bytes, other boundary
		{"bc", "a"},     // other order
		{"a", "bc", ""}, // one more (empty) token
		{"a", "b", "c"}, // split
		{"a", "bc\x00"}, // one more byte
	} {
		if engine.VocabHash(other) == base {
			t.Errorf("VocabHash(%q) equals VocabHash([a bc])", other)
		}
	}
}
