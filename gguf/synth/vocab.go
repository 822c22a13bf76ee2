package synth

import (
	"slices"
	"strings"
)

// specials are the control tokens every synthetic vocabulary holds, named
// as ChatML models name them.
var specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// minVocab is the smallest vocabulary: the 256 byte tokens and the
// specials.
var minVocab = 256 + len(specials)

// Token types as GGUF numbers them.
const (
	typeNormal  = 1
	typeControl = 3
)

// chatTemplate is a ChatML template (tokenizer.chat_template).
const chatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// byteRune is GPT-2's printable stand-in for byte b in byte-level BPE:
// printable Latin-1 bytes stand for themselves, the others map to 256, 257,
// … in byte order.
func byteRune(b byte) rune {
	printable := func(c int) bool { return c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE }
	if printable(int(b)) {
		return rune(b)
	}
	n := 0
	for c := range int(b) {
		if !printable(c) {
			n++
		}
	}
	return rune(256 + n)
}

// vocab is a byte-level BPE vocabulary.
type vocab struct {
	tokens []string
	types  []int32
	merges []string
	// bos, eos are the ids of <|im_start|>… and <|im_end|>, pad that of
	// <|endoftext|>.
	bos, eos, pad uint32
}

// buildVocab makes n tokens: the 256 byte tokens, the specials and then
// the extra control tokens (first or last), and merged tokens of lowercase letters, shortest first, for each
// length those without then those with a leading space ("Ġ"): "ab" merges
// "a" "b", "Ġab" merges "Ġa" "b", so every merge joins two earlier tokens
// and text of lowercase words tokenises into pieces of several letters.
func buildVocab(n int, specialsFirst bool, extra ...string) vocab {
	var v vocab
	add := func(tok string, typ int32) {
		v.tokens = append(v.tokens, tok)
		v.types = append(v.types, typ)
	}
	addSpecials := func() {
		base := uint32(len(v.tokens))
		for _, s := range append(slices.Clone(specials), extra...) {
			add(s, typeControl)
		}
		v.pad, v.bos, v.eos = base, base+1, base+2
	}
	if specialsFirst {
		addSpecials()
	}
	for b := range 256 {
		add(string(byteRune(byte(b))), typeNormal)
	}
	room := n - len(v.tokens)
	if !specialsFirst {
		room -= len(specials) + len(extra)
	}
	space := string(byteRune(' '))
	word := make([]byte, 0, 8)
	for l := 1; len(v.merges) < room; l++ {
		count := 1
		for range l {
			count *= 26
		}
		for _, prefix := range []string{"", space} {
			for k := 0; k < count && len(v.merges) < room; k++ {
				word = word[:l]
				for i, r := l-1, k; i >= 0; i, r = i-1, r/26 {
					word[i] = byte('a' + r%26)
				}
				if prefix == "" && l == 1 {
					break // single letters are byte tokens
				}
				w := string(word)
				v.merges = append(v.merges, prefix+w[:l-1]+" "+w[l-1:])
				add(prefix+w, typeNormal)
			}
		}
	}
	if !specialsFirst {
		addSpecials()
	}
	return v
}

// check reports whether every merge joins two tokens into a third and all
// tokens are distinct (what BPE loaders require).
func (v vocab) check() bool {
	seen := make(map[string]bool, len(v.tokens))
	for _, t := range v.tokens {
		if seen[t] {
			return false
		}
		seen[t] = true
	}
	return !slices.ContainsFunc(v.merges, func(m string) bool {
		a, b, ok := strings.Cut(m, " ")
		return !ok || !seen[a] || !seen[b] || !seen[a+b]
	})
}
