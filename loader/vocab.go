package loader

import (
	"context"
	"errors"
	"fmt"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// Vocabulary is what the models of one deployment share: one vocabulary,
// so that any of them can continue a sequence another began.
type Vocabulary struct {
	// Tokenizer encodes text for all of them (nil when no model has text:
	// simulated models).
	Tokenizer *tokenizer.Tokenizer
	// Size is the number of token ids.
	Size int
	// BOS is the first model's beginning-of-sequence token (-1: none).
	BOS int32
	// ContextLength is the shortest context of the models.
	ContextLength int
}

// SharedVocabulary opens each model in turn (one at a time, each closed
// before the next opens) and checks that they share one vocabulary: the
// same number of tokens and, for every two models with tokenizers, the same
// token texts.
func (ks Kinds) SharedVocabulary(ctx context.Context, ms []config.Model) (Vocabulary, error) {
	if len(ms) == 0 {
		return Vocabulary{}, errors.New("no models")
	}
	var v Vocabulary
	from := "" // the model whose tokenizer v holds
	for i, m := range ms {
		o, err := ks.Open(ctx, m)
		if err != nil {
			return Vocabulary{}, err
		}
		info := o.Engine.Info()
		if err := o.Engine.Close(); err != nil {
			return Vocabulary{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		if i == 0 {
			v = Vocabulary{Size: info.VocabSize, BOS: info.BOS, ContextLength: info.ContextLength}
		}
		if info.VocabSize != v.Size {
			return Vocabulary{}, fmt.Errorf("models %s and %s have different vocabularies (%d and %d tokens)", ms[0].Name, m.Name, v.Size, info.VocabSize)
		}
		v.ContextLength = min(v.ContextLength, info.ContextLength)
		switch {
		case o.Tokenizer == nil:
		case v.Tokenizer == nil:
			v.Tokenizer, from = o.Tokenizer, m.Name
		default:
			if id, ok := differ(v.Tokenizer, o.Tokenizer); ok {
				return Vocabulary{}, fmt.Errorf("models %s and %s have different vocabularies: token %d is %q and %q",
					from, m.Name, id, v.Tokenizer.Token(id), o.Tokenizer.Token(id))
			}
		}
	}
	return v, nil
}

// differ returns the first token id whose text a and b disagree on (both
// have the same number of tokens).
func differ(a, b *tokenizer.Tokenizer) (int32, bool) {
	for id := range int32(a.VocabSize()) {
		if a.Token(id) != b.Token(id) {
			return id, true
		}
	}
	return 0, false
}
