package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// EncodeSpecial tokenizes text like Encode but first splits out the texts
// of control and user-defined tokens (such as "<|im_start|>" or "</s>"),
// which become their own ids, as llama.cpp does with parse_special. In
// SentencePiece vocabularies each text fragment that follows a special token
// gets the dummy-prefix space again, as in llama.cpp.
func (t *Tokenizer) EncodeSpecial(text string, addSpecial bool) []int32 {
	var out []int32
	if addSpecial && t.AddBOS {
		out = append(out, t.BOS)
	}
	out = t.encodeSplit(out, text, t.special)
	if addSpecial && t.AddEOS {
		out = append(out, t.EOS)
	}
	return out
}

// EncodeContent tokenizes message text: user-defined tokens (added tokens
// that are not control tokens, such as Qwen3's <think>) become their ids,
// as Hugging Face tokenizers match them in any text, while the texts of
// control tokens stay plain text, so a user cannot write one.
func (t *Tokenizer) EncodeContent(text string) []int32 {
	return t.encodeSplit(nil, text, t.userDefined)
}

// ControlTexts lists the texts of the control tokens (BOS, EOS,
// <|im_start|>, ...), the tokens a chat template may write and message
// content may not.
func (t *Tokenizer) ControlTexts() []string {
	var out []string
	for _, s := range t.special {
		if t.types[s.id] == TypeControl {
			out = append(out, s.text)
		}
	}
	return out
}

// encodeSplit encodes text, turning each leftmost-longest occurrence of one
// of specials into its id and the fragments between into ordinary tokens.
func (t *Tokenizer) encodeSplit(out []int32, text string, specials []special) []int32 {
	for len(text) > 0 {
		at, id, n := -1, int32(-1), 0
		for _, s := range specials {
			i := strings.Index(text, s.text)
			if i >= 0 && (at < 0 || i < at || i == at && len(s.text) > n) {
				at, id, n = i, s.id, len(s.text)
			}
		}
		if at < 0 {
			return t.encodeFragment(out, text)
		}
		if at > 0 {
			out = t.encodeFragment(out, text[:at])
		}
		out = append(out, id)
		text = text[at+n:]
	}
	return out
}

// encodeFragment encodes text without special tokens, after the
// vocabulary's Unicode normalisation.
func (t *Tokenizer) encodeFragment(out []int32, text string) []int32 {
	if t.nfc {
		text = norm.NFC.String(text)
	}
	if t.kind == SPM {
		return t.encodeSPM(out, text)
	}
	return t.encodeBPE(out, text)
}

type special struct {
	text string
	id   int32
}

// indexSpecials lists the control and user-defined tokens with non-empty
// text.
func (t *Tokenizer) indexSpecials() {
	t.special, t.userDefined = nil, nil
	for i, typ := range t.types {
		if (typ == TypeControl || typ == TypeUserDefined) && t.tokens[i] != "" {
			t.special = append(t.special, special{t.tokens[i], int32(i)})
			if typ == TypeUserDefined {
				t.userDefined = append(t.userDefined, special{t.tokens[i], int32(i)})
			}
		}
	}
}

// eogTexts are token texts that end generation in the vocabularies that
// have them as control or user-defined tokens: end of turn, of message, of
// text in the common model families.
func eogTexts() []string {
	return []string{
		"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
		"<|endoftext|>", "</s>", "<|return|>", "<EOT>", "<|end\u2581of\u2581sentence|>",
	}
}

// setEOG fixes the end-of-generation set: EOS, the ids given (a file's
// end-of-turn and end-of-message tokens), and the control or user-defined
// tokens whose text eogTexts lists.
func (t *Tokenizer) setEOG(ids ...int32) {
	t.eog = nil
	add := func(id int32) {
		if id >= 0 && int(id) < len(t.tokens) && !t.IsEOG(id) {
			t.eog = append(t.eog, id)
		}
	}
	add(t.EOS)
	for _, id := range ids {
		add(id)
	}
	for _, s := range eogTexts() {
		if id, ok := t.index[s]; ok && (t.types[id] == TypeControl || t.types[id] == TypeUserDefined) {
			add(id)
		}
	}
}

// EOG returns the end-of-generation tokens the vocabulary declares: EOS,
// end of turn (<|eot_id|>, <end_of_turn>, <|im_end|>, <|end|>, ...) and
// end of text. A generation ends at any of them.
func (t *Tokenizer) EOG() []int32 { return append([]int32(nil), t.eog...) }

// IsEOG reports whether id ends generation.
func (t *Tokenizer) IsEOG(id int32) bool {
	for _, e := range t.eog {
		if e == id {
			return true
		}
	}
	return false
}
