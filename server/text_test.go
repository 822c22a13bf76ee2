package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/server/chat"
)

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// byteText is a text model whose ids are bytes, for detok tests.
func byteText() *textModel {
	return &textModel{
		encode: func(s string) []int32 {
			out := make([]int32, len(s))
			for i := range len(s) {
				out[i] = int32(s[i])
			}
			return out
		},
		piece: func(dst []byte, id int32) []byte { return append(dst, byte(id)) },
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
