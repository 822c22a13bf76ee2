package server

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tokenrouter/tokenrouter/chat"
)

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// byteText is a text model whose ids are bytes, for detok tests.
func byteText() *textModel {
	enc := func(s string) []int32 {
		out := make([]int32, len(s))
		for i := range len(s) {
			out[i] = int32(s[i])
		}
		return out
	}
	return &textModel{
		encode:  enc,
		content: enc,
		piece:   func(dst []byte, id int32) []byte { return append(dst, byte(id)) },
		special: func(name string) (int32, bool) {
			if name == "<|im_start|>" {
				return 300, true
			}
			return 0, false
		},
		bos: 1, addBOS: true,
	}
}

func TestDetokHoldsSplitCharacters(t *testing.T) {
	d := detok{t: byteText()}
	var out []string
	for _, b := range []byte("aé€😀z") {
		out = append(out, d.add(int32(b)))
	}
	if got := strings.Join(out, ""); got != "aé€😀z" {
		t.Fatalf("got %q", got)
	}
	// No piece ever holds half a character.
	for _, p := range out {
		if !strings.ContainsRune(p, '\uFFFD') && !jsonRoundTrip(p) {
			t.Fatalf("piece %q is not valid UTF-8", p)
		}
	}
	d.add(0xe2) // an unfinished character at the end
	if got := d.flush(); got != "\uFFFD" {
		t.Fatalf("flush = %q", got)
	}
}

func jsonRoundTrip(s string) bool {
	var back string
	return json.Unmarshal([]byte(jsonOf(s)), &back) == nil && back == s
}

func TestDetokStripsDummyPrefix(t *testing.T) {
	tm := byteText()
	tm.stripFirstSpace = true
	d := detok{t: tm}
	if got := d.add(' ') + d.add('a') + d.add(' ') + d.add('b'); got != "a b" {
		t.Fatalf("got %q", got)
	}
}

func TestStopper(t *testing.T) {
	s := newStopper([]string{"END", "\n\n"})
	var out strings.Builder
	hit := false
	for _, p := range []string{"hello E", "N", "and more", " E", "ND tail"} {
		o, h := s.add(p)
		out.WriteString(o)
		if h {
			hit = true
			break
		}
	}
	if !hit || out.String() != "hello ENand more " {
		t.Fatalf("got %q hit %v", out.String(), hit)
	}
	s = newStopper(nil)
	if o, h := s.add("anything END"); o != "anything END" || h {
		t.Fatal("no stops: text passes through")
	}
	s = newStopper([]string{"xyz"})
	o1, _ := s.add("abcxy")
	o2 := s.flush()
	if o1+o2 != "abcxy" {
		t.Fatalf("held text lost: %q + %q", o1, o2)
	}
}

func TestEncodeChatUsesSpecialIDs(t *testing.T) {
	tm := byteText()
	ids := tm.encodeChat(chat.ChatML.Render([]chat.Message{{Role: "user", Content: "hi"}}))
	if ids[0] != 1 || ids[1] != 300 {
		t.Fatalf("BOS then <|im_start|> as one id: %v", ids[:4])
	}
	// <|im_end|> is missing from this vocabulary: it is encoded as text.
	if !strings.Contains(string(bytesOf(ids)), "<|im_end|>") {
		t.Fatalf("%v", ids)
	}
}

func bytesOf(ids []int32) []byte {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id < 256 {
			b = append(b, byte(id))
		}
	}
	return b
}

// TestStopperLongStopReleasesText: a long stop string holds back only the
// text that could still begin it, not its length.
func TestStopperLongStopReleasesText(t *testing.T) {
	s := newStopper([]string{strings.Repeat("x", 1000)})
	if o, h := s.add("Once upon a time"); o != "Once upon a time" || h {
		t.Fatalf("got %q, %v: want the text at once", o, h)
	}
	if o, _ := s.add(" xx"); o != " " {
		t.Fatalf("got %q: want only the possible start of the stop held", o)
	}
	if o, _ := s.add("y"); o != "xxy" {
		t.Fatalf("got %q: want the held text once it cannot start the stop", o)
	}
}

// naiveHold is the reference for what a stopper holds: the longest end of
// text that is a proper beginning of a stop.
func naiveHold(text string, stops []string) int {
	hold := 0
	for _, x := range stops {
		for k := min(len(x)-1, len(text)); k > hold; k-- {
			if strings.HasSuffix(text, x[:k]) {
				hold = k
				break
			}
		}
	}
	return hold
}

// FuzzStopper compares the stopper with the reference: text is cut into
// pieces; after each piece the released text is everything before the
// first stop, less exactly the held end, and a stop ends the output.
func FuzzStopper(f *testing.F) {
	f.Add("hello END world", "END", "\n\n", uint8(3))
	f.Add("aaaaab aab", "aab", "ab", uint8(1))
	f.Add("abababac", "ababac", "", uint8(2))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, step uint8) {
		if len(stop1) > 64 || len(stop2) > 64 || len(text) > 512 ||
			!utf8.ValidString(text) || !utf8.ValidString(stop1) || !utf8.ValidString(stop2) {
			return // the text a stopper sees is valid UTF-8, as JSON strings are
		}
		stops := []string{stop1, stop2}
		var nonEmpty []string
		for _, x := range stops {
			if x != "" {
				nonEmpty = append(nonEmpty, x)
			}
		}
		end, found := len(text), false
		for _, x := range nonEmpty {
			if i := strings.Index(text, x); i >= 0 && i < end {
				end, found = i, true
			}
		}
		s := newStopper(stops)
		n := int(step%16) + 1
		var out strings.Builder
		for i := 0; i < len(text); i += n {
			seen := text[:min(i+n, len(text))]
			o, hit := s.add(text[i:min(i+n, len(text))])
			out.WriteString(o)
			if hit {
				if !found || out.String() != text[:end] {
					t.Fatalf("stop reported: released %q, want %q (found %v)", out.String(), text[:end], found)
				}
				return
			}
			want := seen[:len(seen)-naiveHold(seen, nonEmpty)]
			if !strings.HasPrefix(want, out.String()) || len(want)-out.Len() > utf8.UTFMax {
				t.Fatalf("after %q: released %q, want %q", seen, out.String(), want)
			}
		}
		out.WriteString(s.flush())
		if found || out.String() != text {
			t.Fatalf("end: released %q (stop found %v at %d)", out.String(), found, end)
		}
	})
}
