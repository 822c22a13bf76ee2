// Package simtok is the tokenizer of simulated models, which have no
// vocabulary of their own. It is deterministic and lossless for ASCII
// prompts and makes simulated output readable:
//
//   - Encode maps each byte b of the text to id 3+b (ids 0, 1 and 2 are
//     UNK, BOS and EOS, as in the sim engine).
//   - Decoding an id in 3..258 gives its byte back when that byte is
//     printable ASCII, a newline or a tab; every other id (the sim engine
//     draws from the whole vocabulary, so almost all output ids) decodes to
//     a space and a pseudo-word from a fixed list, chosen by the id.
//
// So a prompt round-trips, and a simulated answer reads as a stream of
// English words: " river quiet stone ...".
package simtok

// Special token ids, matching the sim engine.
const (
	UNK int32 = 0
	BOS int32 = 1
	EOS int32 = 2
	// ByteBase is the id of byte 0.
	ByteBase int32 = 3
)

// words is the fixed pseudo-word list.
var words = [...]string{
	"the", "of", "and", "to", "in", "is", "that", "it", "was", "for",
	"on", "are", "as", "with", "they", "at", "be", "this", "from", "have",
	"or", "by", "one", "had", "not", "but", "what", "all", "were", "when",
	"we", "there", "can", "an", "your", "which", "their", "said", "if", "do",
	"will", "each", "about", "how", "up", "out", "them", "then", "she", "many",
	"some", "so", "these", "would", "other", "into", "has", "more", "her", "two",
	"like", "him", "see", "time", "could", "no", "make", "than", "first", "been",
	"its", "who", "now", "people", "my", "made", "over", "did", "down", "only",
	"way", "find", "use", "may", "water", "long", "little", "very", "after", "words",
	"called", "just", "where", "most", "know", "river", "stone", "light", "quiet", "small",
	"large", "model", "token", "route", "fast", "slow", "bright", "cloud", "garden", "window",
	"morning", "evening", "story", "answer", "question", "simple", "careful", "steady", "road", "bridge",
	"forest", "mountain", "ocean", "city", "village", "letter", "number", "paper", "music", "color",
	"green", "blue", "red", "warm", "cold", "open", "close", "begin", "end", "turn",
	"walk", "read", "write", "think", "build", "carry", "follow", "gather", "listen", "learn",
	"friend", "family", "house", "school", "table", "chair", "door", "road", "field", "sky",
	"sun", "moon", "star", "rain", "snow", "wind", "fire", "earth", "tree", "flower",
	"bird", "fish", "horse", "dog", "cat", "apple", "bread", "honey", "salt", "tea",
	"again", "always", "never", "often", "soon", "today", "together", "almost", "enough", "perhaps",
	"because", "while", "before", "under", "between", "across", "along", "around", "behind", "beyond",
	"good", "new", "old", "great", "high", "young", "early", "late", "clear", "gentle",
	"kind", "wise", "brave", "calm", "curious", "patient", "honest", "happy", "ready", "certain",
	"idea", "plan", "path", "step", "sign", "voice", "hand", "heart", "mind", "name",
	"day", "night", "year", "world", "life", "work", "part", "place", "thing", "point",
	"shape", "sound", "line", "page", "word", "note", "song", "game", "map", "key",
	"still", "also", "here", "well", "even", "back", "much", "more", "less", "every",
}

// Words is the number of pseudo-words.
const Words = len(words)

// Tokenizer is the sim tokenizer. The zero value is ready to use and safe
// for concurrent use.
type Tokenizer struct{}

// Encode maps each byte of text to ByteBase+byte.
func (Tokenizer) Encode(text string) []int32 {
	out := make([]int32, len(text))
	for i := 0; i < len(text); i++ {
		out[i] = ByteBase + int32(text[i])
	}
	return out
}

// AppendPiece appends the text of id: a printable byte, nothing for the
// special ids, or a space and a pseudo-word.
func (Tokenizer) AppendPiece(dst []byte, id int32) []byte {
	switch {
	case id < ByteBase:
		return dst
	case id < ByteBase+256:
		if b := byte(id - ByteBase); b == '\n' || b == '\t' || b >= 0x20 && b < 0x7f {
			return append(dst, b)
		}
	}
	dst = append(dst, ' ')
	return append(dst, Word(id)...)
}

// Word returns the pseudo-word of id.
func Word(id int32) string {
	x := uint32(id) * 2654435761 // spread neighbouring ids over the list
	return words[(x>>8)%uint32(len(words))]
}

// Decode turns ids into text.
func (t Tokenizer) Decode(ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = t.AppendPiece(b, id)
	}
	return string(b)
}
