package nn

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tokenrouter/tokenrouter/engine"
)

// MetaKey is the __metadata__ key under which a router file trained here
// carries its RouterMeta, as JSON.
const MetaKey = "tokenrouter.router"

// MetaFormat is the version of RouterMeta this package writes and the only
// one it reads.
const MetaFormat = 1

// Bounds on a RouterMeta read from a file.
const (
	maxMetaBytes = 64 << 10 // the JSON
	maxMetaName  = 1024     // model and algorithm names
	maxMetaSize  = 1 << 30  // vocabulary, hidden and embedding sizes, top-k
	maxMetaMap   = 64       // entries of Target and Metrics
)

// RouterMeta describes a router file: what it was trained for (the model
// pair, the small model's vocabulary and hidden width), its features and
// threshold, and how it did. It is the JSON of the MetaKey metadata entry;
// a file without that entry has no RouterMeta.
type RouterMeta struct {
	// Format is the version of this layout, MetaFormat.
	Format int `json:"format"`
	// Algorithm is the router's algorithm: "r2r", "citer" or "co-llm".
	Algorithm string `json:"algorithm"`
	// SLM and LLM name the small and large models it was trained on.
	SLM string `json:"slm"`
	LLM string `json:"llm"`
	// VocabSize, VocabHash and HiddenSize are the small model's
	// (engine.Info's VocabSize, VocabHash and HiddenSize); 0 or "" when
	// unknown.
	VocabSize  int    `json:"vocab_size"`
	VocabHash  string `json:"vocab_hash"`
	HiddenSize int    `json:"hidden_size"`
	// EmbedSize is the width of the token embedding and TopK the number of
	// top logits among the features (r2r only; 0 otherwise).
	EmbedSize int `json:"embed_size,omitempty"`
	TopK      int `json:"topk,omitempty"`
	// Threshold is the router's probability threshold, in [0, 1].
	Threshold float64 `json:"threshold"`
	// Target says how Threshold was chosen: {"share": s} (the share of
	// positions sent to the large model) or {"recall": r}, each in [0, 1].
	Target map[string]float64 `json:"target,omitempty"`
	// Metrics are the training run's results by name ("train_loss",
	// "heldout_auc", "examples", ...).
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// ReadMeta returns the RouterMeta of w: ok is false (and err nil) when w
// has none. The entry is read strictly: it must be one JSON object of at
// most 64 KiB with only RouterMeta's fields, of format MetaFormat, with
// values in range (see Check).
func ReadMeta(w *Weights) (m RouterMeta, ok bool, err error) {
	if w == nil {
		return RouterMeta{}, false, nil
	}
	s, ok := w.Meta[MetaKey]
	if !ok {
		return RouterMeta{}, false, nil
	}
	if len(s) > maxMetaBytes {
		return RouterMeta{}, true, fmt.Errorf("nn: metadata %s: %d bytes, at most %d", MetaKey, len(s), maxMetaBytes)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return RouterMeta{}, true, fmt.Errorf("nn: metadata %s: %w", MetaKey, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return RouterMeta{}, true, fmt.Errorf("nn: metadata %s: data after the JSON object", MetaKey)
	}
	if err := m.Check(); err != nil {
		return RouterMeta{}, true, fmt.Errorf("nn: metadata %s: %w", MetaKey, err)
	}
	return m, true, nil
}

// Check validates m: format MetaFormat, a known algorithm, names of valid
// UTF-8 within 1024 bytes, sizes in [0, 2³⁰], a vocabulary hash that is
// empty or 16 lowercase hex digits, a finite threshold in [0, 1], a target
// of share and/or recall in [0, 1], and at most 64 finite metrics.
func (m RouterMeta) Check() error {
	if m.Format != MetaFormat {
		return fmt.Errorf("format %d is not supported (want %d)", m.Format, MetaFormat)
	}
	switch m.Algorithm {
	case "r2r", "citer", "co-llm":
	default:
		return fmt.Errorf("algorithm %q: want r2r, citer or co-llm", m.Algorithm)
	}
	for _, n := range []struct{ name, v string }{{"slm", m.SLM}, {"llm", m.LLM}} {
		if len(n.v) > maxMetaName || !utf8.ValidString(n.v) {
			return fmt.Errorf("%s: not a name of valid UTF-8 within %d bytes", n.name, maxMetaName)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"vocab_size", m.VocabSize}, {"hidden_size", m.HiddenSize}, {"embed_size", m.EmbedSize}, {"topk", m.TopK}} {
		if n.v < 0 || n.v > maxMetaSize {
			return fmt.Errorf("%s %d out of range [0, %d]", n.name, n.v, maxMetaSize)
		}
	}
	if m.VocabHash != "" {
		if b, err := hex.DecodeString(m.VocabHash); err != nil || len(b) != 8 || strings.ToLower(m.VocabHash) != m.VocabHash {
			return fmt.Errorf("vocab_hash %q: want 16 lowercase hex digits", m.VocabHash)
		}
	}
	if !(m.Threshold >= 0 && m.Threshold <= 1) {
		return fmt.Errorf("threshold %v out of range [0, 1]", m.Threshold)
	}
	for k, v := range m.Target {
		if k != "share" && k != "recall" {
			return fmt.Errorf("target %q: want share or recall", k)
		}
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("target %s=%v out of range [0, 1]", k, v)
		}
	}
	if len(m.Metrics) > maxMetaMap {
		return fmt.Errorf("%d metrics, at most %d", len(m.Metrics), maxMetaMap)
	}
	for k, v := range m.Metrics {
		if len(k) > maxMetaName || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metric %.40q=%v: want a short name and a finite value", k, v)
		}
	}
	return nil
}

