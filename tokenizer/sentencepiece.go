package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

// Limits for SentencePiece model files.
const (
	maxModelBytes = 64 << 20
	maxPieces     = 1 << 22
)

// OpenSentencePiece reads a SentencePiece .model file (a ModelProto
// protobuf) of model type BPE.
func OpenSentencePiece(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.Size() > maxModelBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrFormat, path, maxModelBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := ParseSentencePiece(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseSentencePiece decodes a SentencePiece ModelProto. It reads the
// pieces (text, score, type), the trainer's model type and special ids, and
// the normaliser's dummy-prefix and whitespace flags. Only BPE models with
// an identity normaliser (no precompiled character map) are accepted.
func ParseSentencePiece(b []byte) (*Tokenizer, error) {
	m := newSPMModel()
	if err := walkProto(b, m.field); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.tokenizer()
}

// spmModel accumulates the parts of a SentencePiece ModelProto that
// ParseSentencePiece uses.
type spmModel struct {
	tokens                       []string
	scores                       []float32
	types                        []int32
	addDummy, removeWS, escapeWS bool
	modelType                    uint64
	unk, bos, eos                int64
	charsmap                     bool
	byteFallback                 bool
}

// newSPMModel returns an spmModel holding the proto defaults.
func newSPMModel() *spmModel {
	return &spmModel{
		addDummy: true, removeWS: true, escapeWS: true,
		modelType: 1, // UNIGRAM is the proto default
		unk:       0, bos: 1, eos: 2,
	}
}

// field handles one top-level ModelProto field.
func (m *spmModel) field(field int, wire int, v uint64, data []byte) error {
	switch {
	case field == 1 && wire == 2: // SentencePiece
		return m.piece(data)
	case field == 2 && wire == 2: // TrainerSpec
		return walkProto(data, m.trainerField)
	case field == 3 && wire == 2: // NormalizerSpec
		return walkProto(data, m.normalizerField)
	}
	return nil
}

// piece decodes one SentencePiece message and appends it to the vocabulary.
func (m *spmModel) piece(data []byte) error {
	if len(m.tokens) >= maxPieces {
		return fmt.Errorf("%w: more than %d pieces", ErrFormat, maxPieces)
	}
	piece, score, typ := "", float32(0), int32(TypeNormal)
	err := walkProto(data, func(f, w int, v uint64, d []byte) error {
		switch {
		case f == 1 && w == 2:
			piece = string(d)
		case f == 2 && w == 5:
			score = math.Float32frombits(uint32(v))
		case f == 3 && w == 0:
			typ = int32(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.tokens = append(m.tokens, piece)
	m.scores = append(m.scores, score)
	m.types = append(m.types, typ)
	return nil
}

// trainerField handles one TrainerSpec field.
func (m *spmModel) trainerField(f, w int, v uint64, _ []byte) error {
	if w != 0 {
		return nil
	}
	switch f {
	case 3:
		m.modelType = v
	case 35:
		m.byteFallback = v != 0
	case 40:
		m.unk = int64(int32(v))
	case 41:
		m.bos = int64(int32(v))
	case 42:
		m.eos = int64(int32(v))
	}
	return nil
}

// normalizerField handles one NormalizerSpec field.
func (m *spmModel) normalizerField(f, w int, v uint64, d []byte) error {
	switch {
	case f == 2 && w == 2:
		m.charsmap = len(d) > 0
	case f == 3 && w == 0:
		m.addDummy = v != 0
	case f == 4 && w == 0:
		m.removeWS = v != 0
	case f == 5 && w == 0:
		m.escapeWS = v != 0
	}
	return nil
}

// check rejects models other than BPE with an identity normaliser and
// whitespace escaping.
func (m *spmModel) check() error {
	if m.modelType != 2 {
		return fmt.Errorf("%w: SentencePiece model type %d is not BPE", ErrFormat, m.modelType)
	}
	if m.charsmap {
		return fmt.Errorf("%w: SentencePiece normalisation rules (precompiled charsmap) are not supported", ErrFormat)
	}
	if !m.escapeWS {
		return fmt.Errorf("%w: SentencePiece models without whitespace escaping are not supported", ErrFormat)
	}
	return nil
}

// tokenizer builds the Tokenizer from the accumulated model.
func (m *spmModel) tokenizer() (*Tokenizer, error) {
	t, err := newTokenizer(SPM, m.tokens, m.scores, m.types)
	if err != nil {
		return nil, err
	}
	if !m.byteFallback {
		t.bytes = [256]int32{}
		for i := range t.bytes {
			t.bytes[i] = -1
		}
	}
	t.UNK, t.BOS, t.EOS = t.validID(m.unk), t.validID(m.bos), t.validID(m.eos)
	t.AddBOS = t.BOS >= 0
	t.AddSpacePrefix = m.addDummy
	t.RemoveExtraWhitespace = m.removeWS
	t.setEOG()
	return t, nil
}

// walkProto calls fn for each field of a protobuf message. For varints and
// fixed-width fields v holds the value; for length-delimited fields data
// holds the bytes.
func walkProto(b []byte, fn func(field, wire int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("%w: bad protobuf key", ErrFormat)
		}
		b = b[n:]
		field, wire := int(key>>3), int(key&7)
		if field == 0 {
			return fmt.Errorf("%w: protobuf field 0", ErrFormat)
		}
		var v uint64
		var data []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(b)
			if n <= 0 {
				return fmt.Errorf("%w: bad protobuf varint", ErrFormat)
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return fmt.Errorf("%w: truncated protobuf fixed64", ErrFormat)
			}
			v, b = binary.LittleEndian.Uint64(b), b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return fmt.Errorf("%w: bad protobuf length", ErrFormat)
			}
			data, b = b[n:n+int(l)], b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return fmt.Errorf("%w: truncated protobuf fixed32", ErrFormat)
			}
			v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		default:
			return fmt.Errorf("%w: protobuf wire type %d", ErrFormat, wire)
		}
		if err := fn(field, wire, v, data); err != nil {
			return err
		}
	}
	return nil
}
