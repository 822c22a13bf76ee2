package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxJSONBytes bounds the Hugging Face files read.
const maxJSONBytes = 256 << 20

// hfFile is the part of a Hugging Face tokenizer.json that encoding uses.
type hfFile struct {
	AddedTokens []struct {
		ID      int64  `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    *hfStep `json:"normalizer"`
	PreTokenizer  *hfStep `json:"pre_tokenizer"`
	PostProcessor *hfStep `json:"post_processor"`
	Model         struct {
		Type         string            `json:"type"`
		Vocab        map[string]int64  `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		ByteFallback bool              `json:"byte_fallback"`
		UnkToken     *string           `json:"unk_token"`
	} `json:"model"`
}

// hfStep is a normalizer, pre-tokenizer or post-processor: a type and its
// settings, possibly a sequence of further steps.
type hfStep struct {
	Type          string    `json:"type"`
	Normalizers   []*hfStep `json:"normalizers"`
	Pretokenizers []*hfStep `json:"pretokenizers"`
	Processors    []*hfStep `json:"processors"`
	Prepend       string    `json:"prepend"`
	Content       string    `json:"content"`
	Replacement   string    `json:"replacement"`
	PrependScheme string    `json:"prepend_scheme"`
	AddPrefix     *bool     `json:"add_prefix_space"`
	// IndividualDigits (Digits) splits every digit apart.
	IndividualDigits bool `json:"individual_digits"`
	Pattern          struct {
		String string `json:"String"`
		Regex  string `json:"Regex"`
	} `json:"pattern"`
	Single []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
}

// walk calls fn for s and each step of its sequences.
func (s *hfStep) walk(fn func(*hfStep)) {
	if s == nil {
		return
	}
	fn(s)
	for _, c := range s.Normalizers {
		c.walk(fn)
	}
	for _, c := range s.Pretokenizers {
		c.walk(fn)
	}
	for _, c := range s.Processors {
		c.walk(fn)
	}
}

