package tokenizer

import (
	"strings"
	"unicode"
)

// preKind selects the pre-tokenization pattern of a byte-level BPE vocabulary.
type preKind int

const (
	// preGPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	preGPT2 preKind = iota
	// preLlama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
	// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	preLlama3
	// preQwen2 is preLlama3 with single digits (\p{N}).
	preQwen2
	// preDigits splits out every digit (\p{N}) first, then applies
	// preGPT2 to the text between (SmolLM).
	preDigits
)

func preFor(name string) preKind {
	switch name {
	case "llama3", "llama-bpe", "llama-v3", "smaug-bpe", "dbrx":
		return preLlama3
	case "qwen2", "qwen35", "deepseek-r1-qwen":
		return preQwen2
	case "smollm":
		return preDigits
	}
	return preGPT2
}

func (t *Tokenizer) setMerges(merges []string) {
	t.merges = make(map[string]int, len(merges))
	for i, m := range merges {
		if _, dup := t.merges[m]; !dup {
			t.merges[m] = i
		}
	}
}

// byteToRune is GPT-2's reversible map from bytes to printable runes.
func byteToRune(b byte) rune {
	switch {
	case b >= '!' && b <= '~', b >= 0xA1 && b <= 0xAC, b >= 0xAE:
		return rune(b)
	}
	// The remaining bytes map to 256, 257, ... in byte order.
	n := 0
	for c := 0; c < int(b); c++ {
		cb := byte(c)
		if !(cb >= '!' && cb <= '~' || cb >= 0xA1 && cb <= 0xAC || cb >= 0xAE) {
			n++
		}
	}
	return rune(256 + n)
}

func unicodeToByte(r rune) (byte, bool) {
	switch {
	case r >= '!' && r <= '~', r >= 0xA1 && r <= 0xAC, r >= 0xAE && r <= 0xFF:
		return byte(r), true
	case r >= 256 && r < 256+68:
		n := int(r - 256)
		for c := 0; c < 256; c++ {
			cb := byte(c)
			if !(cb >= '!' && cb <= '~' || cb >= 0xA1 && cb <= 0xAC || cb >= 0xAE) {
				if n == 0 {
					return cb, true
				}
				n--
			}
		}
	}
	return 0, false
}

func (t *Tokenizer) encodeBPE(out []int32, text string) []int32 {
	for _, w := range preTokenize(t.pre, text) {
		var sb strings.Builder
		for i := 0; i < len(w); i++ {
			sb.WriteRune(byteToRune(w[i]))
		}
		out = t.bpeWord(out, sb.String())
	}
	return out
}

func (t *Tokenizer) bpeWord(out []int32, word string) []int32 {
	if id, ok := t.index[word]; ok {
		return append(out, id)
	}
	var syms []string
	for _, r := range word {
		syms = append(syms, string(r))
	}
	for len(syms) > 1 {
		best, bestRank := -1, int(^uint(0)>>1)
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.merges[syms[i]+" "+syms[i+1]]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	for _, s := range syms {
		if id, ok := t.index[s]; ok {
			out = append(out, id)
			continue
		}
		for _, r := range s {
			if id, ok := t.index[string(r)]; ok {
				out = append(out, id)
			} else if t.UNK >= 0 {
				out = append(out, t.UNK)
			}
		}
	}
	return out
}

func isL(r rune) bool { return unicode.IsLetter(r) }
func isN(r rune) bool { return unicode.IsNumber(r) }
func isS(r rune) bool { return unicode.IsSpace(r) }
func isNL(r rune) bool {
	return r == '\r' || r == '\n'
}
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

// preTokenize splits text into the words the pattern of kind matches.
func preTokenize(kind preKind, text string) []string {
	rs := []rune(text)
	// byte offsets of each rune, to slice text without re-encoding
	offs := make([]int, len(rs)+1)
	o := 0
	for i, r := range rs {
		offs[i] = o
		o += len(string(r))
	}
	offs[len(rs)] = o
	if o != len(text) { // invalid UTF-8: fall back to byte offsets via runes
		text = string(rs)
	}
	var words []string
	for i := 0; i < len(rs); {
		j := matchPre(kind, rs, i)
		if kind == preDigits {
			j = matchDigits(rs, i)
		}
		if j <= i {
			j = i + 1
		}
		words = append(words, text[offs[i]:offs[j]])
		i = j
	}
	return words
}

func run(rs []rune, i int, pred func(rune) bool) int {
	for i < len(rs) && pred(rs[i]) {
		i++
	}
	return i
}

func matchContraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return -1
	}
	lower := func(r rune) rune {
		if fold {
			return unicode.ToLower(r)
		}
		return r
	}
	c := lower(rs[i+1])
	switch c {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 < len(rs) {
		c2 := lower(rs[i+2])
		if c == 'r' && c2 == 'e' || c == 'v' && c2 == 'e' || c == 'l' && c2 == 'l' {
			return i + 3
		}
	}
	return -1
}

func matchPre(kind preKind, rs []rune, i int) int {
	n := len(rs)
	if kind == preGPT2 {
		if j := matchContraction(rs, i, false); j > 0 {
			return j
		}
		k := i
		if rs[k] == ' ' && k+1 < n {
			k++
		}
		switch {
		case isL(rs[k]):
			return run(rs, k, isL)
		case isN(rs[k]):
			return run(rs, k, isN)
		case isOther(rs[k]):
			return run(rs, k, isOther)
		}
		return matchSpaces(rs, i)
	}
	if j := matchContraction(rs, i, true); j > 0 {
		return j
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isNL(rs[i]) && !isL(rs[i]) && !isN(rs[i]) && i+1 < n && isL(rs[i+1]) {
		return run(rs, i+1, isL)
	}
	if isL(rs[i]) {
		return run(rs, i, isL)
	}
	// \p{N}{1,3} or \p{N}
	if isN(rs[i]) {
		maxDigits := 3
		if kind == preQwen2 {
			maxDigits = 1
		}
		j := i
		for j < n && j-i < maxDigits && isN(rs[j]) {
			j++
		}
		return j
	}
	// ?[^\s\p{L}\p{N}]+[\r\n]*
	k := i
	if rs[k] == ' ' && k+1 < n {
		k++
	}
	if isOther(rs[k]) {
		j := run(rs, k, isOther)
		return run(rs, j, isNL)
	}
	// \s*[\r\n]+
	end := run(rs, i, isS)
	for j := end - 1; j >= i; j-- {
		if isNL(rs[j]) {
			return j + 1
		}
	}
	return matchSpaces(rs, i)
}

// matchDigits matches one digit at i, or the GPT-2 pattern within the
// text before the next digit.
func matchDigits(rs []rune, i int) int {
	if isN(rs[i]) {
		return i + 1
	}
	end := i
	for end < len(rs) && !isN(rs[end]) {
		end++
	}
	return matchPre(preGPT2, rs[:end], i)
}

// matchSpaces matches \s+(?!\S)|\s+ at i.
func matchSpaces(rs []rune, i int) int {
	end := run(rs, i, isS)
	if end == i {
		return i + 1
	}
	if end < len(rs) && end-i >= 2 {
		return end - 1
	}
	return end
}