// Encode returns m as the JSON to store under MetaKey. A zero Format is
// written as MetaFormat; m must then pass Check.
func (m RouterMeta) Encode() (string, error) {
	if m.Format == 0 {
		m.Format = MetaFormat
	}
	if err := m.Check(); err != nil {
		return "", fmt.Errorf("nn: router metadata: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", fmt.Errorf("nn: router metadata: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// CheckModel checks that the router was trained for the small model it is
// given: name, with engine facts info. The vocabulary hashes are compared
// when both are known (non-empty), the vocabulary sizes and hidden widths
// when both are non-zero. The error names the router file and both sides'
// values; the caller prefixes its algorithm:
//
//	router r.safetensors was trained for vocabulary 3f2a… (512 tokens, hidden 64) of "stories260K", but model "small" has vocabulary 9c1d… (32000 tokens, hidden 288)
func (m RouterMeta) CheckModel(file string, info engine.Info, name string) error {
	differ := func(a, b int) bool { return a != 0 && b != 0 && a != b }
	if !(m.VocabHash != "" && info.VocabHash != "" && m.VocabHash != info.VocabHash) &&
		!differ(m.VocabSize, info.VocabSize) && !differ(m.HiddenSize, info.HiddenSize) {
		return nil
	}
	of := ""
	if m.SLM != "" {
		of = fmt.Sprintf(" of %q", m.SLM)
	}
	return fmt.Errorf("router %s was trained for %s%s, but model %q has %s", file,
		describeVocab(m.VocabHash, m.VocabSize, m.HiddenSize), of, name,
		describeVocab(info.VocabHash, info.VocabSize, info.HiddenSize))
}

// describeVocab says "vocabulary <hash> (<n> tokens, hidden <h>)", with
// "an unknown vocabulary" and "?" for what is not known.
func describeVocab(hash string, size, hidden int) string {
	v := "vocabulary " + hash
	if hash == "" {
		v = "an unknown vocabulary"
	}
	n, h := "?", "?"
	if size != 0 {
		n = fmt.Sprint(size)
	}
	if hidden != 0 {
		h = fmt.Sprint(hidden)
	}
	return fmt.Sprintf("%s (%s tokens, hidden %s)", v, n, h)
}

// CheckRouter checks a router file of algorithm, read from file as w,
// whose input takes hidden states of hidden values, before it serves: its
// RouterMeta, when it has one, must be for algorithm and agree with
// hidden; and when the small model's facts are known (infos[0], named
// models[0]), the metadata must pass CheckModel and hidden must be the
// model's hidden width (when known).
func CheckRouter(w *Weights, file, algorithm string, hidden int, infos []engine.Info, models []string) error {
	m, ok, err := ReadMeta(w)
	if err != nil {
		return fmt.Errorf("router %s: %w", file, err)
	}
	if ok && m.Algorithm != algorithm {
		return fmt.Errorf("router %s was trained for algorithm %s, not %s", file, m.Algorithm, algorithm)
	}
	if ok && m.HiddenSize != 0 && m.HiddenSize != hidden {
		return fmt.Errorf("router %s: its metadata says hidden %d but its weights take %d values", file, m.HiddenSize, hidden)
	}
	if len(infos) == 0 || len(models) == 0 {
		return nil
	}
	info, name := infos[0], models[0]
	if ok {
		if err := m.CheckModel(file, info, name); err != nil {
			return err
		}
	}
	if info.HiddenSize != 0 && info.HiddenSize != hidden {
		return fmt.Errorf("router %s takes hidden states of %d values, but model %q has hidden %d", file, hidden, name, info.HiddenSize)
	}
	return nil
}