// hfConfig is the part of tokenizer_config.json and
// generation_config.json that the tokenizer uses.
type hfConfig struct {
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	AddBOS       *bool           `json:"add_bos_token"`
	AddEOS       *bool           `json:"add_eos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
	EOSIDs       json.RawMessage `json:"eos_token_id"` // generation_config.json: an id or a list
}

// tokenText reads a special-token field: a string or {"content": ...}.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Content
	}
	return ""
}

// hfPaths returns the tokenizer.json path for path (the file or the
// folder holding it) and its folder.
func hfPaths(path string) (file, dir string) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "tokenizer.json"), path
	}
	return path, filepath.Dir(path)
}

// readJSON decodes a JSON file into v; a missing file with optional set
// leaves v as it is.
func readJSON(path string, optional bool, v any) error {
	st, err := os.Stat(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if st.Size() > maxJSONBytes {
		return fmt.Errorf("%w: %s is larger than %d bytes", ErrFormat, path, maxJSONBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	return nil
}

// OpenHF reads a Hugging Face tokenizer: path is a tokenizer.json file or
// the folder holding one. tokenizer_config.json (BOS, EOS, add_bos_token)
// and generation_config.json (the end-of-generation ids) beside it are
// read when present.
func OpenHF(path string) (*Tokenizer, error) {
	file, dir := hfPaths(path)
	var f hfFile
	if err := readJSON(file, false, &f); err != nil {
		return nil, err
	}
	var cfg, gen hfConfig
	if err := readJSON(filepath.Join(dir, "tokenizer_config.json"), true, &cfg); err != nil {
		return nil, err
	}
	if err := readJSON(filepath.Join(dir, "generation_config.json"), true, &gen); err != nil {
		return nil, err
	}
	t, err := fromHF(&f, &cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var ids []int64
	if json.Unmarshal(gen.EOSIDs, &ids) != nil {
		var one int64
		if json.Unmarshal(gen.EOSIDs, &one) == nil {
			ids = []int64{one}
		}
	}
	eog := make([]int32, 0, len(ids))
	for _, id := range ids {
		eog = append(eog, t.validID(id))
	}
	t.setEOG(eog...)
	return t, nil
}

// HFChatTemplate returns the chat template of the Hugging Face tokenizer
// at path (a tokenizer.json file or its folder): the chat_template of
// tokenizer_config.json beside it (the "default" one where it lists
// several), or chat_template.jinja; "" when there is none.
func HFChatTemplate(path string) (string, error) {
	_, dir := hfPaths(path)
	var cfg hfConfig
	if err := readJSON(filepath.Join(dir, "tokenizer_config.json"), true, &cfg); err != nil {
		return "", err
	}
	var s string
	if json.Unmarshal(cfg.ChatTemplate, &s) == nil && s != "" {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if json.Unmarshal(cfg.ChatTemplate, &named) == nil {
		for _, n := range named {
			if n.Name == "default" {
				return n.Template, nil
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	return string(b), nil
}

// fromHF builds a tokenizer from a parsed tokenizer.json: BPE over byte-level
// runes (a ByteLevel pre-tokenizer), or BPE over characters with byte
// fallback and U+2581 for spaces (SentencePiece-style), whose merge ranks
// become piece scores.
func fromHF(f *hfFile, cfg *hfConfig) (*Tokenizer, error) {
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("%w: model type %q is not supported (want BPE)", ErrFormat, f.Model.Type)
	}
	tokens, types, err := hfVocab(f)
	if err != nil {
		return nil, err
	}
	merges, err := hfMerges(f.Model.Merges)
	if err != nil {
		return nil, err
	}
	unk := int32(-1)
	if f.Model.UnkToken != nil {
		if id, ok := f.Model.Vocab[*f.Model.UnkToken]; ok {
			unk, types[id] = int32(id), TypeUnknown
		}
	}
	var byteLevel, metaspace, prepend, nfc, digits bool
	pattern := ""
	for _, s := range []*hfStep{f.Normalizer, f.PreTokenizer} {
		s.walk(func(s *hfStep) {
			switch s.Type {
			case "ByteLevel":
				byteLevel = true
			case "Split":
				pattern += s.Pattern.Regex
			case "NFC":
				nfc = true
			case "Digits":
				digits = s.IndividualDigits
			case "Prepend":
				prepend = prepend || s.Prepend == spaceSymbol
			case "Replace":
				metaspace = metaspace || s.Content == spaceSymbol
			case "Metaspace":
				metaspace = true
				prepend = prepend || s.PrependScheme != "never" && (s.AddPrefix == nil || *s.AddPrefix)
			}
		})
	}
	var t *Tokenizer
	switch {
	case byteLevel:
		if t, err = newTokenizer(BPE, tokens, nil, types); err != nil {
			return nil, err
		}
		t.setMerges(merges)
		t.pre = hfPre(pattern, digits)
	case metaspace || f.Model.ByteFallback:
		for i, s := range tokens {
			if types[i] == TypeNormal && len(s) == 6 && strings.HasPrefix(s, "<0x") && s[5] == '>' {
				types[i] = TypeByte
			}
		}
		if t, err = newTokenizer(SPM, tokens, mergeScores(tokens, merges), types); err != nil {
			return nil, err
		}
		t.AddSpacePrefix = prepend
		if !f.Model.ByteFallback {
			for i := range t.bytes {
				t.bytes[i] = -1
			}
		}
	default:
		return nil, fmt.Errorf("%w: BPE without a ByteLevel pre-tokenizer, byte fallback or U+2581 spaces is not supported", ErrFormat)
	}
	t.nfc, t.UNK = nfc, unk
	t.hfSpecials(f, cfg)
	return t, nil
}

// hfSpecials sets BOS, EOS and whether Encode adds them: from
// tokenizer_config.json when it says, else from the post-processor's
// template (a leading special token is BOS).
func (t *Tokenizer) hfSpecials(f *hfFile, cfg *hfConfig) {
	lookup := func(raw json.RawMessage) int32 {
		if id, ok := t.index[tokenText(raw)]; ok && tokenText(raw) != "" {
			return id
		}
		return -1
	}
	t.BOS, t.EOS = lookup(cfg.BOS), lookup(cfg.EOS)
	var lead int32 = -1
	f.PostProcessor.walk(func(s *hfStep) {
		if lead < 0 && len(s.Single) > 0 && s.Single[0].SpecialToken != nil {
			if id, ok := t.index[s.Single[0].SpecialToken.ID]; ok {
				lead = id
			}
		}
	})
	if t.BOS < 0 {
		t.BOS = lead
	}
	t.AddBOS = lead >= 0 && lead == t.BOS
	if cfg.AddBOS != nil {
		t.AddBOS = *cfg.AddBOS && t.BOS >= 0
	}
	if cfg.AddEOS != nil {
		t.AddEOS = *cfg.AddEOS && t.EOS >= 0
	}
}

// hfVocab lays out the vocabulary and the added tokens by id: added
// tokens marked special are control tokens, the others user-defined. Ids
// no entry names are unused tokens with empty text.
func hfVocab(f *hfFile) ([]string, []int32, error) {
	n := int64(0)
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	if named := int64(len(f.Model.Vocab) + len(f.AddedTokens)); n == 0 || n > 1<<24 || n > 2*named+256 {
		return nil, nil, fmt.Errorf("%w: ids up to %d for %d tokens", ErrFormat, n-1, named)
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	for i := range types {
		types[i] = TypeUnused
	}
	for s, id := range f.Model.Vocab {
		if id < 0 {
			return nil, nil, fmt.Errorf("%w: token %q has id %d", ErrFormat, s, id)
		}
		tokens[id], types[id] = s, TypeNormal
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return nil, nil, fmt.Errorf("%w: added token %q has id %d", ErrFormat, a.Content, a.ID)
		}
		tokens[a.ID], types[a.ID] = a.Content, TypeUserDefined
		if a.Special {
			types[a.ID] = TypeControl
		}
	}
	return tokens, types, nil
}

// hfMerges reads merges as "a b" strings or ["a", "b"] pairs.
func hfMerges(raw []json.RawMessage) ([]string, error) {
	out := make([]string, len(raw))
	for i, m := range raw {
		var s string
		if json.Unmarshal(m, &s) == nil {
			out[i] = s
			continue
		}
		var pair []string
		if json.Unmarshal(m, &pair) != nil || len(pair) != 2 {
			return nil, fmt.Errorf("%w: merge %d is %s", ErrFormat, i, m)
		}
		out[i] = pair[0] + " " + pair[1]
	}
	return out, nil
}

// mergeScores gives each token the score -rank of the first merge that
// forms it, so that merging the best-scoring piece first follows the merge
// order; tokens no merge forms score below every merged one.
func mergeScores(tokens []string, merges []string) []float32 {
	index := make(map[string]int, len(tokens))
	for i, s := range tokens {
		if _, dup := index[s]; !dup {
			index[s] = i
		}
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(len(merges) + 1)
	}
	for r := len(merges) - 1; r >= 0; r-- {
		a, b, ok := strings.Cut(merges[r], " ")
		if !ok {
			continue
		}
		if id, ok := index[a+b]; ok {
			scores[id] = -float32(r)
		}
	}
	return scores
}

// hfPre picks the pre-tokenization pattern a Split regex spells (GPT-2's
// when there is none, with a Digits step splitting single digits first).
func hfPre(pattern string, digits bool) preKind {
	switch {
	case pattern == "" && digits:
		return preDigits
	case strings.Contains(pattern, `\p{N}{1,3}`):
		return preLlama3
	case strings.Contains(pattern, `[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}`):
		return preQwen2
	}
	return preGPT2
}

// padTo appends unused tokens without text up to n ids.
func (t *Tokenizer) padTo(n int) {
	for len(t.tokens) < n {
		t.tokens = append(t.tokens, "")
		t.scores = append(t.scores, 0)
		t.types = append(t.types, TypeUnused)
	}
}
