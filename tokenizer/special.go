package tokenizer

import "strings"

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
	specials := t.specialTexts()
	for len(text) > 0 {
		at, id, n := -1, int32(-1), 0
		for _, s := range specials {
			i := strings.Index(text, s.text)
			if i >= 0 && (at < 0 || i < at || i == at && len(s.text) > n) {
				at, id, n = i, s.id, len(s.text)
			}
		}
		if at < 0 {
			out = t.encodeFragment(out, text)
			break
		}
		if at > 0 {
			out = t.encodeFragment(out, text[:at])
		}
		out = append(out, id)
		text = text[at+n:]
	}
	if addSpecial && t.AddEOS {
		out = append(out, t.EOS)
	}
	return out
}

func (t *Tokenizer) encodeFragment(out []int32, text string) []int32 {
	if t.kind == SPM {
		return t.encodeSPM(out, text)
	}
	return t.encodeBPE(out, text)
}

type special struct {
	text string
	id   int32
}

// specialTexts lists the control and user-defined tokens with non-empty text.
func (t *Tokenizer) specialTexts() []special {
	var out []special
	for i, typ := range t.types {
		if (typ == TypeControl || typ == TypeUserDefined) && t.tokens[i] != "" {
			out = append(out, special{t.tokens[i], int32(i)})
		}
	}
	return out
}
